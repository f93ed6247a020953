package link

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/testkit"
)

// The tests below run the link without a router: region eu's directory
// and the global one are in memory, the lead and the leasing are the
// test's, and the audit lines are kept to be read.

// testWait bounds every wait of these tests: a bound on a hang, never an
// assertion about speed.
const testWait = 30 * time.Second

func testCtx(tb testing.TB) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	tb.Cleanup(cancel)
	return ctx
}

// testLead is a lead over region eu's directory that the test decides.
type testLead struct {
	store *global.Store

	mu      sync.Mutex
	leading bool          // guarded by mu
	term    uint64        // guarded by mu
	fenced  *global.Store // guarded by mu
	lost    []error       // guarded by mu: Lost calls
}

var errNotLeading = errors.New("test: this router does not lead")

// lead promotes the router in the directory and leads at the new term.
func (d *testLead) lead(tb testing.TB) {
	tb.Helper()
	ctx := testCtx(tb)
	term, err := d.store.Promote(ctx, "eu-1")
	if err != nil {
		tb.Fatal(err)
	}
	cur, err := d.store.Term(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	d.mu.Lock()
	d.leading, d.term, d.fenced = true, term, d.store.Fenced(cur.Rev)
	d.mu.Unlock()
}

func (d *testLead) Status() (bool, uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.leading, d.term
}

func (d *testLead) Changes(context.Context) (*global.Store, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.leading {
		return nil, errNotLeading
	}
	return d.fenced, nil
}

func (d *testLead) Lost(_ context.Context, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lost = append(d.lost, err)
}

// testLeasing counts what the link tells the leasing.
type testLeasing struct {
	mu      sync.Mutex
	pokes   int           // guarded by mu
	resyncs int           // guarded by mu
	settled time.Duration // guarded by mu: the last SettleForce
}

func (s *testLeasing) Poke() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pokes++
}

func (s *testLeasing) Resync() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resyncs++
}

func (s *testLeasing) SettleForce(at time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settled = at
}

// testAudit keeps the audit lines the link wrote.
type testAudit struct {
	mu    sync.Mutex
	lines []string // guarded by mu: "what: detail"
}

func (a *testAudit) region(dir string, was, now global.Region) {
	a.control("region_record", fmt.Sprintf("region %s in %s: epoch %d -> %d", now.Name, dir, was.Epoch, now.Epoch))
}

func (a *testAudit) control(what, detail string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lines = append(a.lines, what+": "+detail)
}

// with returns the lines whose kind is what.
func (a *testAudit) with(what string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, l := range a.lines {
		if strings.HasPrefix(l, what+": ") {
			out = append(out, l)
		}
	}
	return out
}

// linkedRegion is region eu's link between a region's directory (rd) and
// a global directory (gd) the test writes directly: nodes e1, e2 of eu
// and u1 of us (records only: no node serves them).
type linkedRegion struct {
	l       *Link
	rd      global.Directory
	gd      *watchedDir
	g       *global.Store
	lead    *testLead
	leasing *testLeasing
	audit   *testAudit

	mu     sync.Mutex
	opened int // guarded by mu: the global directory opened
	closed int // guarded by mu: the global directory closed
	stop   func()
}

// newLinkedRegion writes the global directory's records and builds the
// link over deps as opts change them, not running (start runs it).
func newLinkedRegion(t *testing.T, opts ...func(*Deps)) *linkedRegion {
	t.Helper()
	gd := newWatchedDir(t)
	g := global.NewStore(gd.Directory)
	ctx := testCtx(t)
	if _, err := g.Txn().PutRegion(0, global.Region{Name: "eu", Leaser: global.LeaserGlobal}).
		PutNode("e1", 0, global.Node{Addr: "http://127.0.0.1:1", Region: "eu"}).
		PutNode("e2", 0, global.Node{Addr: "http://127.0.0.1:2", Region: "eu"}).
		PutNode("u1", 0, global.Node{Addr: "http://127.0.0.1:3", Region: "us"}).
		PutLeaseRecord(0, 1500).
		Commit(ctx); err != nil {
		t.Fatal(err)
	}
	rd := global.NewMemory()
	t.Cleanup(func() { _ = rd.Close() })
	lr := &linkedRegion{rd: rd, gd: gd, g: g, lead: &testLead{store: global.NewStore(rd)}, leasing: &testLeasing{}, audit: &testAudit{}}
	deps := Deps{
		ID:     "eu-1",
		Region: "eu",
		Own:    time.Second,
		Dir:    rd,
		Open: func(context.Context) (global.Directory, error) {
			lr.mu.Lock()
			defer lr.mu.Unlock()
			lr.opened++
			return closeCounted{gd, lr}, nil
		},
		Lead:         lr.lead,
		Leasing:      lr.leasing,
		Settle:       func(context.Context, int64) {},
		AuditRegion:  lr.audit.region,
		AuditControl: lr.audit.control,
		Log:          testkit.Logger(),
	}
	for _, o := range opts {
		o(&deps)
	}
	lr.l = New(deps)
	return lr
}

