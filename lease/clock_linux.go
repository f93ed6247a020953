package lease

import (
	"time"

	"golang.org/x/sys/unix"
)

// Now reads CLOCK_BOOTTIME. The call cannot fail for this clock id on
// Linux ≥ 2.6.39; should it, Now panics: a made-up reading could make a
// lapsed lease look running.
func (BootClock) Now() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		panic("lease: read CLOCK_BOOTTIME: " + err.Error())
	}
	return time.Duration(ts.Nano())
}
