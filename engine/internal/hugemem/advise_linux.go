package hugemem

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// advise asks for huge pages over the whole huge pages of the size bytes
// at p. A refusal leaves the memory as it was: ordinary pages.
func advise(p unsafe.Pointer, size uintptr) {
	off, n := aligned(uintptr(p), size)
	if n == 0 {
		return
	}
	_ = unix.Madvise(unsafe.Slice((*byte)(unsafe.Add(p, off)), n), unix.MADV_HUGEPAGE)
}
