package tlsx

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// pki is a CA and the files of certificates it issued, in a temp dir.
type pki struct {
	tb  testing.TB
	dir string
	ca  *CA
}

func newPKI(tb testing.TB, name string) *pki {
	tb.Helper()
	ca, err := NewCA(name, 24*time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	p := &pki{tb: tb, dir: tb.TempDir(), ca: ca}
	if err := WriteFile(p.path("ca.pem"), ca.PEM, 0o644); err != nil {
		tb.Fatal(err)
	}
	return p
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// files issues name's certificate for hosts and returns its Files, the
// CA bundle being p's.
func (p *pki) files(name string, hosts ...string) Files {
	p.tb.Helper()
	f := Files{Cert: p.path(name + ".pem"), Key: p.path(name + "-key.pem"), CA: p.path("ca.pem")}
	p.issueInto(f, name, hosts...)
	return f
}

// issueInto writes a new certificate for name over f's files.
func (p *pki) issueInto(f Files, name string, hosts ...string) *Leaf {
	p.tb.Helper()
	l, err := p.ca.Issue(name, hosts, time.Hour)
	if err != nil {
		p.tb.Fatal(err)
	}
	if err := l.Write(f.Cert, f.Key); err != nil {
		p.tb.Fatal(err)
	}
	return l
}

func load(tb testing.TB, f Files) *Source {
	tb.Helper()
	s, err := Load(f, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// echoServer serves HTTP over TLS from src on loopback, answering the
// client certificate's subject (or "-") and the serial of its own
// certificate in the handshake; stopped at cleanup.
func echoServer(tb testing.TB, src *Source, require bool) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who := "-"
		if HasClientCert(r) {
			who = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		fmt.Fprintf(w, "%s %s", who, r.TLS.NegotiatedProtocol)
	}), ErrorLog: log.New(io.Discard, "", 0)}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(src.Listen(ln, require)) })
	tb.Cleanup(func() {
		srv.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}

// get asks addr once over a fresh connection from src and returns the
// body and the connection's state.
func get(src *Source, addr string) (string, tls.ConnectionState, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := src.Dialer(d.DialContext)(ctx, "tcp", addr)
	if err != nil {
		return "", tls.ConnectionState{}, err
	}
	defer c.Close()
	tc := c.(*tls.Conn)
	if _, err := io.WriteString(tc, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		return "", tls.ConnectionState{}, err
	}
	res, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		return "", tls.ConnectionState{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return string(b), tc.ConnectionState(), err
}

func TestServeVerifyAndShowClientCert(t *testing.T) {
	p := newPKI(t, "ca")
	srv := load(t, p.files("n1", "127.0.0.1"))
	cli := load(t, p.files("router", "127.0.0.1"))
	addr := echoServer(t, srv, false)
	body, cs, err := get(cli, addr)
	if err != nil {
		t.Fatal(err)
	}
	if body != "router http/1.1" {
		t.Fatalf("body %q, want the client's name and http/1.1", body)
	}
	if cs.Version != tls.VersionTLS13 {
		t.Fatalf("version %x, want TLS 1.3 by default", cs.Version)
	}
	// A client with no certificate of its own is served too, unnamed.
	anon := load(t, Files{CA: p.path("ca.pem")})
	if body, _, err := get(anon, addr); err != nil || body != "- http/1.1" {
		t.Fatalf("anonymous client: %q %v", body, err)
	}
}

func TestTLS12AllowedOlderRefused(t *testing.T) {
	p := newPKI(t, "ca")
	addr := echoServer(t, load(t, p.files("n1", "127.0.0.1")), false)
	cli := load(t, p.files("c", "127.0.0.1"))
	for _, tc := range []struct {
		max  uint16
		fail bool
	}{{tls.VersionTLS12, false}, {tls.VersionTLS11, true}} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		cfg := cli.Client(addr)
		cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS10, tc.max
		err = tls.Client(c, cfg).Handshake()
		c.Close()
		if (err != nil) != tc.fail {
			t.Fatalf("max version %x: handshake err %v, want failure %v", tc.max, err, tc.fail)
		}
	}
}

// TestTLS12CBCSuitesRefused: under TLS 1.2 a listener takes only ECDHE
// with an AEAD, and a client offers nothing else: a peer speaking only a
// CBC-SHA1 suite is refused both ways, while an AEAD suite is taken.
func TestTLS12CBCSuitesRefused(t *testing.T) {
	p := newPKI(t, "ca")
	addr := echoServer(t, load(t, p.files("n1", "127.0.0.1")), false)
	cli := load(t, p.files("c", "127.0.0.1"))
	for _, tc := range []struct {
		suite uint16
		fail  bool
	}{
		{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, true},
		{tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA, true},
		{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256, true},
		{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, false},
		{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, false},
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		cfg := cli.Client(addr)
		cfg.MaxVersion, cfg.CipherSuites = tls.VersionTLS12, []uint16{tc.suite}
		tcn := tls.Client(c, cfg)
		err = tcn.Handshake()
		c.Close()
		if (err != nil) != tc.fail {
			t.Fatalf("suite %s: handshake err %v, want failure %v", tls.CipherSuiteName(tc.suite), err, tc.fail)
		}
	}

	// A server that speaks only a CBC suite is refused by fenec's client.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cbc := load(t, p.files("old", "127.0.0.1")).Server(false).Clone()
	cbc.GetConfigForClient = nil
	cbc.Certificates = []tls.Certificate{loadPair(t, p.path("old.pem"), p.path("old-key.pem"))}
	cbc.MaxVersion, cbc.CipherSuites = tls.VersionTLS12, []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_ = tls.Server(c, cbc).Handshake()
	})
	if _, _, err := get(cli, ln.Addr().String()); err == nil {
		t.Fatal("fenec's client completed a handshake with a server offering only a CBC-SHA1 suite")
	}
}

