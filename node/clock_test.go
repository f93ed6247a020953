package node

import (
	"sync"
	"time"
)

// fakeClock is a settable clock for pure logic.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func time_(sec int64) *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000+sec, 0)} }

func (c *fakeClock) get() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(sec int64) {
	c.mu.Lock()
	c.t = c.t.Add(time.Duration(sec) * time.Second)
	c.mu.Unlock()
}
