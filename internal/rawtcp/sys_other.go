//go:build !linux

package rawtcp

import (
	"net"
	"syscall"
)

// supported is false: Wrap leaves connections as they are.
const supported = false

func sysRead(fd uintptr, p []byte) (int, syscall.Errno)  { return 0, syscall.ENOSYS }
func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) { return 0, syscall.ENOSYS }

// limitNotSent does nothing here: TCP_NOTSENT_LOWAT is Linux's.
func limitNotSent(*net.TCPConn) {}
