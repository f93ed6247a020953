package region

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/internal/tlsx"
	"github.com/fenec-go/fenec/node"
)

// tlsClient is an HTTP client showing files' certificate (if any) and
// verifying servers against files' bundle.
func tlsClient(tb testing.TB, files tlsx.Files) *http.Client {
	tb.Helper()
	src := testkit.Source(tb, files)
	var d net.Dialer
	tr := &http.Transport{DialTLSContext: src.Dialer(d.DialContext)}
	tb.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func tlsDo(tb testing.TB, c *http.Client, method, url, token, body string) (int, []byte) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cpWait)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		tb.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := c.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// TestRouterAndNodeOverTLS: a router serving HTTPS over an embedded
// member whose ports are https with client certificates, a node serving
// HTTPS that takes admin calls only beside a client certificate: the
// node is recorded https://, a tenant placed, written and read through
// the router; /_shard/ without a client certificate is refused 403.
func TestRouterAndNodeOverTLS(t *testing.T) {
	p := testkit.NewPKI(t, "ca")
	ncfg := node.DefaultConfig()
	ncfg.Dir, ncfg.HTTP, ncfg.AdminToken, ncfg.Sync = t.TempDir(), "127.0.0.1:0", cpAdminToken, "off"
	ncfg.TLS, ncfg.ClientAuth, ncfg.Logger = p.Issue("n1"), node.ClientAuthAdmin, testkit.Logger()
	n, err := node.New(ncfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })

	r := startCPRouter(t, func(c *Config) {
		c.TLS, c.ClientAuth = p.Issue("router"), ClientAuthAdmin
		c.Etcd.ClientURL, c.Etcd.PeerURL = "https://127.0.0.1:0", "https://127.0.0.1:0"
	})
	if !strings.HasPrefix(r.rt.DirectoryURLs()[0], "https://") {
		t.Fatalf("the member's client url %s", r.rt.DirectoryURLs()[0])
	}
	base := "https://" + r.rt.Addr()
	op := tlsClient(t, p.Issue("operator"))

	st, b := tlsDo(t, op, "PUT", base+"/_shard/nodes/n1", cpRouterToken,
		`{"addr": "https://`+n.Addr()+`", "token": "`+cpAdminToken+`", "region": "eu"}`)
	if st != http.StatusCreated {
		t.Fatalf("record the node over mutual tls: %d %s", st, b)
	}
	if st, b := tlsDo(t, op, "PUT", base+"/_shard/tenants/acme", cpRouterToken, `{"node": "n1"}`); st != http.StatusCreated {
		t.Fatalf("place: %d %s", st, b)
	}
	app := tlsClient(t, tlsx.Files{CA: p.Bundle()}) // an application shows no certificate
	if st, b := tlsDo(t, app, "POST", base+"/t/acme/query", "", `{"query": "create collection c (name text)"}`); st != 200 {
		t.Fatalf("create through the router: %d %s", st, b)
	}
	if st, b := tlsDo(t, app, "POST", base+"/t/acme/c", "", `{"name": "ada"}`); st != 201 {
		t.Fatalf("write through the router: %d %s", st, b)
	}
	if st, b := tlsDo(t, app, "GET", base+"/t/acme/c?count", "", ""); st != 200 || !bytes.Contains(b, []byte(`"count":1`)) {
		t.Fatalf("read through the router: %d %s", st, b)
	}
	// /_shard/ beside the token but without a client certificate: 403.
	st, b = tlsDo(t, app, "GET", base+"/_shard/nodes", cpRouterToken, "")
	if st != http.StatusForbidden || !bytes.Contains(b, []byte("client certificate")) {
		t.Fatalf("/_shard/ without a client certificate: %d %s", st, b)
	}
	// The node's admin surface, called without one, refuses too.
	if st, b := tlsDo(t, app, "GET", "https://"+n.Addr()+"/_admin/stats", cpAdminToken, ""); st != http.StatusForbidden {
		t.Fatalf("node admin without a client certificate: %d %s", st, b)
	}
	// The directory's client port takes no client without a certificate.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if d, err := global.OpenEtcd(ctx, r.rt.DirectoryURLs(), "", global.WithTLS(testkit.Source(t, tlsx.Files{CA: p.Bundle()}).Etcd())); err == nil {
		d.Close()
		t.Fatal("the directory served a client with no certificate")
	}
}

// TestNodeAddressOffLoopbackMustBeHTTPS: a node recorded off loopback in
// clear is refused 400 saying to serve it https:// (the rule itself is
// region/trust's CheckNodeAddr, tested there).
func TestNodeAddressOffLoopbackMustBeHTTPS(t *testing.T) {
	r := startCPRouter(t, nil)
	st, b := r.shard(t, http.MethodPut, "nodes/n9", map[string]any{"addr": "http://10.0.0.9:7070", "token": "x", "region": "eu"}, nil)
	if st != http.StatusBadRequest || !bytes.Contains(b, []byte("https://")) {
		t.Fatalf("a node recorded off loopback in clear: %d %s", st, b)
	}
}

// TestRouterReadsItsTokenFileAgainOnReload: the router token read from
// --token-file is read again on SIGHUP: the new one is taken and the old
// refused; an empty file changes nothing.
func TestRouterReadsItsTokenFileAgainOnReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "router-token")
	write := func(tok string) {
		if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(cpRouterToken)
	reload := make(chan os.Signal)
	r := startCPRouter(t, func(c *Config) { c.TokenFile, c.Reload = path, reload })
	with := func(tok string) int {
		st, _, _ := cpDo(t, http.MethodGet, r.url+"/_shard/nodes", tok, nil, nil)
		return st
	}
	if with(cpRouterToken) != 200 {
		t.Fatal("the token read at start is not taken")
	}
	write("router-two")
	reload <- syscall.SIGHUP
	reload <- syscall.SIGHUP // taken once the first reload is done
	if with("router-two") != 200 || with(cpRouterToken) != 401 {
		t.Fatal("the token file read again: the new token not taken, or the old still taken")
	}
	write("")
	reload <- syscall.SIGHUP
	reload <- syscall.SIGHUP
	if with("router-two") != 200 {
		t.Fatal("an empty token file changed the token in use")
	}
}

// TestRouterSilentHandshakesHoldOffNobody: clients that connect to a TLS
// router and never finish a hello hold off no one, and each is cut after
// the header bound.
func TestRouterSilentHandshakesHoldOffNobody(t *testing.T) {
	p := testkit.NewPKI(t, "ca")
	r := startCPRouter(t, func(c *Config) { c.TLS = p.Issue("router") })
	addr := r.rt.Addr()
	var silent []net.Conn
	defer func() {
		for _, c := range silent {
			c.Close()
		}
	}()
	for range 20 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, c)
	}
	op := tlsClient(t, p.Issue("operator"))
	if st, b := tlsDo(t, op, "GET", "https://"+addr+"/_shard/nodes", cpRouterToken, ""); st != 200 {
		t.Fatalf("served beside silent handshakes: %d %s", st, b)
	}
	_ = silent[0].SetReadDeadline(time.Now().Add(30 * time.Second)) // a bound on a hang
	if _, err := silent[0].Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a silent handshake was not cut: %v", err)
	}
}
