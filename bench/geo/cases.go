package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/fenec-go/fenec/bench/internal/benchkit"
)

// sample is what one case measured: its answers, and the writes it made.
type sample struct {
	answers []answer
	writes  []time.Duration
	// wrong counts answers that missed a write they said they held: (c)'s
	// reads without the client's own write, (d)'s reads missing a write
	// acknowledged longer before they were sent than their stated bound.
	wrong int
	// checked counts the answers held to a bound; unbounded those that
	// stated none (not checked).
	checked, unbounded int
}

// nearFar measures (a) and (b): the keyed read through near stating
// nothing, and with Fenec-Max-Staleness: 1000; and beside them the same
// read sent straight to us1, the copy's node, with no router between
// (what (b) is held to), and through nginx in front of us1 when one runs
// (what a plain proxy's hop costs). In turns of a tenth of n each, after
// one turn of each to warm up.
func nearFar(d *deployment, n int) (far, near, direct, proxied sample, err error) {
	r := newReader(d, d.near)
	defer r.close()
	us1 := newReader(d, "http://"+d.addrs["us1"])
	defer us1.close()
	type turnOf struct {
		r   *reader
		s   *sample
		hdr []string
	}
	turns := []turnOf{{r, &far, nil}, {r, &near, []string{hdrMaxStaleness, "1000"}}, {us1, &direct, nil}}
	if d.proxy != "" {
		px := newReader(d, d.proxy)
		defer px.close()
		turns = append(turns, turnOf{px, &proxied, nil})
	}
	turn := max(n/10, 1)
	for round := range 11 {
		for _, c := range turns {
			for range turn {
				a, err := c.r.read(c.hdr...)
				if err != nil {
					return far, near, direct, proxied, err
				}
				if round > 0 {
					c.s.answers = append(c.s.answers, a)
				}
			}
		}
	}
	return far, near, direct, proxied, nil
}

// tight measures (e): n reads through near with Fenec-Max-Staleness:
// bound, one the copy cannot prove, after a tenth of n to warm up.
func tight(d *deployment, n int, bound int64) (sample, error) {
	var s sample
	r := newReader(d, d.near)
	defer r.close()
	for i := range n + max(n/10, 1) {
		a, err := r.read(hdrMaxStaleness, strconv.FormatInt(bound, 10))
		if err != nil {
			return s, err
		}
		if i >= max(n/10, 1) {
			s.answers = append(s.answers, a)
		}
	}
	return s, nil
}

// readYourWrites measures (c): n times, a client in us writes through
// near (to eu1) and reads with Fenec-After of its write through near.
// Values from next on; it returns the next unused.
func readYourWrites(d *deployment, n int, next int64) (sample, int64, error) {
	var s sample
	r := newReader(d, d.near)
	defer r.close()
	for i := range n + max(n/10, 1) {
		v := next
		next++
		w, err := r.write(v)
		if err != nil {
			return s, next, err
		}
		a, err := r.read(hdrAfter, w.seq, hdrHistory, w.history)
		if err != nil {
			return s, next, err
		}
		if i < max(n/10, 1) {
			continue // warming up
		}
		s.writes = append(s.writes, w.took)
		s.answers = append(s.answers, a)
		s.checked++
		if a.n < v {
			s.wrong++
		}
	}
	return s, next, nil
}

