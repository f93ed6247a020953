//go:build unix

package forward

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// peeker looks at a socket without blocking and without taking bytes from
// it: MSG_PEEK|MSG_DONTWAIT. Built once per connection so that looking
// costs one system call and no allocation.
type peeker struct {
	raw   syscall.RawConn
	buf   [1]byte
	quiet bool
	fn    func(fd uintptr) bool
}

func (pk *peeker) init(c net.Conn) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return
	}
	pk.raw = raw
	pk.fn = pk.look
}

func (pk *peeker) look(fd uintptr) bool {
	err := peekSocket(fd, pk.buf[:])
	// Nothing to read (EAGAIN) is the only sign of a connection still open
	// and silent; EOF, data, or any other error means let it go.
	pk.quiet = err == unix.EAGAIN || err == unix.EWOULDBLOCK
	return true
}

// quietNow reports whether the connection is open with nothing to read.
// A connection that cannot be looked at counts as quiet.
func (pk *peeker) quietNow() bool {
	if pk.raw == nil {
		return true
	}
	if err := pk.raw.Read(pk.fn); err != nil {
		return false
	}
	return pk.quiet
}
