package main

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenec-go/fenec/bench/internal/benchkit"
)

// checked is (g): every read of a run of write-then-read pairs held to
// what it claims, with t0 failed over in the middle.
type checked struct {
	pairs     int // writes acknowledged, each read back twice
	after     sample
	bounded   sample
	killAt    int           // the pair after which eu1 was killed
	gap       time.Duration // the longest time no client's write was acknowledged
	retried   int           // requests asked again (a write under its key, a read)
	primaries map[string]int
}

// pairsRun measures (g): clients in us, each with a row of its own in
// t0, write their row through near (to t0's primary) and read it back
// twice through near: with Fenec-After of the write, which must hold it,
// and with Fenec-Max-Staleness: bound, which must hold every write of the
// row acknowledged more than its stated staleness before it was sent.
// Once half of n pairs are acknowledged, eu1 is killed (SIGKILL): g fails
// t0 over to eu2 once eu1's lease has certainly lapsed, and the clients
// ask again under the same key, or read again, until answered. No answer
// may miss what it claims, during the failover or after it.
func pairsRun(d *deployment, n, clients int, bound int64) (checked, error) {
	c := checked{primaries: map[string]int{}}
	for i := range clients {
		q := fmt.Sprintf("put kv {k: 'w%d', n: 0}", i)
		if _, err := d.call("POST", d.g+"/t/"+tenant+"/query", benchkit.QueryBody(q), 200, nil); err != nil {
			return c, err
		}
	}

	var (
		done      atomic.Int64 // pairs acknowledged
		killed    atomic.Bool
		killOnce  sync.Once
		mu        sync.Mutex // guards the rest
		firstErr  error
		lastAcked = time.Now()
		wg        sync.WaitGroup
	)
	boundHdr := strconv.FormatInt(bound, 10)
	for i := range clients {
		wg.Go(func() {
			row := "w" + strconv.Itoa(i)
			r := newReader(d, d.near)
			defer r.close()
			var acked []time.Time // acked[v-1]: when write v was acknowledged
			var after, bounded sample
			fail := func(err error) {
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("client %s: %w", row, err)
				}
				mu.Unlock()
			}
			defer func() {
				mu.Lock()
				c.after.answers = append(c.after.answers, after.answers...)
				c.after.checked += after.checked
				c.after.wrong += after.wrong
				c.bounded.answers = append(c.bounded.answers, bounded.answers...)
				c.bounded.checked += bounded.checked
				c.bounded.wrong += bounded.wrong
				c.bounded.unbounded += bounded.unbounded
				mu.Unlock()
			}()
			for v := int64(1); done.Load() < int64(n); v++ {
				w, err := r.writeRow(row, v, 1200) // a minute, 50 ms apart
				if err != nil {
					fail(err)
					return
				}
				now := time.Now()
				acked = append(acked, now)
				mu.Lock()
				if gap := now.Sub(lastAcked); gap > c.gap {
					c.gap = gap
				}
				lastAcked = now
				c.primaries[w.node]++
				mu.Unlock()
				if done.Add(1) == int64(n/2) {
					killOnce.Do(func() {
						d.nodeProcs["eu1"].Kill()
						killed.Store(true)
						c.killAt = n / 2
					})
				}
				a, tries, err := readAgain(r, row, hdrAfter, w.seq, hdrHistory, w.history)
				if err != nil {
					fail(err)
					return
				}
				after.answers = append(after.answers, a)
				after.checked++
				if a.n < v {
					after.wrong++
				}
				b, tries2, err := readAgain(r, row, hdrMaxStaleness, boundHdr)
				if err != nil {
					fail(err)
					return
				}
				bounded.answers = append(bounded.answers, b)
				if b.stale < 0 {
					bounded.unbounded++
				} else {
					bounded.checked++
					if missed(b, acked, 1) {
						bounded.wrong++
					}
				}
				mu.Lock()
				c.retried += w.again + tries + tries2
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	c.pairs = int(done.Load())
	if firstErr != nil {
		return c, firstErr
	}
	if !killed.Load() {
		return c, fmt.Errorf("eu1 was never killed (%d pairs)", c.pairs)
	}
	return c, nil
}

// readAgain reads row k with the header pairs hdr until answered, for at
// most a minute, and says how many times it asked again.
func readAgain(r *reader, k string, hdr ...string) (answer, int, error) {
	deadline := time.Now().Add(time.Minute)
	for again := 0; ; again++ {
		a, err := r.readRow(k, hdr...)
		if err == nil {
			return a, again, nil
		}
		if time.Now().After(deadline) {
			return a, again, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
