package region

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/testkit/testnode"
	"github.com/fenec-go/fenec/node"
	"github.com/fenec-go/fenec/region/failover"
	"github.com/fenec-go/fenec/wire"
)

// txnCounter is a directory that counts the transactions sent to it while
// counting is on.
type txnCounter struct {
	global.Directory
	on   atomic.Bool
	txns atomic.Int64
	ops  atomic.Int64 // the largest transaction's writes
}

func (c *txnCounter) Txn(ctx context.Context, conds []global.Cond, ops []global.Op) (int64, error) {
	if c.on.Load() {
		c.txns.Add(1)
		for {
			cur := c.ops.Load()
			if int64(len(ops)) <= cur || c.ops.CompareAndSwap(cur, int64(len(ops))) {
				break
			}
		}
	}
	return c.Directory.Txn(ctx, conds, ops)
}

// failoverRig is a router over dir with nodes a and b, b a's standby, and
// n tenants placed on a (each with its copy on b); wrapB, if set, stands
// in front of b.
func failoverRig(t *testing.T, dir global.Directory, n int, wrapB func(http.Handler) http.Handler) (*cpRouter, *replNode, *replNode, []string) {
	t.Helper()
	r := startCPRouter(t, func(c *Config) { c.Directory = dir })
	a := startReplNode(t)
	b := &replNode{testnode.Start(t, testnode.Options{Configure: func(c *node.Config) { c.Sync = "always" }, Wrap: wrapB})}
	r.addReplNode(t, "a", a, nil)
	r.addReplNode(t, "b", b, nil)
	r.addReplNode(t, "a", a, map[string]any{"standby": "b"})
	var names []string
	for i := range n {
		name := fmt.Sprintf("t%03d", i)
		r.place(t, name, "a")
		names = append(names, name)
	}
	for _, name := range names {
		caughtUp(t, name, a, b)
	}
	return r, a, b, names
}

// A node's failover writes the directory a few times for all its tenants
// (held together, pointed at their copies together, in batches within
// etcd's limit on one transaction), not three times a tenant.
func TestFailoverOfManyTenantsFewTransactionsCP(t *testing.T) {
	const n = 130 // two batches
	mem := global.NewMemory()
	t.Cleanup(func() { mem.Close() })
	dir := &txnCounter{Directory: mem}
	r, a, _, names := failoverRig(t, dir, n, nil)
	a.down(t)
	dir.on.Store(true)
	var res FailoverResult
	if st, body := r.shard(t, http.MethodPost, "nodes/a/failover", map[string]any{}, &res); st != http.StatusOK {
		t.Fatalf("failover: %d %s", st, body)
	}
	dir.on.Store(false)
	if len(res.Promoted) != n || len(res.Failed) != 0 {
		t.Fatalf("failover: %d promoted, failed %+v", len(res.Promoted), res.Failed)
	}
	// Two batches, each held in one transaction and pointed in one.
	if got := dir.txns.Load(); got > 4 {
		t.Fatalf("%d directory transactions for %d tenants, want at most 4", got, n)
	}
	if got := dir.ops.Load(); got > failover.Batch {
		t.Fatalf("a transaction of %d writes, past the batch of %d", got, failover.Batch)
	}
	tenants := r.tenantsOf(t)
	for _, name := range names {
		if e := tenants[name]; e.Node != "b" || e.Replica != "" {
			t.Fatalf("%s after failover: %+v", name, e)
		}
	}
	r.mustQuery(t, names[n-1], "create collection c (n int)")
	r.mustQuery(t, names[n-1], `put c {n: 1}`)
}

