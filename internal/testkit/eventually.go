package testkit

import (
	"fmt"
	"testing"
	"time"
)

// Condition is what Eventually waits on: a func that says why it does not
// hold yet (nil once it does), or one that says whether it holds.
type Condition interface {
	func() error | func() bool
}

// Poll bounds: Eventually asks again after pollFirst, doubling the pause
// up to pollMax, so a condition met at once costs little and a long wait
// does not spin.
const (
	pollFirst = time.Millisecond
	pollMax   = 20 * time.Millisecond
)

// Eventually asks cond until it holds, failing tb once timeout has passed
// with cond's last error, or, for a func() bool, with what (fmt.Sprint'd;
// "condition not met" when empty). The timeout bounds a hang; it is never
// an assertion about speed.
func Eventually[C Condition](tb testing.TB, timeout time.Duration, cond C, what ...any) {
	tb.Helper()
	check := func() error {
		switch f := any(cond).(type) {
		case func() error:
			return f()
		case func() bool:
			if f() {
				return nil
			}
			if len(what) == 0 {
				return fmt.Errorf("condition not met")
			}
			return fmt.Errorf("%s", fmt.Sprint(what...))
		}
		panic("testkit: unknown condition type")
	}
	deadline := time.Now().Add(timeout)
	pause := pollFirst
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("not so within %v: %v", timeout, err)
		}
		time.Sleep(pause)
		pause = min(2*pause, pollMax)
	}
}
