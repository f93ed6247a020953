//go:build !linux

package hugemem

import "unsafe"

// advise does nothing: the advice is Linux's.
func advise(p unsafe.Pointer, size uintptr) {}