// loadPair reads a certificate and its key.
func loadPair(tb testing.TB, cert, key string) tls.Certificate {
	tb.Helper()
	c, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func TestServerOfAnotherCARefused(t *testing.T) {
	p, other := newPKI(t, "ca"), newPKI(t, "other")
	addr := echoServer(t, load(t, other.files("n1", "127.0.0.1")), false)
	_, _, err := get(load(t, p.files("router", "127.0.0.1")), addr)
	var verr *tls.CertificateVerificationError
	if !errors.As(err, &verr) {
		t.Fatalf("a server of another CA: err %v, want its chain refused", err)
	}
}

func TestServerNamedOtherwiseRefused(t *testing.T) {
	p := newPKI(t, "ca")
	// n1's certificate names n1 only: dialled at 127.0.0.1 it is not the
	// host asked for.
	addr := echoServer(t, load(t, p.files("n1", "n1.internal")), false)
	_, _, err := get(load(t, p.files("router")), addr)
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("a certificate for another name: err %v, want a name mismatch", err)
	}
}

func TestClientOfAnotherCARefused(t *testing.T) {
	p, other := newPKI(t, "ca"), newPKI(t, "other")
	addr := echoServer(t, load(t, p.files("n1", "127.0.0.1")), false)
	// The stranger trusts the server's CA but shows a certificate of its
	// own CA: the server refuses the handshake.
	f := other.files("stranger")
	f.CA = p.path("ca.pem")
	if _, _, err := get(load(t, f), addr); err == nil {
		t.Fatal("a client certificate of another CA was accepted")
	}
}

func TestRequiredClientCert(t *testing.T) {
	p := newPKI(t, "ca")
	addr := echoServer(t, load(t, p.files("n1", "127.0.0.1")), true)
	if _, _, err := get(load(t, Files{CA: p.path("ca.pem")}), addr); err == nil {
		t.Fatal("no client certificate, required: accepted")
	}
	if body, _, err := get(load(t, p.files("router")), addr); err != nil || body != "router http/1.1" {
		t.Fatalf("client certificate, required: %q %v", body, err)
	}
}

