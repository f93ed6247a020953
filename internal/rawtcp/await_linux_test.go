//go:build linux

package rawtcp

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// awaitPair is pair with the wrapped end as a *Conn.
func awaitPair(t *testing.T) (*Conn, net.Conn) {
	t.Helper()
	w, a := pair(t)
	return w.(*Conn), a
}

// waiting is how many bytes the socket holds unread, looked at without
// waiting and without taking them.
func waiting(t *testing.T, c *Conn) int {
	t.Helper()
	buf := make([]byte, 64)
	n := -1
	err := c.raw.Control(func(fd uintptr) {
		m, _, err := unix.Recvfrom(int(fd), buf, unix.MSG_PEEK|unix.MSG_DONTWAIT)
		if err == nil {
			n = m
		} else if err == unix.EAGAIN {
			n = 0
		}
	})
	if err != nil || n < 0 {
		t.Fatalf("looking at the socket: %v", err)
	}
	return n
}

// A reply ends the wait: the other end answers each request as soon as it
// reads it, thousands of times, and every WriteAwait returns with the
// reply waiting whole for the first read — neither before it came (the
// wait was skipped) nor at the deadline (its readiness was missed).
func TestWriteAwaitSeesEveryReply(t *testing.T) {
	w, a := awaitPair(t)
	go func() { // echo each 4-byte request back
		buf := make([]byte, 4)
		for {
			if _, err := io.ReadFull(a, buf); err != nil {
				return
			}
			if _, err := a.Write(buf); err != nil {
				return
			}
		}
	}()
	got := make([]byte, 8)
	for i := range 5000 {
		req := []byte{byte(i), byte(i >> 8), 'q', '!'}
		w.SetReadDeadline(time.Now().Add(5 * time.Second))
		var called int
		n, err := w.WriteAwait(req, func() bool { called++; return true })
		if err != nil || n != 4 || called != 1 {
			t.Fatalf("request %d: wrote %d, %v, written called %d times", i, n, err, called)
		}
		if k := waiting(t, w); k != 4 {
			t.Fatalf("request %d: %d bytes waiting after WriteAwait, want the 4 of the reply", i, k)
		}
		if m, err := io.ReadFull(w, got[:4]); err != nil || !bytes.Equal(got[:m], req) {
			t.Fatalf("request %d: read back %q, %v", i, got[:m], err)
		}
	}
}

// With no reply, the wait ends at the read deadline: the bytes count as
// written, and the reader's first read reports the timeout.
func TestWriteAwaitEndsAtTheReadDeadline(t *testing.T) {
	w, a := awaitPair(t)
	w.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	start := time.Now()
	n, err := w.WriteAwait([]byte("ping"), nil)
	if err != nil || n != 4 {
		t.Fatalf("WriteAwait with no reply: %d, %v", n, err)
	}
	if waited := time.Since(start); waited < 90*time.Millisecond {
		t.Fatalf("WriteAwait returned after %v, before the read deadline", waited)
	}
	if _, err := w.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the read after: %v, want the deadline's error", err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(a, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("the other end read %q, %v", buf, err)
	}
}

// A read deadline already past writes nothing and says so.
func TestWriteAwaitPastItsDeadlineWritesNothing(t *testing.T) {
	w, a := awaitPair(t)
	w.SetReadDeadline(time.Now().Add(-time.Second))
	n, err := w.WriteAwait([]byte("ping"), nil)
	var op *net.OpError
	if n != 0 || !errors.As(err, &op) || op.Op != "write" || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("WriteAwait past its deadline: %d, %v", n, err)
	}
	a.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if m, err := a.Read(make([]byte, 4)); m != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the other end read %d bytes (%v), want none", m, err)
	}
}

// written returning false skips the wait.
func TestWriteAwaitWrittenFalseSkipsTheWait(t *testing.T) {
	w, _ := awaitPair(t)
	w.SetReadDeadline(time.Now().Add(10 * time.Second))
	done := make(chan error, 1)
	go func() {
		_, err := w.WriteAwait([]byte("ping"), func() bool { return false })
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WriteAwait waited although written said not to")
	}
}

// Closing the connection ends the wait; the read after reports the close.
func TestWriteAwaitEndsOnClose(t *testing.T) {
	w, _ := awaitPair(t)
	var written atomic.Bool
	done := make(chan error, 1)
	go func() {
		_, err := w.WriteAwait([]byte("ping"), func() bool { written.Store(true); return true })
		done <- err
	}()
	for !written.Load() {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	w.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("WriteAwait whose bytes were written: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the wait")
	}
	if _, err := w.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after the close: %v", err)
	}
}

// More than the socket takes at once is written whole as Write writes it,
// waiting for room, and no wait for a reply is made (written is not
// called): the other end, which reads it all and answers nothing, sees
// every byte, and WriteAwait returns without a reply.
func TestWriteAwaitPastTheSocketWritesAllAndDoesNotWait(t *testing.T) {
	w, a := awaitPair(t)
	out := make([]byte, 16<<20)
	rand.Read(out)
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(a, int64(len(out))))
		got <- b
	}()
	w.SetDeadline(time.Now().Add(30 * time.Second))
	called := false
	n, err := w.WriteAwait(out, func() bool { called = true; return true })
	if err != nil || n != len(out) {
		t.Fatalf("WriteAwait of 16 MB: %d, %v", n, err)
	}
	if called {
		t.Fatal("written was called for a write the socket took in parts")
	}
	if b := <-got; !bytes.Equal(b, out) {
		t.Fatalf("the other end read %d bytes, not what was written", len(b))
	}
}
