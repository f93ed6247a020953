package node

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/forwarded"
	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/internal/tlsx"
)

// withTLS serves the node over TLS with files.
func withTLS(files tlsx.Files, auth string) func(*Config) {
	return func(c *Config) {
		c.TLS, c.ClientAuth = files, auth
		c.TLSWatch = 20 * time.Millisecond
	}
}

// overTLS points n's test client at its https:// URL, showing client's
// certificate (if any) and verifying the node against client's bundle.
func overTLS(tb testing.TB, n *testNode, client tlsx.Files) {
	tb.Helper()
	src := testkit.Source(tb, client)
	var d net.Dialer
	tr := &http.Transport{DialTLSContext: src.Dialer(d.DialContext), MaxIdleConnsPerHost: 32}
	tb.Cleanup(tr.CloseIdleConnections)
	n.url = "https://" + n.s.Addr()
	n.client = &http.Client{Transport: tr}
}

func TestNodeServesTLS(t *testing.T) {
	p := testkit.NewPKI(t, "ca")
	n := startNode(t, withTLS(p.Issue("n1"), ClientAuthNone))
	overTLS(t, n, tlsx.Files{CA: p.Bundle()})
	n.mkTenant("a")
	n.q("a", `create collection c (name text)`)
	if r := n.do("GET", "/_health", ""); r.Status != 200 {
		t.Fatalf("health over tls: %d %s", r.Status, r.Body)
	}
	// Plain HTTP to the TLS port gets no answer.
	res, err := http.Get("http://" + n.s.Addr() + "/_health")
	if err == nil {
		res.Body.Close()
		if res.StatusCode == 200 {
			t.Fatal("plain http to a tls node answered 200")
		}
	}
}

