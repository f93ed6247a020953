//go:build unix && !linux

package forward

import "golang.org/x/sys/unix"

// peekSocket is recv(fd, buf, MSG_PEEK|MSG_DONTWAIT).
func peekSocket(fd uintptr, buf []byte) error {
	_, _, err := unix.Recvfrom(int(fd), buf, unix.MSG_PEEK|unix.MSG_DONTWAIT)
	return err
}
