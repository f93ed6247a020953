package connlimit

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
)

// server accepts through a Limiter and keeps what it accepted until the
// test releases it.
type server struct {
	l    *Limiter
	ln   net.Listener
	got  chan net.Conn
	done chan struct{}
}

func serve(t *testing.T, lim Limits) *server { return serveOn(t, lim, nil) }

// serveOn is serve with the listener under the Limiter's made by under
// (a TLS listener, say) when not nil.
func serveOn(t *testing.T, lim Limits, under func(net.Listener) net.Listener) *server {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if under != nil {
		raw = under(raw)
	}
	s := &server{l: New(lim, "test"), got: make(chan net.Conn, 1024), done: make(chan struct{})}
	s.ln = s.l.Listener(raw)
	go func() {
		defer close(s.done)
		for {
			c, err := s.ln.Accept()
			if err != nil {
				return
			}
			s.got <- c
		}
	}()
	t.Cleanup(func() {
		s.ln.Close()
		<-s.done
		close(s.got)
		for c := range s.got {
			c.Close()
		}
	})
	return s
}

// accepted is the next connection the server was given.
func (s *server) accepted(t *testing.T) net.Conn {
	t.Helper()
	select {
	case c := <-s.got:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no connection was given to the server")
		return nil
	}
}

// none checks that the server was given no connection.
func (s *server) none(t *testing.T) {
	t.Helper()
	select {
	case c := <-s.got:
		t.Fatalf("the server was given a connection from %s", c.RemoteAddr())
	case <-time.After(100 * time.Millisecond):
	}
}

// dialFrom connects to s from the loopback address ip (any of 127/8).
func dialFrom(t *testing.T, s *server, ip string) net.Conn {
	t.Helper()
	return testkit.DialFrom(t, ip, s.ln.Addr().String())
}

// refusal reads the answer to a refused connection, and checks the
// connection is closed after it.
func refusal(t *testing.T, c net.Conn) (*http.Response, string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to a refused connection: %v", err)
	}
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("the refusal's body: %v", err)
	}
	var e struct{ Error string }
	if err := json.Unmarshal(body, &e); err != nil || e.Error == "" {
		t.Fatalf("the refusal's body is not a JSON error: %q", body)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("the refused connection was not closed after its answer: %v", err)
	}
	return res, e.Error
}

func TestAddressPastItsShareIsRefusedOthersServed(t *testing.T) {
	s := serve(t, Limits{PerAddr: 2})
	dialFrom(t, s, "127.0.0.1")
	dialFrom(t, s, "127.0.0.1")
	held := []net.Conn{s.accepted(t), s.accepted(t)}
	// A third from the same address is answered 429 and never reaches the
	// server; it says what to do.
	c := dialFrom(t, s, "127.0.0.1")
	res, msg := refusal(t, c)
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" ||
		res.Header.Get("Content-Type") != "application/json" || res.Header.Get("X-Request-Id") == "" {
		t.Fatalf("refusal: %d %v", res.StatusCode, res.Header)
	}
	for _, want := range []string{"--max-conns-per-addr 2", "keep-alive", "proxy"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal %q does not say %q", msg, want)
		}
	}
	s.none(t)
	// Another address is served as before.
	dialFrom(t, s, "127.0.0.2")
	held = append(held, s.accepted(t))
	if got := testkit.CounterValue(t, s.l.refused.WithLabelValues(ReasonAddress)); got != 1 {
		t.Errorf("refused for the address: %v, want 1", got)
	}
	// Once the server lets one of the address's go, the address may open
	// one more.
	held[0].Close()
	s.l.Release(held[0])
	dialFrom(t, s, "127.0.0.1")
	s.accepted(t)
	if n := s.l.Open(); n != 3 {
		t.Errorf("open: %d, want 3", n)
	}
}

func TestTotalPastItIsRefused503(t *testing.T) {
	s := serve(t, Limits{Total: 2, PerAddr: 5})
	dialFrom(t, s, "127.0.0.1")
	dialFrom(t, s, "127.0.0.2")
	first := s.accepted(t)
	s.accepted(t)
	res, msg := refusal(t, dialFrom(t, s, "127.0.0.3"))
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Fatalf("refusal: %d %v", res.StatusCode, res.Header)
	}
	if !strings.Contains(msg, "--max-conns 2") {
		t.Errorf("the refusal %q does not name the bound", msg)
	}
	s.none(t)
	if got := testkit.CounterValue(t, s.l.refused.WithLabelValues(ReasonTotal)); got != 1 {
		t.Errorf("refused for the total: %v, want 1", got)
	}
	s.l.Release(first)
	dialFrom(t, s, "127.0.0.3")
	s.accepted(t)
}

