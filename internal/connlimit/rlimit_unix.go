//go:build unix

package connlimit

import "syscall"

// descriptorLimit is the process's soft bound on open descriptors, or 0
// when it cannot be read or is unbounded.
func descriptorLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Cur == ^uint64(0) {
		return 0
	}
	return uint64(r.Cur)
}