// The copies a node holds are promoted in one call per batch naming them
// all (POST /_admin/promote), not a call a tenant, and the batches are
// under way at once, not one after another.
func TestFailoverPromotesInOneCallPerNodeCP(t *testing.T) {
	const n = failover.Batch + 30 // two batches
	mem := global.NewMemory()
	t.Cleanup(func() { mem.Close() })
	var bulk, single atomic.Int64
	var named sync.Map
	var mu sync.Mutex
	inFlight, most := 0, 0 // guarded by mu: calls of many under way
	gate := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			switch {
			case req.Method == http.MethodPost && req.URL.Path == "/_admin/promote":
				bulk.Add(1)
				mu.Lock()
				inFlight++
				most = max(most, inFlight)
				// Hold the call until the other batch's comes (or a while
				// has passed: batches one after another show as most == 1).
				deadline := time.Now().Add(3 * time.Second)
				for inFlight < 2 && time.Now().Before(deadline) {
					mu.Unlock()
					time.Sleep(time.Millisecond)
					mu.Lock()
				}
				mu.Unlock()
				defer func() {
					mu.Lock()
					inFlight--
					mu.Unlock()
				}()
				var body wire.PromoteMany
				b, _ := io.ReadAll(req.Body)
				if err := json.Unmarshal(b, &body); err == nil {
					for _, t := range body.Tenants {
						named.Store(t.Tenant, true)
					}
				}
				req.Body = io.NopCloser(bytes.NewReader(b))
			case req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/promote"):
				single.Add(1)
			}
			next.ServeHTTP(w, req)
		})
	}
	r, a, _, names := failoverRig(t, mem, n, gate)
	bulk.Store(0)
	a.down(t)
	var res FailoverResult
	if st, body := r.shard(t, http.MethodPost, "nodes/a/failover", map[string]any{}, &res); st != http.StatusOK {
		t.Fatalf("failover: %d %s", st, body)
	}
	if len(res.Promoted) != n || len(res.Failed) != 0 {
		t.Fatalf("failover: %d promoted, failed %+v", len(res.Promoted), res.Failed)
	}
	if b, s := bulk.Load(), single.Load(); b != 2 || s != 0 {
		t.Fatalf("%d calls of many tenants and %d of one for %d tenants, want 2 and 0", b, s, n)
	}
	for _, name := range names {
		if _, ok := named.Load(name); !ok {
			t.Fatalf("%s promoted without being named in a call of many", name)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most != 2 {
		t.Fatalf("at most %d calls of many under way at once for two batches, want 2", most)
	}
	r.mustQuery(t, names[0], "create collection c (n int)")
	r.mustQuery(t, names[0], `put c {n: 1}`)
}

// A node without the route of many promotions (older than the router)
// answers it 404: its copies are promoted one call each, several at
// once, never more than the bound.
func TestFailoverPromotesInParallelCP(t *testing.T) {
	const n = failover.Parallel + 4
	mem := global.NewMemory()
	t.Cleanup(func() { mem.Close() })
	var mu sync.Mutex
	inFlight, most := 0, 0
	var counting atomic.Bool
	gate := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.URL.Path == "/_admin/promote" {
				http.Error(w, `{"error":"no route"}`, http.StatusNotFound)
				return
			}
			if !counting.Load() || req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/promote") {
				next.ServeHTTP(w, req)
				return
			}
			mu.Lock()
			inFlight++
			most = max(most, inFlight)
			// Hold each promotion until another runs beside it (or a
			// while has passed: one run at a time then shows as most == 1).
			deadline := time.Now().Add(3 * time.Second)
			for inFlight < 2 && time.Now().Before(deadline) {
				mu.Unlock()
				time.Sleep(time.Millisecond)
				mu.Lock()
			}
			mu.Unlock()
			defer func() {
				mu.Lock()
				inFlight--
				mu.Unlock()
			}()
			next.ServeHTTP(w, req)
		})
	}
	r, a, _, _ := failoverRig(t, mem, n, gate)
	counting.Store(true)
	a.down(t)
	var res FailoverResult
	if st, body := r.shard(t, http.MethodPost, "nodes/a/failover", map[string]any{}, &res); st != http.StatusOK {
		t.Fatalf("failover: %d %s", st, body)
	}
	counting.Store(false)
	if len(res.Promoted) != n || len(res.Failed) != 0 {
		t.Fatalf("failover: %d promoted, failed %+v", len(res.Promoted), res.Failed)
	}
	mu.Lock()
	defer mu.Unlock()
	if most < 2 || most > failover.Parallel {
		t.Fatalf("at most %d promotions at once, want 2..%d", most, failover.Parallel)
	}
}
