//go:build linux

package rawtcp

import (
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A connection the Listener accepts holds at most NotSentLowat bytes
// unsent: read back from the socket, and seen in a write to a client that
// reads nothing, which the kernel takes little more than that of before
// it waits (without the option, megabytes on loopback).
func TestListenerLimitsWhatWaitsUnsent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Listener(ln)
	defer l.Close()
	c, client := connect(t, l)
	_ = client.(*net.TCPConn).SetReadBuffer(4 << 10) // the window stays small

	raw, err := c.(interface {
		SyscallConn() (syscall.RawConn, error)
	}).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got int
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		got, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT)
	}); err != nil || gerr != nil {
		t.Fatalf("read the option back: %v %v", err, gerr)
	}
	if got != NotSentLowat {
		t.Fatalf("TCP_NOTSENT_LOWAT %d, want %d", got, NotSentLowat)
	}

	// Written in pieces of 16 KB until a write waits 300 ms: what went is
	// the client's small window and the unsent bound, not a send buffer's
	// megabytes.
	piece := make([]byte, 16<<10)
	var sent int
	for sent < 64<<20 {
		_ = c.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
		n, err := c.Write(piece)
		sent += n
		if err != nil {
			break
		}
	}
	if sent > 1<<20 {
		t.Fatalf("%d bytes taken by the kernel for a client that reads nothing, want about %d", sent, NotSentLowat)
	}
}
