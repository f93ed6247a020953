package main

import (
	"math"
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

// TestCostOf: (f)'s summary — region's percentiles over zone's, and its
// p50 less zone's, in round trips of twice the delay.
func TestCostOf(t *testing.T) {
	msOf := func(from, to int) []time.Duration { // to down to from ms, in reverse (costOf sorts)
		var ds []time.Duration
		for v := to; v >= from; v-- {
			ds = append(ds, time.Duration(v)*time.Millisecond)
		}
		return ds
	}
	same := func(n int, v time.Duration) []time.Duration {
		ds := make([]time.Duration, n)
		for i := range ds {
			ds[i] = v
		}
		return ds
	}
	for _, tc := range []struct {
		what         string
		zone, region []time.Duration
		delay        time.Duration
		want         writeCost
	}{
		{"one round trip more", same(10, 2*time.Millisecond), same(10, 82*time.Millisecond), 40 * time.Millisecond,
			writeCost{p50: 41, p99: 41, extra: 80 * time.Millisecond, rtt: 80 * time.Millisecond, trips: 1}},
		{"spread: p50 and p99 each of its own", msOf(1, 100), msOf(81, 180), 40 * time.Millisecond,
			writeCost{p50: 131.0 / 51, p99: 1.8, extra: 80 * time.Millisecond, rtt: 80 * time.Millisecond, trips: 1}},
		{"two round trips more on a shorter link", same(4, 3*time.Millisecond), same(4, 103*time.Millisecond), 25 * time.Millisecond,
			writeCost{p50: 103.0 / 3, p99: 103.0 / 3, extra: 100 * time.Millisecond, rtt: 50 * time.Millisecond, trips: 2}},
		{"no dearer", same(5, 7*time.Millisecond), same(5, 7*time.Millisecond), 40 * time.Millisecond,
			writeCost{p50: 1, p99: 1, rtt: 80 * time.Millisecond}},
		{"cheaper: the difference below zero", same(5, 9*time.Millisecond), same(5, 5*time.Millisecond), 40 * time.Millisecond,
			writeCost{p50: 5.0 / 9, p99: 5.0 / 9, extra: -4 * time.Millisecond, rtt: 80 * time.Millisecond, trips: -0.05}},
		{"no zone writes: no ratio", nil, same(3, 90*time.Millisecond), 40 * time.Millisecond,
			writeCost{extra: 90 * time.Millisecond, rtt: 80 * time.Millisecond, trips: 1.125}},
	} {
		got := costOf(tc.zone, tc.region, tc.delay)
		if !near(got.p50, tc.want.p50) || !near(got.p99, tc.want.p99) || got.extra != tc.want.extra || got.rtt != tc.want.rtt || !near(got.trips, tc.want.trips) {
			t.Errorf("%s: got %+v, want %+v", tc.what, got, tc.want)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
