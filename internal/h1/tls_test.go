package h1

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
)

// Over TLS the loop serves with the connection's state, and a request it
// hands over reaches the handler with the same state (net/http alone would
// see only the wrapper and give none).
func TestTLS(t *testing.T) {
	pki := testkit.NewPKI(t, "h1-test")
	srvTLS := testkit.Source(t, pki.Issue("server"))
	cliTLS := testkit.Source(t, pki.Issue("client"))
	h := func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		who := "none"
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			who = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		fmt.Fprintf(w, "%s %s", served(w), who)
	}
	_, addr := startOn(t, h, nil, func(ln net.Listener) net.Listener { return srvTLS.Listen(ln, true) })
	c, err := tls.Dial("tcp", addr, cliTLS.Client(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(c)
	for _, tc := range []struct{ raw, want string }{
		{"GET /t/a HTTP/1.1\r\nHost: h\r\n\r\n", "loop client"},
		{"GET /t/b HTTP/1.1\r\nHost: h\r\n\r\n", "loop client"},
		{"POST /t/c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", "fallback client"},
		{"GET /t/d HTTP/1.1\r\nHost: h\r\n\r\n", "fallback client"}, // the connection stays with the fallback
	} {
		if _, err := io.WriteString(c, tc.raw); err != nil {
			t.Fatal(err)
		}
		if _, body := answer(t, br, "GET"); body != tc.want {
			t.Fatalf("%q: %q, want %q", tc.raw, body, tc.want)
		}
	}
	// A client without a certificate is refused at the handshake.
	anon := &tls.Config{RootCAs: cliTLS.Client(addr).RootCAs, ServerName: "127.0.0.1"}
	if c2, err := tls.Dial("tcp", addr, anon); err == nil {
		_ = c2.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.WriteString(c2, "GET /t/a HTTP/1.1\r\nHost: h\r\n\r\n")
		if _, err := http.ReadResponse(bufio.NewReader(c2), nil); err == nil {
			t.Fatal("a client without a certificate was answered")
		}
		c2.Close()
	}
}

// Plain HTTP sent to the TLS listener is told so, as net/http tells it.
func TestPlainHTTPToTLS(t *testing.T) {
	pki := testkit.NewPKI(t, "h1-plain")
	srvTLS := testkit.Source(t, pki.Issue("server"))
	_, addr := startOn(t, echo, nil, func(ln net.Listener) net.Listener { return srvTLS.Listen(ln, false) })
	c, br := dial(t, addr)
	io.WriteString(c, "GET /t/a HTTP/1.1\r\nHost: h\r\n\r\n")
	res, body := answer(t, br, "GET")
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "HTTPS server") {
		t.Fatalf("plain HTTP to TLS: %d %q", res.StatusCode, body)
	}
}