// A client whose request, body and all, was on its way as it was refused
// still reads the answer. (The refusal reads what the client sent before
// closing, as net/http does, because some clients' systems drop an answer
// not yet read when the reset of a close over unread bytes reaches them;
// Linux keeps it, so on Linux this holds with or without that read.)
func TestRefusedClientThatSentItsRequestReadsTheAnswer(t *testing.T) {
	s := serve(t, Limits{PerAddr: 1})
	dialFrom(t, s, "127.0.0.1")
	s.accepted(t)
	for range 20 {
		c := dialFrom(t, s, "127.0.0.1")
		if _, err := io.WriteString(c, "POST /t/a/query HTTP/1.1\r\nHost: x\r\nContent-Length: 40000\r\n\r\n"+strings.Repeat("x", 40000)); err != nil {
			t.Fatal(err)
		}
		if res, _ := refusal(t, c); res.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("status %d", res.StatusCode)
		}
	}
}

// A flood past the bound costs at most maxRefusing refusals at once (the
// rest are closed unanswered), and closing the listener ends the
// refusals of clients that never read or hang up.
func TestFloodOfRefusalsIsBoundedAndEndsWithTheListener(t *testing.T) {
	was := refuseWithin
	refuseWithin = time.Minute // only the listener's close can end them
	t.Cleanup(func() { refuseWithin = was })
	s := serve(t, Limits{Total: 1})
	dialFrom(t, s, "127.0.0.1")
	s.accepted(t)
	// Clients that never hang up: each refusal waits on its client.
	var flood []net.Conn
	for range 3 * maxRefusing {
		c := dialFrom(t, s, "127.0.0.1")
		flood = append(flood, c)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.l.rmu.Lock()
		n := len(s.l.refusing)
		s.l.rmu.Unlock()
		if n > maxRefusing {
			t.Fatalf("%d refusals at once, past %d", n, maxRefusing)
		}
		if n == maxRefusing || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	unanswered := 0
	for _, c := range flood {
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		b := make([]byte, 1)
		if _, err := c.Read(b); err != nil && !errors.Is(err, io.EOF) && !isReset(err) {
			t.Fatalf("a flooding client: %v", err)
		} else if err != nil {
			unanswered++
		}
	}
	if unanswered < 2*maxRefusing-maxRefusing/2 {
		t.Errorf("%d of %d unanswered: the flood was answered past the bound", unanswered, len(flood))
	}
	if got := testkit.CounterValue(t, s.l.refused.WithLabelValues(ReasonTotal)); got != float64(len(flood)) {
		t.Errorf("refused: %v, want %d", got, len(flood))
	}
	closed := make(chan struct{})
	go func() { s.ln.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("closing the listener did not end the refusals under way")
	}
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "reset")
}

func TestReleaseFromManyGoroutinesKeepsTheCount(t *testing.T) {
	l := New(Limits{Total: 100, PerAddr: 10}, "test")
	var wg sync.WaitGroup
	addr := &net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 1}
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				if l.admit(addr) == "" {
					l.Release(fakeConn{addr})
				}
			}
		})
	}
	wg.Wait()
	if l.Open() != 0 || len(l.by) != 0 {
		t.Fatalf("after every connection ended: open %d, addresses %v", l.Open(), l.by)
	}
}

type fakeConn struct{ remote net.Addr }

func (c fakeConn) RemoteAddr() net.Addr { return c.remote }
func (fakeConn) Read([]byte) (int, error) {
	return 0, io.EOF
}
func (fakeConn) Write(p []byte) (int, error)      { return len(p), nil }
func (fakeConn) Close() error                     { return nil }
func (fakeConn) LocalAddr() net.Addr              { return nil }
func (fakeConn) SetDeadline(time.Time) error      { return nil }
func (fakeConn) SetReadDeadline(time.Time) error  { return nil }
func (fakeConn) SetWriteDeadline(time.Time) error { return nil }

func TestAnIPv6ClientIsCountedByItsSlash64(t *testing.T) {
	l := New(Limits{PerAddr: 2}, "test")
	a := func(ip string) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: 4000} }
	if l.admit(a("2001:db8:1:2::1")) != "" || l.admit(a("2001:db8:1:2:ffff::9")) != "" {
		t.Fatal("the first two of a /64 were refused")
	}
	if r := l.admit(a("2001:db8:1:2:abcd::7")); r != ReasonAddress {
		t.Fatalf("a third address of the same /64: %q, want refused", r)
	}
	if r := l.admit(a("2001:db8:1:3::1")); r != "" {
		t.Fatalf("another /64: %q, want admitted", r)
	}
	if r := l.admit(a("192.0.2.1")); r != "" {
		t.Fatalf("an IPv4 address: %q", r)
	}
}

func TestFlags(t *testing.T) {
	lim := Limits{Total: 7, PerAddr: 3}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	lim.AddFlags(fs)
	if err := fs.Parse([]string{"--max-conns", "0", "--max-conns-per-addr", "12"}); err != nil {
		t.Fatal(err)
	}
	if lim != (Limits{Total: 0, PerAddr: 12}) {
		t.Fatalf("parsed %+v", lim)
	}
	for _, bad := range []string{"-1", "x", "1.5"} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		lim.AddFlags(fs)
		if err := fs.Parse([]string{"--max-conns", bad}); err == nil {
			t.Errorf("--max-conns %s was taken", bad)
		}
	}
}

