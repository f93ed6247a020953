package lease

import (
	"sync"
	"time"
)

// Clock reads a clock that only moves forward, as a duration since some
// fixed origin of its own. Moments from different clocks do not compare.
type Clock interface {
	Now() time.Duration
}

// BootClock is the node's clock: CLOCK_BOOTTIME on Linux and
// mach_continuous_time on macOS, which keep counting while the machine is
// suspended, so a node woken from a suspend longer than its lease finds the
// lease gone. Elsewhere it falls back to the monotonic clock, which does not
// count a suspend (clock_other.go).
type BootClock struct{}

// MonoClock is the router's clock: Go's monotonic clock, read as the time
// since the MonoClock was made. A suspended router's clock stops, so it
// fails nodes over later, never sooner. Under testing/synctest it follows
// the bubble's fake time.
type MonoClock struct {
	base time.Time
}

// NewMonoClock returns a MonoClock whose origin is now.
func NewMonoClock() MonoClock { return MonoClock{base: time.Now()} }

// Now is the time since the clock was made.
func (c MonoClock) Now() time.Duration { return time.Since(c.base) }

// ManualClock is a clock for tests: it moves only when told. Safe for
// concurrent use.
type ManualClock struct {
	mu  sync.Mutex
	now time.Duration // guarded by mu
}

// NewManualClock returns a clock reading start.
func NewManualClock(start time.Duration) *ManualClock { return &ManualClock{now: start} }

// Now reads the clock.
func (c *ManualClock) Now() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d (never back: a negative d is ignored).
func (c *ManualClock) Advance(d time.Duration) {
	if d < 0 {
		return
	}
	c.mu.Lock()
	c.now += d
	c.mu.Unlock()
}
