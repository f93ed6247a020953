package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/history"
)

// primary is a node's query route for one tenant's list, on loopback:
// inserts append k (once an Idempotency-Key: a key sent again is
// answered 200 unapplied), the list read answers every k in order.
// answer, when set, decides an insert's fate by the count of inserts
// asked so far.
type primary struct {
	name string
	mu   sync.Mutex
	list []int64         // guarded by mu
	n    int             // guarded by mu: inserts asked
	keys map[string]bool // guarded by mu: the Idempotency-Keys applied
	// answer says, for the nth insert asked (from 1), whether to apply
	// it and what to answer: a status, or 0 to hang up with no answer.
	answer func(n int) (apply bool, status int)
}

func (p *primary) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var q struct {
		Query  string  `json:"query"`
		Params []int64 `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&q); err != nil || !strings.HasSuffix(r.URL.Path, "/query") {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	w.Header().Set("Fenec-Node", p.name)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case strings.HasPrefix(q.Query, "insert w"):
		p.n++
		apply, status := true, http.StatusOK
		if p.answer != nil {
			apply, status = p.answer(p.n)
		}
		key := r.Header.Get("Idempotency-Key")
		if p.keys[key] {
			apply = false // a 200 now is the stored answer replayed
		}
		if apply {
			if p.keys == nil {
				p.keys = map[string]bool{}
			}
			p.keys[key] = true
			p.list = append(p.list, q.Params[0])
		}
		if status == 0 {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		w.WriteHeader(status)
		w.Write([]byte("[]"))
	case q.Query == "get w select k order id":
		rows := []map[string]int64{}
		for _, k := range p.list {
			rows = append(rows, map[string]int64{"k": k})
		}
		json.NewEncoder(w).Encode(rows)
	default:
		http.Error(w, "unknown query", http.StatusBadRequest)
	}
}

func serve(t *testing.T, p *primary) string {
	t.Helper()
	s := httptest.NewServer(p)
	t.Cleanup(s.Close)
	return s.URL
}

// runFor runs writers for d and stops them.
func runFor(writers []*writer, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	for _, w := range writers {
		wg.Go(func() { w.run(ctx) })
	}
	wg.Wait()
}

func count(ops []*history.Op, kind history.Kind, out history.Outcome) int {
	n := 0
	for _, op := range ops {
		if op.Kind == kind && op.Outcome == out {
			n++
		}
	}
	return n
}

// One primary answering every fifth insert 503 (not applied) and every
// seventh with a hang-up after applying it: every write is recorded
// with its outcome, the retried ones done once, reads interleave, and
// the history is linearizable.
func TestWriterHistoryOnePrimary(t *testing.T) {
	p := &primary{name: "n1", answer: func(n int) (bool, int) {
		switch {
		case n%5 == 0:
			return false, http.StatusServiceUnavailable
		case n%7 == 0:
			return true, 0
		}
		return true, http.StatusOK
	}}
	w := newWriter("t", "n1", "n2", []string{serve(t, p)}, "tok", &http.Client{})
	runFor([]*writer{w}, 1500*time.Millisecond)

	ops := w.history()
	acks, _ := w.snapshot()
	if got := count(ops, history.ListAppend, history.OK); got != len(acks) || got < 10 {
		t.Fatalf("%d appends recorded done, %d acknowledged", got, len(acks))
	}
	if count(ops, history.ListRead, history.OK) == 0 {
		t.Fatal("no list read recorded")
	}
	for _, op := range ops {
		if op.Return < op.Call {
			t.Fatalf("returned before called: %s", op)
		}
		if op.Kind == history.ListAppend && op.Outcome == history.OK && (op.Node != "n1" || op.IdemKey == "") {
			t.Fatalf("an append with no node or key: %s", op)
		}
	}
	// Every k was applied once though some were sent twice.
	p.mu.Lock()
	seen := map[int64]bool{}
	for _, k := range p.list {
		if seen[k] {
			t.Fatalf("%d applied twice", k)
		}
		seen[k] = true
	}
	p.mu.Unlock()
	lr := checkHistories([]*writer{w}, 10*time.Second, t.TempDir(), "test")
	if lr.text() != "1/1" || len(lr.problems("test", 1)) != 0 {
		t.Fatalf("a history of one primary: %s; %v", lr.summary(), lr.why)
	}
}

// A write the deployment may have taken and never answered is unknown:
// the primary hangs up on every insert after the first ten, having
// applied it, and the writer ends asking again.
func TestWriterUnansweredIsUnknown(t *testing.T) {
	p := &primary{name: "n1", answer: func(n int) (bool, int) {
		if n > 10 {
			return true, 0
		}
		return true, http.StatusOK
	}}
	w := newWriter("t", "n1", "n2", []string{serve(t, p)}, "tok", &http.Client{})
	runFor([]*writer{w}, 500*time.Millisecond)
	ops := w.history()
	if got := count(ops, history.ListAppend, history.OK); got != 10 {
		t.Fatalf("%d appends done, want 10", got)
	}
	if got := count(ops, history.ListAppend, history.Unknown); got != 1 {
		t.Fatalf("%d appends unknown, want the one unanswered: %v", got, ops)
	}
	// Its element was applied; the history holds it as a write that
	// never returned, so a read showing it is linearizable.
	last := w.readList(context.Background(), w.bases[0])
	if last.Outcome != history.OK || len(last.List) != 11 {
		t.Fatalf("the read after: %s", last)
	}
	w.ops = append(w.ops, last)
	if lr := checkHistories([]*writer{w}, 10*time.Second, t.TempDir(), "test"); lr.text() != "1/1" {
		t.Fatalf("%s %v", lr.summary(), lr.why)
	}
}

// Two primaries: the tenant's writer from each side has its own node
// take its writes, and each side's reads show only its own. Porcupine
// says not linearizable, the drill fails on it, and the visualization is
// written.
func TestWriterHistoryTwoPrimaries(t *testing.T) {
	us := newWriter("t", "n4", "n1", []string{serve(t, &primary{name: "n4"})}, "tok", &http.Client{})
	eu := newWriter("t", "n1", "n4", []string{serve(t, &primary{name: "n1"})}, "tok", &http.Client{})
	eu.first = 1_000_000
	runFor([]*writer{us, eu}, 1500*time.Millisecond)
	dir := t.TempDir()
	lr := checkHistories([]*writer{us, eu}, 10*time.Second, dir, "partitioned-1")
	if lr.text() != "0/1 (1 NOT)" || lr.verdict("t") != "NO" {
		t.Fatalf("two primaries: %s", lr.summary())
	}
	probs := lr.problems("partitioned", 1)
	if len(probs) != 1 || !strings.Contains(probs[0], "not linearizable") {
		t.Fatalf("problems: %v", probs)
	}
	b, err := os.ReadFile(filepath.Join(dir, "drill-partitioned-1-t.porcupine.html"))
	if err != nil || !strings.Contains(string(b), "<html") {
		t.Fatalf("visualization: %v", err)
	}
	if len(lr.whyLines()) == 0 {
		t.Fatal("no witness of where it stopped")
	}
	var ops []*history.Op
	b, err = os.ReadFile(filepath.Join(dir, "drill-partitioned-1-t.history.json"))
	if err != nil || json.Unmarshal(b, &ops) != nil || len(ops) != len(us.history())+len(eu.history()) || len(ops[0].Attempts) == 0 && ops[0].Kind == history.ListAppend {
		t.Fatalf("the tenant's history: %v, %d operations", err, len(ops))
	}
}

// hand builds a writer whose history is given.
func hand(tenant string, ops ...*history.Op) *writer {
	w := newWriter(tenant, "n1", "n2", []string{"http://127.0.0.1:1"}, "tok", &http.Client{})
	w.ops = ops
	return w
}

func appendOp(t string, k, call, ret int64) *history.Op {
	return &history.Op{Tenant: t, Kind: history.ListAppend, Key: listKey, Value: k, Call: call, Return: ret, Outcome: history.OK}
}

func readOp(t string, l []int64, call, ret int64) *history.Op {
	return &history.Op{Tenant: t, Kind: history.ListRead, Key: listKey, List: l, Call: call, Return: ret, Outcome: history.OK, Staleness: history.NoBound}
}

// Hand-made: two appends acknowledged, one on each side, then a read
// after both returned that misses the first — two primaries; and the
// same with the read showing both, which passes.
func TestCheckHistoriesHandMade(t *testing.T) {
	two := []*writer{
		hand("t", appendOp("t", 1, 0, 10)),
		hand("t", appendOp("t", 1_000_001, 5, 20), readOp("t", []int64{1_000_001}, 30, 40)),
	}
	if lr := checkHistories(two, 10*time.Second, t.TempDir(), "x"); len(lr.bad) != 1 || len(lr.ok) != 0 {
		t.Fatalf("two primaries passed: %s", lr.summary())
	}
	one := []*writer{
		hand("t", appendOp("t", 1, 0, 10)),
		hand("t", appendOp("t", 1_000_001, 5, 20), readOp("t", []int64{1, 1_000_001}, 30, 40)),
		hand("u", appendOp("u", 7, 0, 10), readOp("u", []int64{7}, 30, 40)),
	}
	if lr := checkHistories(one, 10*time.Second, t.TempDir(), "x"); lr.text() != "2/2" || len(lr.bad) != 0 {
		t.Fatalf("one primary: %s %v", lr.summary(), lr.why)
	}
	// A tenant with nothing porcupine can use (every read refused, no
	// write done) is counted, not passed.
	refused := readOp("t", nil, 30, 40)
	refused.Outcome = history.Fail
	if lr := checkHistories([]*writer{hand("t", refused)}, time.Second, t.TempDir(), "x"); lr.text() != "0/1" || lr.verdict("t") != "unchecked" {
		t.Fatalf("nothing to check: %s", lr.text())
	}
}
