package rawtcp

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// pair returns two ends of a loopback TCP connection, the first wrapped.
func pair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, d := connect(t, ln)
	w := wrap(d)
	if _, ok := w.(*Conn); !ok && supported {
		t.Fatalf("a TCP connection was not wrapped: %T", w)
	}
	t.Cleanup(func() { w.Close() })
	return w, a
}

// connect dials ln and returns the end ln accepted and the end dialled,
// both closed at cleanup.
func connect(t *testing.T, ln net.Listener) (accepted, dialled net.Conn) {
	t.Helper()
	got := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		got <- c
	}()
	d, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	a := <-got
	if a == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close() })
	return a, d
}

// Bytes written either way arrive whole and in order, past what a socket
// buffer holds (so writes wait for room and reads for bytes), with reads
// and writes on the wrapped end at once.
func TestBytesBothWays(t *testing.T) {
	w, a := pair(t)
	out := make([]byte, 8<<20)
	rand.Read(out)
	back := make(chan []byte, 1)
	go func() { // the plain end echoes what it reads
		got, _ := io.ReadAll(io.LimitReader(a, int64(len(out))))
		a.Write(got)
		back <- got
	}()
	echoed := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(w, int64(len(out))))
		echoed <- b
	}()
	n, err := w.Write(out)
	if err != nil || n != len(out) {
		t.Fatalf("write: %d of %d, %v", n, len(out), err)
	}
	if got := <-back; !bytes.Equal(got, out) {
		t.Fatalf("the other end read %d bytes, not what was written", len(got))
	}
	if got := <-echoed; !bytes.Equal(got, out) {
		t.Fatalf("read back %d bytes, not what was echoed", len(got))
	}
}

// The other end closing is io.EOF, as net.Conn says it.
func TestEOF(t *testing.T) {
	w, a := pair(t)
	a.Write([]byte("last"))
	a.Close()
	got, err := io.ReadAll(w)
	if err != nil || string(got) != "last" {
		t.Fatalf("ReadAll: %q, %v", got, err)
	}
	if n, err := w.Read(make([]byte, 4)); n != 0 || err != io.EOF {
		t.Fatalf("after the end: %d, %v; want 0, io.EOF", n, err)
	}
}

// A read deadline ends a read that waits, as a timeout net.Error wrapping
// os.ErrDeadlineExceeded; the connection reads on once it is lifted.
func TestReadDeadline(t *testing.T) {
	w, a := pair(t)
	w.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := w.Read(make([]byte, 1))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past its deadline: %v", err)
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "read" {
		t.Fatalf("not a read *net.OpError: %#v", err)
	}
	w.SetReadDeadline(time.Time{})
	a.Write([]byte("x"))
	if n, err := w.Read(make([]byte, 1)); n != 1 || err != nil {
		t.Fatalf("after the deadline was lifted: %d, %v", n, err)
	}
}

// A write deadline ends a write the other end never makes room for. (The
// deadline leaves the write time to start on a loaded machine: one that
// passed before it began would write nothing, rightly.)
func TestWriteDeadline(t *testing.T) {
	w, _ := pair(t)
	w.SetWriteDeadline(time.Now().Add(time.Second))
	n, err := w.Write(make([]byte, 64<<20))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write past its deadline: %d, %v", n, err)
	}
	if n <= 0 || n >= 64<<20 {
		t.Fatalf("a write cut by its deadline reports %d bytes written", n)
	}
}

// Closing the connection ends a read waiting on it with net.ErrClosed.
func TestCloseEndsARead(t *testing.T) {
	w, _ := pair(t)
	done := make(chan error, 1)
	go func() {
		_, err := w.Read(make([]byte, 1))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	w.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("read on a closed connection: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the read")
	}
}

// What is not a plain TCP connection is left as it is.
func TestWrapLeavesOthers(t *testing.T) {
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	if got := wrap(p1); got != p1 {
		t.Fatalf("a pipe was wrapped: %T", got)
	}
}

// Under -race, Wrap leaves a TCP connection as it is; otherwise it wraps
// it.
func TestWrapUnderRace(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	_, wrapped := Wrap(d).(*Conn)
	if want := supported && !raceBuild; wrapped != want {
		t.Fatalf("wrapped %v, want %v (race build %v)", wrapped, want, raceBuild)
	}
}