// Over TLS a refused client reads its answer over TLS: the refusal runs
// the handshake (bounded like the rest of it), then answers.
func TestRefusalOverTLS(t *testing.T) {
	pki := testkit.NewPKI(t, "conns")
	src := testkit.Source(t, pki.Issue("server"))
	s := serveOn(t, Limits{PerAddr: 1}, func(ln net.Listener) net.Listener { return src.Listen(ln, false) })
	dialTLS := func() *tls.Conn {
		raw := dialFrom(t, s, "127.0.0.1")
		c := tls.Client(raw, src.Client("127.0.0.1"))
		t.Cleanup(func() { c.Close() })
		return c
	}
	dialTLS() // held by the server, which never reads it: no handshake
	s.accepted(t)
	c := dialTLS()
	if _, err := io.WriteString(c, "GET /t/a/c HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if res, msg := refusal(t, c); res.StatusCode != http.StatusTooManyRequests || !strings.Contains(msg, "--max-conns-per-addr 1") {
		t.Fatalf("over TLS: %d %q", res.StatusCode, msg)
	}
	s.none(t)
}

func TestATrustedAddressIsSparedItsShareNotTheTotal(t *testing.T) {
	s := serve(t, Limits{Total: 4, PerAddr: 1})
	dialFrom(t, s, "127.0.0.1")
	held := []net.Conn{s.accepted(t)}
	if res, _ := refusal(t, dialFrom(t, s, "127.0.0.1")); res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a second connection before trust: %d, want 429", res.StatusCode)
	}
	// The server learned 127.0.0.1 is one of its own (as a request's
	// RemoteAddr names it): its connections pass the share from now on.
	s.l.Trust(held[0].RemoteAddr().String())
	for range 3 {
		dialFrom(t, s, "127.0.0.1")
		held = append(held, s.accepted(t))
	}
	// ... but not the total: a fifth is refused 503, and a stranger,
	// untrusted, is held to its share by the total as well.
	if res, _ := refusal(t, dialFrom(t, s, "127.0.0.1")); res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("past the total while trusted: %d, want 503", res.StatusCode)
	}
	s.l.Release(held[0])
	dialFrom(t, s, "127.0.0.2")
	held = append(held, s.accepted(t))
	if res, _ := refusal(t, dialFrom(t, s, "127.0.0.2")); res.StatusCode != http.StatusServiceUnavailable &&
		res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("an untrusted second connection: %d", res.StatusCode)
	}
	for _, c := range held {
		c.Close()
	}
}

func TestTrustIsBounded(t *testing.T) {
	l := New(Limits{PerAddr: 1}, "test")
	for i := range maxTrusted + 10 {
		l.Trust(fmt.Sprintf("10.%d.%d.%d:80", i>>16&255, i>>8&255, i&255))
	}
	if len(l.trusted) != maxTrusted {
		t.Fatalf("trusted %d addresses, want at most %d", len(l.trusted), maxTrusted)
	}
}

func TestClampLeavesDescriptorsForTheServer(t *testing.T) {
	for _, c := range []struct {
		lim     Limits
		nofile  uint64
		want    int
		lowered bool
	}{
		{Limits{Total: 65536}, 65536, 65536 - 16384, true}, // the shipped unit: a quarter kept
		{Limits{Total: 1000}, 65536, 1000, false},          // already below
		{Limits{Total: 0}, 1024, 1024 - 256, true},         // unbounded becomes bounded
		{Limits{Total: 65536}, 200, 200 - 64, true},        // at least 64 kept
		{Limits{Total: 65536}, 50, 1, true},                // a limit too small to share
		{Limits{Total: 65536}, 0, 65536, false},            // no limit known
	} {
		got, lowered, _ := c.lim.clampTo(c.nofile)
		if got.Total != c.want || lowered != c.lowered {
			t.Errorf("%+v at %d descriptors: Total %d lowered %v, want %d %v", c.lim, c.nofile, got.Total, lowered, c.want, c.lowered)
		}
	}
}

func TestKeepForPeersHoldsAShareOfTheTotalForTrustedAddresses(t *testing.T) {
	s := serve(t, Limits{Total: 8})
	s.l.KeepForPeers() // one of eight
	var held []net.Conn
	for range 7 {
		dialFrom(t, s, "127.0.0.2")
		held = append(held, s.accepted(t))
	}
	// Strangers have filled their seven: the eighth is not theirs.
	if res, _ := refusal(t, dialFrom(t, s, "127.0.0.3")); res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a stranger past the strangers' share: %d, want 503", res.StatusCode)
	}
	// A peer that proved itself still gets it.
	s.l.Trust("127.0.0.1:9")
	dialFrom(t, s, "127.0.0.1")
	held = append(held, s.accepted(t))
	if res, _ := refusal(t, dialFrom(t, s, "127.0.0.1")); res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a peer past the total: %d, want 503", res.StatusCode)
	}
	for _, c := range held {
		c.Close()
	}
}
