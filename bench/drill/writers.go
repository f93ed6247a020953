package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenec-go/fenec/internal/history"
	"github.com/fenec-go/fenec/wire"
)

// ack is one acknowledged write: its key, when it was first sent, when
// its 200 came back, the router that answered it and the node that took
// it (its id, the answer's Fenec-Node).
type ack struct {
	k        int
	sent, at time.Time
	via      string
	node     string
}

// fail is one answer other than 200: when it was sent, how long it took,
// its status (0: none) and the router asked.
type fail struct {
	at     time.Time
	took   time.Duration
	status int
	via    string
}

// writer writes one tenant through its routers, a key at a time: each
// write an insert of a new k with an Idempotency-Key, sent again with the
// same key until it is answered 200, as a careful client does. Given
// several routers, it stays with the one that last answered 200 (or,
// with preferFirst, starts every write at the first) and asks the next
// after any other answer.
type writer struct {
	tenant, node string   // node: where the tenant was placed
	replica      string   // its replica's node then
	bases        []string // the routers' URLs
	token        string   // the data token
	preferFirst  bool     // every new write asks bases[0] first, not the router that answered the last
	first        int      // the keys written are first+1, first+2, ... (two writers of one tenant keep apart)
	hc           *http.Client

	mu   sync.Mutex
	acks []ack         // guarded by mu
	ops  []*history.Op // guarded by mu: every write and list read, as it settled

	asking atomic.Int32      // the index in bases of the router the writer asks now, for the reader
	errors map[int]int       // guarded by mu: answers other than 200 by status, 0 for a transport error
	fails  []fail            // guarded by mu
	sample map[string]string // guarded by mu: the first body of each router's and status's answer other than 200
}

func newWriter(tenant, node, replica string, bases []string, token string, hc *http.Client) *writer {
	return &writer{tenant: tenant, node: node, replica: replica, bases: bases, token: token,
		hc: hc, errors: map[int]int{}, sample: map[string]string{}}
}

// pace is the least time between one write's first send and the next's:
// a hundred writes a second at most per writer, so that the drill measures
// a loaded deployment rather than a saturated machine.
const pace = 10 * time.Millisecond

// run writes until ctx ends. Every write is recorded in the writer's
// history as an append to the tenant's list (its collection w, in id
// order), and beside it the writer's reader reads the list every
// readEvery through the router the writer asks now.
func (w *writer) run(ctx context.Context) {
	defer w.hc.CloseIdleConnections()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { w.reader(ctx) })
	var last time.Time
	cur := 0
	for k := w.first + 1; ctx.Err() == nil; k++ {
		if rest := pace - time.Since(last); rest > 0 {
			time.Sleep(rest)
		}
		sent := time.Now()
		last = sent
		if w.preferFirst {
			cur = 0
			w.asking.Store(0)
		}
		var done bool
		if cur, done = w.write(ctx, k, sent, cur); !done {
			return
		}
	}
}

// write sends write k, first sent at sent, through bases[cur] and the
// next routers until it is answered 200 or ctx ends, and records it. It
// gives back the router to ask next and whether the write was answered.
func (w *writer) write(ctx context.Context, k int, sent time.Time, cur int) (int, bool) {
	op := &history.Op{Tenant: w.tenant, Kind: history.ListAppend, Key: listKey, Value: int64(k),
		IdemKey: w.idemKey(k), Call: since(sent), Staleness: history.NoBound}
	mayHaveRun := false
	for {
		base := w.bases[cur]
		at := time.Now()
		status, hdr, err := w.insert(ctx, base, k)
		node := hdr.Get("Fenec-Node")
		a := history.Attempt{At: since(at), Took: int64(time.Since(at)), Status: status, Node: node,
			History: hdr.Get(wire.HeaderHistory), Seq: hdr.Get(wire.HeaderSeq)}
		if err != nil {
			a.Err = history.ErrText(err)
		}
		op.Attempts = append(op.Attempts, a)
		class, _ := history.Classify(a, true)
		if class == history.OK {
			op.Outcome, op.Return, op.Node, op.Via = history.OK, a.At+a.Took, node, hostOf(base)
			op.History = a.History
			op.Seq, _ = strconv.ParseUint(a.Seq, 10, 64)
			w.mu.Lock()
			w.acks = append(w.acks, ack{k: k, sent: sent, at: time.Now(), via: base, node: node})
			w.ops = append(w.ops, op)
			w.mu.Unlock()
			return cur, true
		}
		mayHaveRun = mayHaveRun || class == history.Unknown
		if ctx.Err() != nil {
			// Unsettled: unknown if any attempt may have run (for
			// porcupine it never returned), else refused.
			op.Outcome, op.Return, op.Via = history.Settle(op.Kind, class, mayHaveRun), a.At+a.Took, hostOf(base)
			w.mu.Lock()
			w.ops = append(w.ops, op)
			w.mu.Unlock()
			return cur, false
		}
		w.mu.Lock()
		w.errors[status]++
		w.fails = append(w.fails, fail{at: at, took: time.Since(at), status: status, via: base})
		w.mu.Unlock()
		cur = (cur + 1) % len(w.bases)
		w.asking.Store(int32(cur))
		time.Sleep(10 * time.Millisecond)
	}
}

