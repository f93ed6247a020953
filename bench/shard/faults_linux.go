package main

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// faultCost measures what a first touch of fresh memory costs this host:
// 64 MB mapped anew and written a byte a page, 4 KB pages, then the same
// advised for huge pages. A move's target touches its tenant's whole
// footprint first, so this bounds what its page faults cost.
func faultCost() string {
	const size = 64 << 20
	touch := func(huge bool) time.Duration {
		b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
		if err != nil {
			return 0
		}
		defer unix.Munmap(b)
		if huge {
			_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
		} else {
			_ = unix.Madvise(b, unix.MADV_NOHUGEPAGE)
		}
		start := time.Now()
		for i := 0; i < size; i += 4096 {
			b[i] = 1
		}
		return time.Since(start)
	}
	small, huge := touch(false), touch(true)
	return fmt.Sprintf("this host: a first touch of 64 MB of fresh memory takes %.0f ms in 4 KB pages (%.1f µs a page), %.0f ms advised for huge pages",
		ms(small), float64(small.Microseconds())/(size/4096), ms(huge))
}
