//go:build !linux && !darwin

package lease

import "time"

var bootBase = time.Now()

// Now reads the monotonic clock where CLOCK_BOOTTIME is not available. On
// such systems a suspend longer than the lease is not counted: the node
// wakes with the lease it had left.
func (BootClock) Now() time.Duration { return time.Since(bootBase) }
