package main

import (
	"testing"
	"time"
)

// TestMissed: an answer is held to every write answered more than its
// stated bound before it was sent, and to none after.
func TestMissed(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// writes 10, 11, 12 answered at 0, 20 and 40 ms
	acked := []time.Time{at(0), at(20), at(40)}
	for _, tc := range []struct {
		what  string
		sent  int
		stale int64
		n     int64
		want  bool
	}{
		{"sent before any write was answered", -5, 0, 0, false},
		{"fresh, holding the last", 50, 0, 12, false},
		{"fresh, missing the last", 50, 0, 11, true},
		{"stale 15 ms, holding what was answered before 35 ms", 50, 15, 11, false},
		{"stale 15 ms, missing it", 50, 15, 10, true},
		{"stale 100 ms: nothing was answered before", 50, 100, 0, false},
		{"answered exactly at the cutoff: not owed", 40, 0, 11, false},
		{"a row ahead of every write", 50, 0, 99, false},
	} {
		a := answer{sent: at(tc.sent), stale: tc.stale, n: tc.n}
		if got := missed(a, acked, 10); got != tc.want {
			t.Errorf("%s: missed %v, want %v", tc.what, got, tc.want)
		}
	}
}