// startLinkedRegion is newLinkedRegion leading and running.
func startLinkedRegion(t *testing.T, opts ...func(*Deps)) *linkedRegion {
	t.Helper()
	lr := newLinkedRegion(t, opts...)
	lr.lead.lead(t)
	lr.start(t)
	return lr
}

// start runs the link until stop or the test's end.
func (l *linkedRegion) start(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { l.l.Run(ctx) })
	var once sync.Once
	l.stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(l.stop)
}

func (l *linkedRegion) counts() (opened, closed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.opened, l.closed
}

// closeCounted is the global directory as the link opens it: its Close
// is counted, not passed on (the test owns the directory).
type closeCounted struct {
	global.Directory
	l *linkedRegion
}

func (c closeCounted) Close() error {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	c.l.closed++
	return nil
}

// watchedDir is a global directory the test holds, as a region's link
// sees it: it counts the link's whole reads (List), and can hold back
// what its watches send and then end them as compacted.
type watchedDir struct {
	global.Directory
	wg sync.WaitGroup

	mu    sync.Mutex
	lists int           // guarded by mu: List calls
	held  bool          // guarded by mu: watches send nothing while held
	cut   chan struct{} // guarded by mu: closed to end the watches open now
}

func newWatchedDir(tb testing.TB) *watchedDir {
	d := &watchedDir{Directory: global.NewMemory(), cut: make(chan struct{})}
	tb.Cleanup(func() {
		_ = d.Directory.Close()
		d.wg.Wait()
	})
	return d
}

func (d *watchedDir) List(ctx context.Context, prefix string) ([]global.KV, int64, error) {
	d.mu.Lock()
	d.lists++
	d.mu.Unlock()
	return d.Directory.List(ctx, prefix)
}

func (d *watchedDir) listed() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lists
}

// hold has the watches send nothing more (what they would have sent is
// lost, as a compacted history loses it).
func (d *watchedDir) hold() {
	d.mu.Lock()
	d.held = true
	d.mu.Unlock()
}

// compactAndCut compacts the directory at its revision and ends every
// watch open now as compacted.
func (d *watchedDir) compactAndCut(tb testing.TB) {
	tb.Helper()
	ctx := testCtx(tb)
	_, rev, err := d.Directory.List(ctx, global.KeyName)
	if err != nil {
		tb.Fatal(err)
	}
	if err := d.Compact(ctx, rev); err != nil {
		tb.Fatal(err)
	}
	d.mu.Lock()
	close(d.cut)
	d.cut, d.held = make(chan struct{}), false
	d.mu.Unlock()
}

func (d *watchedDir) Watch(ctx context.Context, prefix string, after int64) (<-chan global.WatchResponse, error) {
	in, err := d.Directory.Watch(ctx, prefix, after)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	cut := d.cut
	d.mu.Unlock()
	out := make(chan global.WatchResponse)
	d.wg.Go(func() {
		defer close(out)
		for {
			select {
			case r, ok := <-in:
				if !ok {
					return
				}
				d.mu.Lock()
				held := d.held
				d.mu.Unlock()
				if held {
					continue
				}
				select {
				case out <- r:
				case <-ctx.Done():
					return
				}
			case <-cut:
				select {
				case out <- global.WatchResponse{Err: fmt.Errorf("test: %w", global.ErrCompacted)}:
				case <-ctx.Done():
				}
				return
			case <-ctx.Done():
				return
			}
		}
	})
	return out, nil
}

// want is region eu's records as the global directory holds them now
// (the test's own reading of the rule): its nodes, the tenants on them
// and those tenants' quotas, and the longest-lease record; by key, the
// value of every tenant and quota (nodes by key alone: the region's
// directory seals their tokens).
func (l *linkedRegion) want(tb testing.TB) map[string]string {
	tb.Helper()
	kvs, _, err := l.gd.Directory.List(testCtx(tb), "")
	if err != nil {
		tb.Fatal(err)
	}
	return mirroredOf(tb, kvs, func(kvs map[string]global.KV) map[string]bool {
		eu := map[string]bool{}
		for k, kv := range kvs {
			if n, ok := strings.CutPrefix(k, global.PrefixNodes); ok {
				var rec global.Node
				if json.Unmarshal(kv.Value, &rec) == nil && rec.Region == "eu" {
					eu[n] = true
				}
			}
		}
		return eu
	}, true)
}

