package nemesis

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ClockEnv names the environment variable holding the path of a node's
// clock file; SyncedEnv the directory of its synced lengths; MovePauseEnv
// the step at which every move of a router waits until it stops
// (region.Config.TestMovePause), for the tests that kill a router
// mid-move.
const (
	ClockEnv     = "FENEC_NEMESIS_CLOCK"
	SyncedEnv    = "FENEC_NEMESIS_SYNCED"
	MovePauseEnv = "FENEC_TEST_MOVE_PAUSE"
)

// Base is the clock a Clock moves: the node's boot clock.
type Base interface {
	Now() time.Duration
}

// Setting is one state of a moved clock, written to its file: each new
// Version adds Jump to the clock once (negative: the clock stands still
// until the base has caught up that much, for a clock never goes back),
// and from then on the clock runs SlewPPM parts per million faster (or,
// negative, slower) than its base.
type Setting struct {
	Version int64
	Jump    time.Duration
	SlewPPM int64
}

// recheck is how often a Clock looks at its file: often enough that a
// jump is seen within a small part of any lease the suite runs.
const recheck = 2 * time.Millisecond

// Clock is a Base moved by the Settings written to a file. Safe for
// concurrent use.
type Clock struct {
	base Base
	path string

	mu      sync.Mutex
	checked time.Duration // guarded by mu: base time the file was last read
	version int64         // guarded by mu: the Setting in force
	from    time.Duration // guarded by mu: base time it came into force
	offset  time.Duration // guarded by mu: the offset then, its jump included
	slew    int64         // guarded by mu
	last    time.Duration // guarded by mu: the last reading, which none after goes below
}

// NewClock returns base moved by the settings at path; a missing or
// unreadable file leaves it as base.
func NewClock(base Base, path string) *Clock {
	return &Clock{base: base, path: path, checked: -recheck}
}

// Now reads the clock.
func (c *Clock) Now() time.Duration {
	b := c.base.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if b-c.checked >= recheck {
		c.checked = b
		if s, err := ReadClock(c.path); err == nil && s.Version != c.version {
			c.offset = c.offsetAt(b) + s.Jump
			c.from, c.version, c.slew = b, s.Version, s.SlewPPM
		}
	}
	now := b + c.offsetAt(b)
	if now < c.last {
		now = c.last
	}
	c.last = now
	return now
}

// offsetAt is the offset at base time b under the setting in force.
func (c *Clock) offsetAt(b time.Duration) time.Duration {
	return c.offset + time.Duration(int64(b-c.from)*c.slew/1_000_000)
}

// WriteClock writes s to path whole (a reader sees the old setting or
// the new one, never half of either).
func WriteClock(path string, s Setting) error {
	tmp := path + ".tmp"
	line := fmt.Sprintf("%d %d %d\n", s.Version, int64(s.Jump), s.SlewPPM)
	if err := os.WriteFile(tmp, []byte(line), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ReadClock reads the setting at path.
func ReadClock(path string) (Setting, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Setting{}, err
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return Setting{}, fmt.Errorf("%s: want three numbers, got %q", filepath.Base(path), b)
	}
	var n [3]int64
	for i := range f {
		if n[i], err = strconv.ParseInt(f[i], 10, 64); err != nil {
			return Setting{}, fmt.Errorf("%s: %w", filepath.Base(path), err)
		}
	}
	return Setting{Version: n[0], Jump: time.Duration(n[1]), SlewPPM: n[2]}, nil
}