func TestNodeAdminNeedsClientCert(t *testing.T) {
	p, other := testkit.NewPKI(t, "ca"), testkit.NewPKI(t, "other")
	n := startNode(t, withTLS(p.Issue("n1"), ClientAuthAdmin))

	// No client certificate: data is served, admin is refused 403 though
	// the token is right, and nothing is counted against the token.
	overTLS(t, n, tlsx.Files{CA: p.Bundle()})
	r := n.admin("GET", "stats", "")
	wantJSONError(t, r, http.StatusForbidden)
	if !strings.Contains(string(r.Body), "client certificate") {
		t.Fatalf("refusal %s does not say what is missing", r.Body)
	}
	if r := n.do("GET", "/_health", ""); r.Status != 200 {
		t.Fatalf("health without a client certificate: %d", r.Status)
	}

	// A certificate of the node's CA and the token: served.
	overTLS(t, n, p.Issue("router"))
	if r := n.admin("GET", "stats", ""); r.Status != 200 {
		t.Fatalf("admin with a client certificate: %d %s", r.Status, r.Body)
	}
	// The certificate alone is not enough.
	wantJSONError(t, n.do("GET", "/_admin/stats", ""), http.StatusUnauthorized)

	// A certificate of another CA is refused at the handshake.
	stranger := other.Issue("router")
	stranger.CA = p.Bundle()
	src := testkit.Source(t, stranger)
	c, err := net.Dial("tcp", n.s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tc := tls.Client(c, src.Client(n.s.Addr()))
	err = tc.Handshake()
	if err == nil {
		// TLS 1.3: the client's certificate is judged after the client's
		// side of the handshake; the refusal arrives with the first read.
		_ = tc.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = tc.Write([]byte("GET /_health HTTP/1.1\r\nHost: x\r\n\r\n"))
		if err == nil {
			_, err = tc.Read(make([]byte, 1))
		}
	}
	if err == nil {
		t.Fatal("a client certificate of another CA was served")
	}
}

func TestNodeAllNeedsClientCert(t *testing.T) {
	p := testkit.NewPKI(t, "ca")
	n := startNode(t, withTLS(p.Issue("n1"), ClientAuthAll))
	src := testkit.Source(t, tlsx.Files{CA: p.Bundle()})
	var d net.Dialer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := src.Dialer(d.DialContext)(ctx, "tcp", n.s.Addr())
	if err == nil {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _ = c.Write([]byte("GET /_health HTTP/1.1\r\nHost: x\r\n\r\n"))
		_, err = c.Read(make([]byte, 1))
		c.Close()
	}
	if err == nil {
		t.Fatal("a client with no certificate was served under --tls-client-auth all")
	}
	overTLS(t, n, p.Issue("app"))
	if r := n.do("GET", "/_health", ""); r.Status != 200 {
		t.Fatalf("with a certificate: %d", r.Status)
	}
}

func TestReplicaFollowsOverTLS(t *testing.T) {
	p, other := testkit.NewPKI(t, "ca"), testkit.NewPKI(t, "other")
	a := startNode(t, func(c *Config) { withRepl(c); withTLS(p.Issue("a"), ClientAuthAdmin)(c) })
	b := startNode(t, func(c *Config) { withRepl(c); withTLS(p.Issue("b"), ClientAuthAdmin)(c) })
	overTLS(t, a, p.Issue("router"))
	overTLS(t, b, p.Issue("router"))
	people(t, a)
	b.mkTenant("a")
	if r := b.admin("POST", "tenants/a/follow", `{"from":"`+a.url+`"}`); r.Status != 200 {
		t.Fatalf("follow: %d %s", r.Status, r.Body)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return count(b, "a") == `{"count":3}` }, "the copy took the primary's image over tls")
	a.q("a", `put c {name: "dee", n: 4}`)
	testkit.Eventually(t, 10*time.Second, func() bool { return count(b, "a") == `{"count":4}` }, "the copy took a new record over tls")

	// A primary whose certificate another CA issued is not followed: the
	// copy ends the handshake, which the stranger logs.
	var seen logSink
	c := startNode(t, func(cfg *Config) {
		withRepl(cfg)
		withTLS(other.Issue("c"), ClientAuthNone)(cfg)
		cfg.Logger = slog.New(slog.NewTextHandler(&seen, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	overTLS(t, c, tlsx.Files{CA: other.Bundle()})
	people(t, c)
	b.mkTenant("cc")
	if r := b.admin("POST", "tenants/cc/follow", `{"from":"`+c.url+`"}`); r.Status != 200 {
		t.Fatalf("follow: %d %s", r.Status, r.Body)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		return strings.Contains(seen.String(), "TLS handshake error")
	}, "the copy refused the stranger's certificate")
	if got := count(b, "cc"); got != `{"count":0}` && !strings.Contains(got, "unknown collection") {
		t.Fatalf("the copy took rows from a primary of another CA: %s", got)
	}
}

// logSink gathers a logger's output for a test to look at.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logSink) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(b)
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func TestNodeReloadsRotatedCertificate(t *testing.T) {
	p := testkit.NewPKI(t, "ca")
	files := p.Issue("n1")
	reload := make(chan os.Signal)
	n := startNode(t, func(c *Config) {
		withTLS(files, ClientAuthNone)(c)
		c.TLSWatch = time.Hour // only the reload signal reloads here
		c.Reload = reload
	})
	serial := func() string {
		src := testkit.Source(t, tlsx.Files{CA: p.Bundle()})
		c, err := tls.Dial("tcp", n.s.Addr(), src.Client(n.s.Addr()))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := serial()
	leaf := p.Reissue(files, "n1")
	reload <- syscall.SIGHUP
	testkit.Eventually(t, 10*time.Second, func() bool {
		return serial() == leaf.Cert.SerialNumber.String()
	}, "the node serves the reissued certificate")
	if before == leaf.Cert.SerialNumber.String() {
		t.Fatal("the reissued certificate has the old serial")
	}
}

// TestSilentHandshakesHoldOffNobody: clients that connect to a TLS node
// and never say hello (or hang up half way through theirs) hold off no
// one else, and each silent one is cut after the header bound.
func TestSilentHandshakesHoldOffNobody(t *testing.T) {
	p := testkit.NewPKI(t, "ca")
	n := startNode(t, withTLS(p.Issue("n1"), ClientAuthAdmin))
	var silent []net.Conn
	for range 20 {
		c, err := net.Dial("tcp", n.s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, c)
	}
	defer func() {
		for _, c := range silent {
			c.Close()
		}
	}()
	// Half a hello, then gone.
	for range 5 {
		c, err := net.Dial("tcp", n.s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write([]byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01})
		c.Close()
	}
	overTLS(t, n, p.Issue("router"))
	n.mkTenant("a")
	if r := n.admin("GET", "stats", ""); r.Status != 200 {
		t.Fatalf("served beside silent handshakes: %d %s", r.Status, r.Body)
	}
	// A silent one is closed by the node within the bound on a header
	// (10 s); 30 s is a bound on a hang.
	_ = silent[0].SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := silent[0].Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a silent handshake was not cut: %v", err)
	}
}

// TestNodeReadsTokenFilesAgainOnReload: tokens read from files are read
// again on SIGHUP (Reload): the new ones are taken, and the ones they
// replaced as well until the next reload, which ends the change; a file
// that cannot be read, or tokens that would be one another's, change
// nothing.
func TestNodeReadsTokenFilesAgainOnReload(t *testing.T) {
	dir := t.TempDir()
	write := func(name, tok string) string {
		path := dir + "/" + name
		if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	reload := make(chan os.Signal)
	hup := func() {
		reload <- syscall.SIGHUP
		reload <- syscall.SIGHUP // taken once the first reload is done
	}
	n := startNode(t, func(c *Config) {
		c.AdminToken, c.HTTPToken = adminToken, "data-one"
		c.TokenFiles = TokenFiles{Admin: write("admin", adminToken), HTTP: write("data", "data-one")}
		c.Reload = reload
	})
	n.mkTenant("a")
	adminWith := func(tok string) int {
		return n.do("GET", "/_admin/stats", "", "Authorization", "Bearer "+tok).Status
	}
	dataWith := func(tok string) int {
		return n.do("GET", "/t/a/_changes?since=0", "", "Authorization", "Bearer "+tok).Status
	}
	proofOf := func(tok string) int { // a router's request naming a client beside a proof
		return n.do("GET", "/t/a/_changes?since=0", "", "Authorization", "Bearer data-two",
			forwarded.HeaderProof, forwarded.Proof(tok), forwarded.HeaderClient, "203.0.113.9").Status
	}
	if adminWith(adminToken) != 200 || dataWith("data-one") != 200 {
		t.Fatal("the tokens read at start are not taken")
	}
	write("admin", "admin-two")
	write("data", "data-two")
	reload <- syscall.SIGHUP
	testkit.Eventually(t, 10*time.Second, func() bool { return adminWith("admin-two") == 200 }, "the admin token read again")
	if dataWith("data-two") != 200 || proofOf("admin-two") != 200 {
		t.Fatal("the data token read again, or a proof of the new admin token, is not taken")
	}
	// Until the next reload, the replaced tokens and proofs are taken too:
	// the routers are recorded again meanwhile.
	if adminWith(adminToken) != 200 || dataWith("data-one") != 200 || proofOf(adminToken) != 200 {
		t.Fatal("a token the reload replaced is refused before the next reload")
	}
	// The next reload, with nothing changed, ends the change.
	hup()
	if adminWith(adminToken) != 401 || dataWith("data-one") != 401 {
		t.Fatal("a replaced token is still taken after the next reload")
	}
	if adminWith("admin-two") != 200 || dataWith("data-two") != 200 {
		t.Fatal("the tokens in use are refused after the next reload")
	}
	// An empty file, or a data token equal to the admin token: nothing
	// changes.
	write("admin", "")
	hup()
	write("admin", "admin-two")
	write("data", "admin-two")
	hup()
	if adminWith("admin-two") != 200 || dataWith("data-two") != 200 {
		t.Fatal("a bad token file changed the tokens in use")
	}
}