// have is the region's directory's mirrored records, as want has them.
func (l *linkedRegion) have(tb testing.TB) map[string]string {
	tb.Helper()
	kvs, _, err := l.rd.List(testCtx(tb), "")
	if err != nil {
		tb.Fatal(err)
	}
	return mirroredOf(tb, kvs, func(kvs map[string]global.KV) map[string]bool {
		all := map[string]bool{}
		for k := range kvs {
			if n, ok := strings.CutPrefix(k, global.PrefixNodes); ok {
				all[n] = true
			}
		}
		return all
	}, false)
}

// mirroredOf picks the nodes nodesOf names, the tenants on them, their
// quotas and the lease record from kvs; pick says a quota is kept only
// with its tenant.
func mirroredOf(tb testing.TB, list []global.KV, nodesOf func(map[string]global.KV) map[string]bool, pick bool) map[string]string {
	kvs := map[string]global.KV{}
	for _, kv := range list {
		kvs[kv.Key] = kv
	}
	nodes := nodesOf(kvs)
	out := map[string]string{}
	for k, kv := range kvs {
		switch {
		case k == global.KeyLeaseRecord:
			out[k] = string(kv.Value)
		case strings.HasPrefix(k, global.PrefixNodes):
			if nodes[strings.TrimPrefix(k, global.PrefixNodes)] {
				out[k] = ""
			}
		case strings.HasPrefix(k, global.PrefixTenants):
			var rec global.Tenant
			if err := json.Unmarshal(kv.Value, &rec); err != nil {
				tb.Fatal(err)
			}
			if nodes[rec.Node] || !pick {
				out[k] = string(kv.Value)
			}
		}
	}
	for k, kv := range kvs {
		if t, ok := strings.CutPrefix(k, global.PrefixQuotas); ok {
			if _, placed := out[global.TenantKey(t)]; placed || !pick {
				out[k] = string(kv.Value)
			}
		}
	}
	return out
}

// inLine waits until the region's directory holds exactly region eu's
// records of the global directory.
func (l *linkedRegion) inLine(tb testing.TB) {
	tb.Helper()
	testkit.Eventually(tb, testWait, func() error {
		want, have := l.want(tb), l.have(tb)
		if !maps.Equal(want, have) {
			return fmt.Errorf("the region's directory holds %d records, want %d; first differing: %s", len(have), len(want), firstDiff(want, have))
		}
		return nil
	})
}

