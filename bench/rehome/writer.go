package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// writer begins a write of row {k} through the router every so often,
// each with its Idempotency-Key, asking again after any refusal until it
// is acknowledged, and keeps when each was.
type writer struct {
	url    string // the collection's route through the router
	every  time.Duration
	c      *http.Client
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	acked    []int       // guarded by mu: every k acknowledged
	at       []time.Time // guarded by mu: when each was
	refusals map[int]int // guarded by mu: answers other than 201 (0: no answer), by status
}

func startWriter(router, tenant string, every time.Duration) *writer {
	w := &writer{url: router + "/t/" + tenant + "/c", every: every, refusals: map[int]int{},
		c: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	w.wg.Go(w.run)
	return w
}

// stop ends the writer and waits for it. Safe twice.
func (w *writer) stop() {
	w.cancel()
	w.wg.Wait()
	w.c.CloseIdleConnections()
}

func (w *writer) run() {
	next := time.Now()
	for k := 0; w.ctx.Err() == nil; k++ {
		next = next.Add(w.every)
		w.sleep(time.Until(next))
		for w.ctx.Err() == nil {
			st := w.write(k)
			if st == http.StatusCreated {
				w.mu.Lock()
				w.acked = append(w.acked, k)
				w.at = append(w.at, time.Now())
				w.mu.Unlock()
				break
			}
			if w.ctx.Err() != nil {
				return
			}
			w.mu.Lock()
			w.refusals[st]++
			w.mu.Unlock()
			w.sleep(2 * time.Millisecond)
		}
	}
}

// write sends row k once and returns the status (0: no answer).
func (w *writer) write(k int) int {
	req, err := http.NewRequestWithContext(w.ctx, http.MethodPost, w.url, strings.NewReader(fmt.Sprintf(`{"k":%d}`, k)))
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "w-"+strconv.Itoa(k))
	res, err := w.c.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

func (w *writer) sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	select {
	case <-w.ctx.Done():
	case <-time.After(d):
	}
}

// longestGap is the longest time between two acknowledgements in a row,
// the later one answered from..to, and when it ended.
func (w *writer) longestGap(from, to time.Time) (time.Duration, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var gap time.Duration
	var end time.Time
	for i := 1; i < len(w.at); i++ {
		if at := w.at[i]; !at.Before(from) && !at.After(to) && at.Sub(w.at[i-1]) > gap {
			gap, end = at.Sub(w.at[i-1]), at
		}
	}
	return gap, end
}

// summary is how many writes were acknowledged and the refusals met.
func (w *writer) summary() (int, map[int]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := map[int]int{}
	for st, n := range w.refusals {
		r[st] = n
	}
	return len(w.acked), r
}

// ackedKeys is every k acknowledged.
func (w *writer) ackedKeys() []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]int(nil), w.acked...)
}