// steady measures (d): a writer beside eu1 (through g) writes at rate a
// second for dur while a reader in us reads through near with
// Fenec-Max-Staleness: bound every gap; then every answer is held to the
// bound it stated. Values from next on.
func steady(d *deployment, dur time.Duration, rate int, bound int64, gap time.Duration, next int64) (sample, error) {
	var s sample
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var (
		mu      sync.Mutex
		acked   []time.Time // guarded by mu: acked[i] is when write next+i was answered; s.writes too
		werr    error       // guarded by mu
		wg      sync.WaitGroup
		readErr error
	)
	wg.Go(func() {
		w := newReader(d, d.g)
		defer w.close()
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for v := next; ; v++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			wr, err := w.write(v)
			mu.Lock()
			if err != nil {
				werr = err
				mu.Unlock()
				return
			}
			acked = append(acked, wr.acked)
			s.writes = append(s.writes, wr.took)
			mu.Unlock()
		}
	})
	wg.Go(func() {
		r := newReader(d, d.near)
		defer r.close()
		for ctx.Err() == nil {
			a, err := r.read(hdrMaxStaleness, strconv.FormatInt(bound, 10))
			if err != nil {
				readErr = err
				return
			}
			s.answers = append(s.answers, a)
			time.Sleep(gap)
		}
	})
	wg.Wait()
	if werr != nil {
		return s, fmt.Errorf("the steady writer: %w", werr)
	}
	if readErr != nil {
		return s, fmt.Errorf("the reader under writes: %w", readErr)
	}
	for _, a := range s.answers {
		if a.stale < 0 {
			s.unbounded++
			continue
		}
		s.checked++
		if missed(a, acked, next) {
			s.wrong++
		}
	}
	return s, nil
}

// missed says whether answer a, which states a bound, misses a write it
// must hold: write first+i was answered at acked[i], one write at a time
// in order, each setting the row's n to its value. The last write
// answered more than the stated bound before the read was sent must be in
// it (and with it every one before it): n at least its value.
func missed(a answer, acked []time.Time, first int64) bool {
	cutoff := a.sent.Add(-time.Duration(a.stale) * time.Millisecond)
	k := sort.Search(len(acked), func(i int) bool { return !acked[i].Before(cutoff) })
	return k > 0 && a.n < first+int64(k-1)
}

// survivalCost measures (f): a writer beside eu1 (through g) writes n
// keyed writes to each of z0 (its voting copy on eu2) and r0 (on us1,
// across the link), one at a time in turns — z0, r0, z0, r0 ... — after
// a tenth of each to warm up, so that both are timed on the machine as
// it is at the same moments. Every write must be answered by eu1, the
// primary of both; one answered elsewhere (a failover) ends the case.
func survivalCost(d *deployment, n int) (zone, region []time.Duration, err error) {
	clients := []*reader{newClient(d, d.g, zoneTenant), newClient(d, d.g, regionTenant)}
	for _, c := range clients {
		defer c.close()
	}
	warm := max(n/10, 1)
	for i := range n + warm {
		for k, c := range clients {
			w, err := c.write(int64(i + 1))
			if err != nil {
				return zone, region, fmt.Errorf("a write to %s: %w", c.tenant, err)
			}
			if w.node != "eu1" {
				return zone, region, fmt.Errorf("a write to %s answered by %q, not eu1", c.tenant, w.node)
			}
			if i < warm {
				continue
			}
			if k == 0 {
				zone = append(zone, w.took)
			} else {
				region = append(region, w.took)
			}
		}
	}
	return zone, region, nil
}

// writeCost is (f) summed up: r0's writes against z0's.
type writeCost struct {
	p50, p99 float64       // r0's percentile over z0's
	extra    time.Duration // r0's p50 less z0's
	rtt      time.Duration // the round trip between eu and us: twice the delay
	trips    float64       // extra in round trips
}

// costOf sums up (f)'s writes, zone's and region's, on a link of delay
// each way.
func costOf(zone, region []time.Duration, delay time.Duration) writeCost {
	z50, r50 := benchkit.Percentile(zone, 0.5), benchkit.Percentile(region, 0.5)
	c := writeCost{
		p50:   ratio(r50, z50),
		p99:   ratio(benchkit.Percentile(region, 0.99), benchkit.Percentile(zone, 0.99)),
		extra: r50 - z50,
		rtt:   2 * delay,
	}
	c.trips = ratio(c.extra, c.rtt)
	return c
}
