package proxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fenec-go/fenec/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer echoes every byte back; it closes with the test.
func echoServer(tb testing.TB) string { return tagServer(tb, "") }

// tagServer echoes every line back after tag.
func tagServer(tb testing.TB, tag string) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]struct{}{}
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				if tag == "" {
					_, _ = io.Copy(c, c)
					return
				}
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := io.WriteString(c, tag+line); err != nil {
						return
					}
				}
			})
		}
	})
	tb.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func dial(tb testing.TB, addr string) net.Conn {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

func roundTrip(tb testing.TB, c net.Conn, br *bufio.Reader, msg string) {
	tb.Helper()
	if _, err := io.WriteString(c, msg+"\n"); err != nil {
		tb.Fatalf("write: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := br.ReadString('\n')
	if err != nil || got != msg+"\n" {
		tb.Fatalf("read %q, %v; want %q", got, err, msg)
	}
}

// silent checks that nothing comes back for a while (a correct proxy never
// passes anything while cut, so this cannot fail spuriously).
func silent(tb testing.TB, c net.Conn, br *bufio.Reader) {
	tb.Helper()
	_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	b, err := br.ReadByte()
	if err == nil {
		tb.Fatalf("got %q through a cut", b)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		tb.Fatalf("connection ended through a cut: %v", err)
	}
}

func TestForwards(t *testing.T) {
	p := New(t, echoServer(t))
	c := dial(t, p.Addr())
	br := bufio.NewReader(c)
	roundTrip(t, c, br, "hello")
	roundTrip(t, c, br, "again")
}

func TestCutHoldsBothWaysAndHealDelivers(t *testing.T) {
	p := New(t, echoServer(t))
	old := dial(t, p.Addr())
	oldR := bufio.NewReader(old)
	roundTrip(t, old, oldR, "before")

	p.Cut()
	if _, err := io.WriteString(old, "held\n"); err != nil {
		t.Fatalf("write through a cut should not fail: %v", err)
	}
	silent(t, old, oldR)

	fresh := dial(t, p.Addr()) // accepted, but hangs
	freshR := bufio.NewReader(fresh)
	if _, err := io.WriteString(fresh, "parked\n"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return p.Accepted() == 2 })
	silent(t, fresh, freshR)

	p.Heal()
	_ = old.SetReadDeadline(time.Now().Add(10 * time.Second))
	if got, err := oldR.ReadString('\n'); err != nil || got != "held\n" {
		t.Fatalf("after heal old conn read %q, %v", got, err)
	}
	_ = fresh.SetReadDeadline(time.Now().Add(10 * time.Second))
	if got, err := freshR.ReadString('\n'); err != nil || got != "parked\n" {
		t.Fatalf("after heal parked conn read %q, %v", got, err)
	}
	roundTrip(t, old, oldR, "after")
}

func TestResetSendsRST(t *testing.T) {
	p := New(t, echoServer(t))
	c := dial(t, p.Addr())
	br := bufio.NewReader(c)
	roundTrip(t, c, br, "x")
	p.Reset()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := br.ReadByte()
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after reset: %v, want connection reset", err)
	}
	// The proxy still takes new connections.
	c2 := dial(t, p.Addr())
	roundTrip(t, c2, bufio.NewReader(c2), "y")
}

func TestCloseEndsConnections(t *testing.T) {
	p := New(t, echoServer(t))
	c := dial(t, p.Addr())
	br := bufio.NewReader(c)
	roundTrip(t, c, br, "x")
	p.Cut()
	p.Close()
	p.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after close: %v, want the connection ended", err)
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Fatal("dial after close succeeded")
	}
}

func TestRetarget(t *testing.T) {
	p := New(t, echoServer(t))
	old := dial(t, p.Addr())
	oldR := bufio.NewReader(old)
	roundTrip(t, old, oldR, "one")
	p.Retarget(tagServer(t, "new:"))
	c := dial(t, p.Addr())
	cr := bufio.NewReader(c)
	if _, err := io.WriteString(c, "two\n"); err != nil {
		t.Fatal(err)
	}
	if got, err := cr.ReadString('\n'); err != nil || got != "new:two\n" {
		t.Fatalf("new connection read %q, %v", got, err)
	}
	roundTrip(t, old, oldR, "three") // the old connection stays where it was
}

// A delayed proxy holds each chunk, each way, before it passes it on, and
// a second proxy listens where it is told.
func TestDelayAndListenAddress(t *testing.T) {
	p := NewOn(t, "127.0.0.2:0", echoServer(t))
	if host, _, _ := net.SplitHostPort(p.Addr()); host != "127.0.0.2" {
		t.Fatalf("listening on %s", p.Addr())
	}
	c := dial(t, p.Addr())
	br := bufio.NewReader(c)
	roundTrip(t, c, br, "warm")
	p.SetDelay(50 * time.Millisecond)
	began := time.Now()
	roundTrip(t, c, br, "slow")
	if d := time.Since(began); d < 100*time.Millisecond {
		t.Fatalf("a round trip through a 50 ms delay each way took %v", d)
	}
	p.SetDelay(0)
	roundTrip(t, c, br, "fast")
}