func (w *writer) idemKey(k int) string { return w.tenant + "-" + strconv.Itoa(k) }

// insert sends write k once through base and returns its status (0: no
// answer, and the error) and the answer's header (Fenec-Node: the id of
// the node that answered; of a write done, Fenec-History and Fenec-Seq).
func (w *writer) insert(ctx context.Context, base string, k int) (int, http.Header, error) {
	body, _ := json.Marshal(map[string]any{"query": "insert w {k: $1}", "params": []any{k}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/t/"+w.tenant+"/query", bytes.NewReader(body))
	if err != nil {
		return 0, http.Header{}, err
	}
	req.Header.Set("Authorization", "Bearer "+w.token)
	req.Header.Set("Idempotency-Key", w.idemKey(k))
	res, err := w.hc.Do(req)
	if err != nil {
		return 0, http.Header{}, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 300))
		key := hostOf(base) + " " + strconv.Itoa(res.StatusCode)
		w.mu.Lock()
		if _, ok := w.sample[key]; !ok {
			w.sample[key] = strings.TrimSpace(string(b))
		}
		w.mu.Unlock()
	}
	io.Copy(io.Discard, res.Body)
	return res.StatusCode, res.Header, nil
}

// failures is the writer's answers other than 200 so far, oldest first,
// and the first body of each router's and status's.
func (w *writer) failures() ([]fail, map[string]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	sample := map[string]string{}
	for k, v := range w.sample {
		sample[k] = v
	}
	return append([]fail(nil), w.fails...), sample
}

// snapshot is the writer's acknowledgements so far, oldest first.
func (w *writer) snapshot() ([]ack, map[int]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	errs := map[int]int{}
	for s, n := range w.errors {
		errs[s] = n
	}
	return append([]ack(nil), w.acks...), errs
}

// readBack reads every k the tenant holds, through the router, a page at a
// time.
// A read that would show a write a copy has not acknowledged waits for
// the copy, up to the node's bound (5 s), past the routers' upstream
// timeout when the copy is the dead node: a page answered 502 is asked
// again, the node by then no longer waiting for that copy.
func readBack(ctx context.Context, hc *http.Client, base, token, tenant string) (map[int]bool, error) {
	have := map[int]bool{}
	last := 0
	for {
		var rows []struct {
			K int `json:"k"`
		}
		q := map[string]any{"query": "get w select k where k > $1 order k limit 5000", "params": []any{last}}
		var st int
		var err error
		for try := 0; try < 10; try++ {
			if st, err = call(ctx, hc, http.MethodPost, base+"/t/"+tenant+"/query", token, q, &rows); err == nil && st == http.StatusOK {
				break
			}
			time.Sleep(time.Second)
		}
		if err != nil || st != http.StatusOK {
			return nil, fmt.Errorf("read back %s: status %d: %v", tenant, st, err)
		}
		for _, r := range rows {
			have[r.K] = true
			last = r.K
		}
		if len(rows) < 5000 {
			return have, nil
		}
	}
}

// longestGap is the longest time between consecutive acknowledgements of
// acks that falls within [from, to] (a gap spanning from counts from from).
func longestGap(acks []ack, from, to time.Time) time.Duration {
	var longest time.Duration
	prev := from
	for _, a := range acks {
		if a.at.Before(from) {
			continue
		}
		if a.at.After(to) {
			break
		}
		longest = max(longest, a.at.Sub(prev))
		prev = a.at
	}
	return max(longest, to.Sub(prev))
}

// firstAfter is the time from t to the first acknowledgement after it
// (-1 if none).
func firstAfter(acks []ack, t time.Time) time.Duration {
	for _, a := range acks {
		if a.at.After(t) {
			return a.at.Sub(t)
		}
	}
	return -1
}