func firstDiff(a, b map[string]string) string {
	for _, k := range slices.Sorted(maps.Keys(a)) {
		if v, ok := b[k]; !ok || v != a[k] {
			return fmt.Sprintf("%s: %q against %q", k, a[k], v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(b)) {
		if _, ok := a[k]; !ok {
			return k + " not wanted"
		}
	}
	return ""
}

func (l *linkedRegion) put(tb testing.TB, tx *global.Txn) {
	tb.Helper()
	if _, err := tx.Commit(testCtx(tb)); err != nil {
		tb.Fatal(err)
	}
}

// After the first sync, the link copies each change of the global
// directory from its watch: ten changes, each in the region's directory,
// and the global directory never read whole again.
func TestLinkCopiesChangesWithoutReading(t *testing.T) {
	l := startLinkedRegion(t)
	l.put(t, l.g.Txn().PutTenant("t0", 0, global.Tenant{Node: "e1", State: global.StateActive}))
	l.inLine(t)
	lists := l.gd.listed()
	for i := range 10 {
		name := fmt.Sprintf("t%d", i+1)
		tx := l.g.Txn().PutTenant(name, 0, global.Tenant{Node: []string{"e1", "u1"}[i%2], State: global.StateActive})
		if i%3 == 0 {
			tx = tx.PutQuota(name, 0, global.Quota{Rows: int64(i + 1)})
		}
		l.put(t, tx)
		l.inLine(t)
	}
	if n := l.gd.listed() - lists; n != 0 {
		t.Fatalf("ten changes read the global directory whole %d times", n)
	}
}

// A watch whose history was compacted away ends; the link lists both
// directories again and copies what the lost events carried.
func TestLinkCompactedWatchListsAgain(t *testing.T) {
	l := startLinkedRegion(t)
	l.put(t, l.g.Txn().PutTenant("t0", 0, global.Tenant{Node: "e1", State: global.StateActive}))
	l.inLine(t)
	lists := l.gd.listed()
	l.gd.hold()
	t0, err := l.g.GetTenant(testCtx(t), "t0")
	if err != nil {
		t.Fatal(err)
	}
	l.put(t, l.g.Txn().PutTenant("t0", t0.Rev, global.Tenant{Node: "u1", State: global.StateActive}).
		PutTenant("t1", 0, global.Tenant{Node: "e2", State: global.StateActive}).
		PutQuota("t1", 0, global.Quota{Rows: 3}))
	l.gd.compactAndCut(t)
	l.inLine(t)
	if n := l.gd.listed() - lists; n < 1 {
		t.Fatalf("the link caught up without listing the global directory again (%d lists)", n)
	}
}

// Random changes of the global directory — tenants placed, moved between
// regions and removed, quotas, a node moving between regions with its
// tenants, nodes removed and added — with the link's watch lost now and
// then, never leave the region's directory behind: once the changes stop,
// it holds exactly what the global directory says is the region's.
func TestLinkConvergesUnderRandomChanges(t *testing.T) {
	l := startLinkedRegion(t)
	ctx := testCtx(t)
	rnd := rand.New(rand.NewPCG(uint64(len(t.Name())), 11))
	nodes := []string{"e1", "e2", "u1"}
	for round := range 300 {
		name := fmt.Sprintf("t%d", rnd.IntN(40))
		at, err := l.g.GetTenant(ctx, name)
		if err != nil && !errors.Is(err, global.ErrNotFound) {
			t.Fatal(err)
		}
		switch k := rnd.IntN(20); {
		case k < 10:
			l.put(t, l.g.Txn().PutTenant(name, at.Rev, global.Tenant{Node: nodes[rnd.IntN(3)], State: global.StateActive, Lineage: uint64(round)}))
		case k < 13:
			q, err := l.g.GetQuota(ctx, name)
			if err != nil && !errors.Is(err, global.ErrNotFound) {
				t.Fatal(err)
			}
			l.put(t, l.g.Txn().PutQuota(name, q.Rev, global.Quota{Rows: int64(round)}))
		case k < 15:
			if at.Rev != 0 {
				if _, err := l.g.Directory().Delete(ctx, global.TenantKey(name)); err != nil {
					t.Fatal(err)
				}
			}
		case k < 18:
			n := nodes[rnd.IntN(3)]
			rec, err := l.g.GetNode(ctx, n)
			if err != nil && !errors.Is(err, global.ErrNotFound) {
				t.Fatal(err)
			}
			l.put(t, l.g.Txn().PutNode(n, rec.Rev, global.Node{Addr: "http://127.0.0.1:9", Region: []string{"eu", "us"}[rnd.IntN(2)]}))
		case k < 19:
			if _, err := l.g.Directory().Delete(ctx, global.NodeKey(nodes[rnd.IntN(3)])); err != nil {
				t.Fatal(err)
			}
		default:
			l.gd.hold()
			l.put(t, l.g.Txn().PutTenant(fmt.Sprintf("h%d", round), 0, global.Tenant{Node: "e1", State: global.StateActive}))
			l.gd.compactAndCut(t)
		}
		if rnd.IntN(30) == 0 {
			l.inLine(t)
		}
	}
	l.inLine(t)
}

// While its router does not lead, the link opens nothing and copies
// nothing, however long; once it leads, it copies; when Run ends, the
// global directory it opened is closed, once, and Global is nil. Inside
// a testing/synctest bubble: a minute of not leading takes no time.
func TestLinkRunsWhileLeading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLinkedRegion(t)
		l.put(t, l.g.Txn().PutTenant("t0", 0, global.Tenant{Node: "e1", State: global.StateActive}))
		l.start(t)
		time.Sleep(time.Minute)
		synctest.Wait()
		if opened, _ := l.counts(); opened != 0 || l.l.Global() != nil {
			t.Fatalf("the global directory opened %d times by a router that does not lead", opened)
		}
		if kvs, _, err := l.rd.List(testCtx(t), global.PrefixTenants); err != nil || len(kvs) != 0 {
			t.Fatalf("the region's directory holds %d tenants (%v) copied by a router that does not lead", len(kvs), err)
		}
		l.lead.lead(t)
		l.inLine(t)
		if l.l.GlobalAnswered().IsZero() || l.l.Global() == nil {
			t.Fatal("in line without the global directory answering a step")
		}
		l.stop()
		if opened, closed := l.counts(); opened != 1 || closed != 1 || l.l.Global() != nil {
			t.Fatalf("after Run: the global directory opened %d times, closed %d; Global %v", opened, closed, l.l.Global())
		}
	})
}
