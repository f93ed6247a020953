//go:build linux

package forward

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// peekSocket is recv(fd, buf, MSG_PEEK|MSG_DONTWAIT), called directly:
// unix.Recvfrom would allocate a socket address on every look.
func peekSocket(fd uintptr, buf []byte) error {
	_, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)),
		unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
