package cluster

import (
	"testing"
	"time"
)

// pollEvery is how often Eventually asks again.
const pollEvery = 20 * time.Millisecond

// Eventually calls fn until it returns nil, failing the test with fn's
// last error once timeout has passed. The timeout bounds a hang; it is
// never an assertion about speed.
func Eventually(tb testing.TB, timeout time.Duration, fn func() error) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("still not so after %v: %v", timeout, err)
		}
		time.Sleep(pollEvery)
	}
}
