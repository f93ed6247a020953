package lease

import (
	"time"

	"golang.org/x/sys/unix"
)

// Now reads CLOCK_MONOTONIC, which on macOS is mach_continuous_time: it
// keeps counting while the machine sleeps. Should the call fail, Now
// panics: a made-up reading could make a lapsed lease look running.
func (BootClock) Now() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("lease: read CLOCK_MONOTONIC: " + err.Error())
	}
	return time.Duration(ts.Nano())
}
