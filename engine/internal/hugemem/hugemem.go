package hugemem

import (
	"sync/atomic"
	"unsafe"
)

// advising is whether Make asks for huge pages; off until Advise turns it
// on.
var advising atomic.Bool

// Advise turns the asking for huge pages on or off for the process, for
// the arrays made from then on.
func Advise(on bool) { advising.Store(on) }

// Min is the least size, in bytes, of an array worth advising: below two
// huge pages, little of an array spans a whole huge page.
const Min = 4 << 20

// hugePage is the size of a huge page the advice asks for (that of the
// page tables' middle level, on amd64 and arm64 with 4 KB pages).
const hugePage = 2 << 20

// Make returns an array like make([]E, n, c)'s. When Advise turned the
// advice on and the array is Min bytes or more, it asks the kernel to back
// it with huge pages, and it starts on a huge page's boundary if E's size
// divides the heap's page: the array is then cut from a larger one, whose
// head before the boundary (under 2 MB) is never written, so it costs
// address space, not memory. The advice helps only while the array is
// untouched: memory fresh from the system, which make does not clear.
// Memory the heap had before is cleared when made, so already in place,
// and the advice changes nothing.
func Make[E any](n, c int) []E {
	size := uintptr(c) * unsafe.Sizeof(*new(E))
	if size < Min || !advising.Load() {
		return make([]E, n, c)
	}
	if heapPage%unsafe.Sizeof(*new(E)) != 0 {
		s := make([]E, n, c)
		advise(unsafe.Pointer(unsafe.SliceData(s)), size)
		return s
	}
	// A large array starts on a heap page: the boundary is a whole number
	// of elements on.
	slack := int((hugePage - heapPage) / unsafe.Sizeof(*new(E)))
	s := make([]E, 0, c+slack)
	at := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	skip := int((-at & (hugePage - 1)) / unsafe.Sizeof(*new(E)))
	if skip > slack {
		skip = 0 // a heap whose large arrays start elsewhere
	}
	s = s[skip : skip+n : skip+c]
	advise(unsafe.Pointer(unsafe.SliceData(s)), size)
	return s
}

// heapPage is the Go heap's page size, on which every large array starts.
const heapPage = 8 << 10

// aligned returns the part of the size bytes at address at made of whole
// huge pages: its offset from at and its length (0 if there is none).
func aligned(at, size uintptr) (off, n uintptr) {
	beg := (at + hugePage - 1) &^ (hugePage - 1)
	end := (at + size) &^ (hugePage - 1)
	if end <= beg {
		return 0, 0
	}
	return beg - at, end - beg
}
