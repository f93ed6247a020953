package node

import (
	"testing"
	"time"
)

// The bound on a write's wait for its copies is --replica-wait, and under
// a lease never more than half of it: a lost copy then holds its primary's
// writes for less than the lease, as a lost primary holds its own.
func TestReplicaWaitBoundedByTheLease(t *testing.T) {
	for _, tc := range []struct {
		name              string
		configured, lease time.Duration
		want              time.Duration
	}{
		{"no lease", 5 * time.Second, 0, 5 * time.Second},
		{"a long lease", 5 * time.Second, time.Minute, 5 * time.Second},
		{"a lease of 2 s", 5 * time.Second, 2 * time.Second, time.Second},
		{"set below half the lease", 300 * time.Millisecond, 2 * time.Second, 300 * time.Millisecond},
		{"set above the lease", 10 * time.Second, 4 * time.Second, 2 * time.Second},
	} {
		if got := replicaWait(tc.configured, tc.lease); got != tc.want {
			t.Errorf("%s: replicaWait(%v, %v) = %v, want %v", tc.name, tc.configured, tc.lease, got, tc.want)
		}
	}
}
