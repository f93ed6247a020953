package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fenec-go/fenec/tests/cluster"
)

// writer puts rows {k: i} one after another through the router, each with
// its own Idempotency-Key, sending each again until it is acknowledged.
type writer struct {
	c      *cluster.Client
	tenant string

	// every, when set, paces the writes: one begun every so often, and a
	// refused one asked again after a few ms.
	every time.Duration

	mu     sync.Mutex
	acked  []int          // guarded by mu: every k answered 201
	at     []time.Time    // guarded by mu: when each of acked was answered
	seqs   map[int]string // guarded by mu: Fenec-Seq of each acknowledged k
	status map[int]int    // guarded by mu: answers other than 201, by status
	first  map[int]string // guarded by mu: the first answer of each such status
	last   *cluster.Resp  // guarded by mu: the last refusal, for failures
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startWriter starts the writer; t.Cleanup stops it.
func startWriter(t *testing.T, c *cluster.Client, tenant string) *writer {
	return startPacedWriter(t, c, tenant, 0)
}

// startPacedWriter starts a writer beginning a write every so often (0:
// each as soon as the last was acknowledged).
func startPacedWriter(t *testing.T, c *cluster.Client, tenant string, every time.Duration) *writer {
	w := &writer{c: c, tenant: tenant, every: every, status: map[int]int{}, first: map[int]string{}, seqs: map[int]string{}}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	w.wg.Go(w.run)
	t.Cleanup(w.stop)
	return w
}

func (w *writer) run() {
	next := time.Now()
	for k := 0; w.ctx.Err() == nil; k++ {
		if w.every > 0 {
			next = next.Add(w.every)
			if d := time.Until(next); d > 0 {
				w.sleep(d)
			}
		}
		for w.ctx.Err() == nil {
			r := w.c.DoCtx(w.ctx, "POST", "/t/"+w.tenant+"/c", fmt.Sprintf(`{"k": %d}`, k),
				"Idempotency-Key", "w-"+strconv.Itoa(k))
			w.mu.Lock()
			if r.Status == 201 {
				w.acked = append(w.acked, k)
				w.at = append(w.at, time.Now())
				w.seqs[k] = r.Header.Get("Fenec-Seq") + " replayed=" + r.Header.Get("Idempotent-Replayed")
				w.mu.Unlock()
				break
			}
			w.status[r.Status]++
			if _, ok := w.first[r.Status]; !ok {
				w.first[r.Status] = r.String()
			}
			w.last = r
			w.mu.Unlock()
			if w.every > 0 {
				w.sleep(2 * time.Millisecond)
			}
		}
	}
}

// sleep waits d or until the writer stops.
func (w *writer) sleep(d time.Duration) {
	select {
	case <-w.ctx.Done():
	case <-time.After(d):
	}
}

// longestGap is the longest time between two acknowledgements in a row,
// the later answered from..to, and when it ended.
func (w *writer) longestGap(from, to time.Time) (time.Duration, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var gap time.Duration
	var end time.Time
	for i := 1; i < len(w.at); i++ {
		at := w.at[i]
		if at.Before(from) || at.After(to) {
			continue
		}
		if d := at.Sub(w.at[i-1]); d > gap {
			gap, end = d, at
		}
	}
	return gap, end
}

// stop ends the writer and waits for it. Safe to call twice.
func (w *writer) stop() {
	w.cancel()
	w.wg.Wait()
}

// count is how many writes were acknowledged so far.
func (w *writer) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// TestMoveUnderWriter moves a tenant between nodes while a client writes
// to it through the router: every acknowledged write is on the target
// after, none twice, the ids and the vector index came along, and the
// source's file is gone.
func TestMoveUnderWriter(t *testing.T) {
	r, n1 := oneNode(t)
	c := r.Client()
	n2 := startSecondNode(t, r)
	r.Place("m", n1)
	c.MustQuery("m", "create collection c (k int @unique, v vector<2> @hnsw(l2))")
	c.MustQuery("m", "create collection pts (v vector<2> @hnsw(l2))")
	c.MustQuery("m", "put pts [{v: [0, 1]}, {v: [1, 0]}, {v: [0.5, 0.5]}]")
	nearBefore := string(c.MustQuery("m", "get pts select id near v [0.9, 0.2] limit 2").Body)

	w := startWriter(t, c, "m")
	cluster.Eventually(t, wait, func() error {
		if n := w.count(); n < 50 {
			return fmt.Errorf("%d writes acknowledged before the move", n)
		}
		return nil
	})
	mv := c.Do("POST", "/_shard/tenants/m/move", map[string]any{"to": n2.Name})
	wantStatus(t, mv, 200, "move")
	var moved struct {
		From, To string
		Bytes    int64
	}
	if err := json.Unmarshal(mv.Body, &moved); err != nil || moved.From != "n1" || moved.To != "n2" || moved.Bytes == 0 {
		t.Fatalf("move answer %s (%v)", mv.Body, err)
	}
	atMove := w.count()
	cluster.Eventually(t, wait, func() error {
		if n := w.count(); n < atMove+50 {
			return fmt.Errorf("%d writes acknowledged after the move, want 50", n-atMove)
		}
		return nil
	})
	w.stop()

	w.mu.Lock()
	acked, refusals, last := w.acked, w.status, w.last
	w.mu.Unlock()
	t.Logf("%d writes acknowledged, %d before the move answered; refusals by status %v (last %v)", len(acked), atMove, refusals, last)

	// Every acknowledged k is there once, read through the router and on
	// the target itself.
	for _, cl := range []*cluster.Client{c, NewDirect(t, n2)} {
		rows := cl.MustQuery("m", "get c select k order k").Rows(t)
		have := map[int]int{}
		for _, row := range rows {
			k, _ := strconv.Atoi(fmt.Sprint(row["k"]))
			have[k]++
		}
		for _, k := range acked {
			if have[k] != 1 {
				t.Fatalf("%s: acknowledged write k=%d (Fenec-Seq %s) is there %d times; rows %s", cl.Base(), k, w.seqs[k], have[k], rows)
			}
		}
		if len(rows) > len(acked)+1 {
			t.Fatalf("%s: %d rows for %d acknowledged writes (one may be in flight at the stop)", cl.Base(), len(rows), len(acked))
		}
	}
	if got := string(c.MustQuery("m", "get pts select id near v [0.9, 0.2] limit 2").Body); got != nearBefore {
		t.Fatalf("near after the move: %s, before %s", got, nearBefore)
	}
	// Ids continue where they were: a new point takes id 4.
	if got := c.Do("POST", "/t/m/pts", `{"v": [0.2, 0.2]}`); got.Status != 201 || string(got.Body) != `{"ids":[4],"inserted":1}`+"\n" && string(got.Body) != `{"ids":[4],"inserted":1}` {
		t.Fatalf("insert after the move: %s", got)
	}
	list := c.Do("GET", "/_shard/tenants", nil)
	for _, row := range list.Rows(t) {
		if row["name"] == "m" && (row["node"] != "n2" || row["state"] != "active") {
			t.Fatalf("after the move: %v", row)
		}
	}
	// The source's file goes once the grace after the answer has passed.
	cluster.Eventually(t, wait, func() error {
		if _, err := os.Stat(filepath.Join(n1.DataDir, "m.fenec")); !os.IsNotExist(err) {
			return fmt.Errorf("n1 still has m.fenec after the move: %v", err)
		}
		return nil
	})
}
