//go:build linux

package rawtcp

import (
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

const supported = true

// sysRead is read(2) on a non-blocking socket, which never blocks: made
// raw, without the scheduler's system-call entry.
func sysRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	return int(n), e
}

// sysWrite is write(2) on a non-blocking socket, made raw.
func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, e := unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	return int(n), e
}

// limitNotSent sets TCP_NOTSENT_LOWAT on c (NotSentLowat); a socket that
// refuses it is left as it was.
func limitNotSent(c *net.TCPConn) {
	raw, err := c.SyscallConn()
	if err != nil {
		return
	}
	_ = raw.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, NotSentLowat)
	})
}