func TestReloadSwapsForNewHandshakes(t *testing.T) {
	p := newPKI(t, "ca")
	f := p.files("n1", "127.0.0.1")
	srv := load(t, f)
	addr := echoServer(t, srv, false)
	cli := load(t, p.files("router"))
	// A connection open across the reload keeps working.
	held, err := tls.Dial("tcp", addr, cli.Client(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	first := held.ConnectionState().PeerCertificates[0].SerialNumber

	next := p.issueInto(f, "n1", "127.0.0.1")
	if err := srv.Reload(); err != nil {
		t.Fatal(err)
	}
	_, cs, err := get(cli, addr)
	if err != nil {
		t.Fatal(err)
	}
	if got := cs.PeerCertificates[0].SerialNumber; got.Cmp(next.Cert.SerialNumber) != 0 || got.Cmp(first) == 0 {
		t.Fatalf("after reload the server showed serial %x, want the new %x", got, next.Cert.SerialNumber)
	}
	if _, err := io.WriteString(held, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(held), nil)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("connection open across the reload: %v", err)
	}
	res.Body.Close()
}

func TestWatchReloadsChangedFiles(t *testing.T) {
	p := newPKI(t, "ca")
	f := p.files("n1", "127.0.0.1")
	srv := load(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		Loop(ctx.Done(), nil, 10*time.Millisecond, srv.Reload, func() { _ = srv.Reload() }, slog.New(slog.DiscardHandler))
	})
	defer func() {
		cancel()
		wg.Wait()
	}()
	next := p.issueInto(f, "n1", "127.0.0.1")
	deadline := time.Now().Add(10 * time.Second)
	for srv.cur.Load().cert.Leaf.SerialNumber.Cmp(next.Cert.SerialNumber) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the watch did not load the new certificate")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestBadFilesKeepTheOldCertificate(t *testing.T) {
	p := newPKI(t, "ca")
	f := p.files("n1", "127.0.0.1")
	srv := load(t, f)
	addr := echoServer(t, srv, false)
	before := srv.cur.Load()
	// A certificate written before its key: they do not match.
	other, err := p.ca.Issue("n1", []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(f.Cert, other.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := srv.Reload(); err == nil {
		t.Fatal("a certificate and a key that do not match: reloaded")
	}
	if srv.cur.Load() != before {
		t.Fatal("a failed reload replaced the material")
	}
	if _, _, err := get(load(t, p.files("router")), addr); err != nil {
		t.Fatalf("serving after a failed reload: %v", err)
	}
	if err := os.WriteFile(f.Key, other.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := srv.Reload(); err != nil {
		t.Fatalf("the key written after: %v", err)
	}
}

func TestSessionsResumePerAddress(t *testing.T) {
	p := newPKI(t, "ca")
	a := echoServer(t, load(t, p.files("n1", "127.0.0.1")), false)
	b := echoServer(t, load(t, p.files("n2", "127.0.0.1")), false)
	cli := load(t, p.files("router"))
	for _, addr := range []string{a, b} {
		if _, cs, err := get(cli, addr); err != nil || cs.DidResume {
			t.Fatalf("first connection to %s: resumed %v, err %v", addr, cs.DidResume, err)
		}
	}
	// Both on one host: each resumes its own session.
	for _, addr := range []string{a, b, a} {
		if _, cs, err := get(cli, addr); err != nil || !cs.DidResume {
			t.Fatalf("later connection to %s: resumed %v, err %v", addr, cs.DidResume, err)
		}
	}
}

func TestResumedSessionCheckedAgainstTheCurrentBundle(t *testing.T) {
	p, other := newPKI(t, "ca"), newPKI(t, "other")
	srvFiles := p.files("n1", "127.0.0.1")
	srv := load(t, srvFiles)
	addr := echoServer(t, srv, false)
	cliFiles := p.files("router")
	cli := load(t, cliFiles)
	if _, _, err := get(cli, addr); err != nil {
		t.Fatal(err)
	}
	if _, cs, err := get(cli, addr); err != nil || !cs.DidResume {
		t.Fatalf("resumed %v, err %v", cs.DidResume, err)
	}
	// The client's bundle now trusts only another CA: its session of the
	// old one does not resume.
	if err := WriteFile(cliFiles.CA, other.ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cli.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := get(cli, addr); err == nil {
		t.Fatal("a session of a CA taken out of the client's bundle resumed")
	}

	// And the server's side: the client trusts the server again, the
	// server now only another CA's clients.
	if err := WriteFile(cliFiles.CA, p.ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cli.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := get(cli, addr); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(srvFiles.CA, other.ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := get(cli, addr); err == nil {
		t.Fatal("a client certificate of a CA taken out of the server's bundle resumed")
	}
}

func TestFilesValidate(t *testing.T) {
	for _, tc := range []struct {
		f    Files
		fail bool
	}{
		{Files{}, false},
		{Files{CA: "ca"}, false},
		{Files{Cert: "c", Key: "k"}, false},
		{Files{Cert: "c"}, true},
		{Files{Key: "k", CA: "ca"}, true},
	} {
		if err := tc.f.Validate(); (err != nil) != tc.fail {
			t.Errorf("%+v: err %v, want failure %v", tc.f, err, tc.fail)
		}
	}
	if _, err := Load(Files{CA: filepath.Join(t.TempDir(), "missing")}, nil); err == nil {
		t.Error("a missing CA bundle loaded")
	}
	empty := filepath.Join(t.TempDir(), "empty.pem")
	if err := os.WriteFile(empty, []byte("nothing here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(Files{CA: empty}, nil); !errors.Is(err, ErrNoCerts) {
		t.Errorf("a bundle with no certificate: %v", err)
	}
}
