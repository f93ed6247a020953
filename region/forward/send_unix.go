//go:build unix

package forward

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

var errAgain = unix.EAGAIN

// sendSocket is the plain socket under a connection to a node.
type sendSocket struct {
	raw syscall.RawConn
}

func (ss *sendSocket) init(c net.Conn) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return
	}
	if raw, err := sc.SyscallConn(); err == nil {
		ss.raw = raw
	}
}

func (ss *sendSocket) ok() bool { return ss.raw != nil }

// waitAfter runs fn as the connection's read does: the readiness it waits
// for is cleared before fn first runs, so bytes that arrive after fn's
// write always end the wait.
func (ss *sendSocket) waitAfter(fn func(fd uintptr) bool) error {
	return ss.raw.Read(fn)
}

func (ss *sendSocket) write(fd uintptr, p []byte) (int, error) {
	for {
		n, err := unix.Write(int(fd), p)
		switch err {
		case nil:
			return n, nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0, errAgain
		}
		return 0, err
	}
}
