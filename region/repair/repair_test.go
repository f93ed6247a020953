package repair

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fenec-go/fenec/global"
)

// clock is a settable Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// fakeLead leads at term, or not; Changes counts its calls and refuses
// (the loop then does nothing else).
type fakeLead struct {
	leading atomic.Bool
	term    atomic.Uint64
	asked   atomic.Int64
}

func (l *fakeLead) Status() (bool, uint64) { return l.leading.Load(), l.term.Load() }
func (l *fakeLead) Changes(ctx context.Context) (*global.Store, error) {
	l.asked.Add(1)
	return nil, errors.New("not leading")
}

var errUnknownNode = errors.New("unknown node")

// dirStore is a store over an in-memory directory holding nodes (name:
// region, a "*" suffix for a standby), tenants and standbys.
func dirStore(tb testing.TB, nodes map[string]string, tenants map[string]global.Tenant, standbys map[string]string) *global.Store {
	tb.Helper()
	s := global.NewStore(global.NewMemory())
	tx := s.Txn()
	for name, region := range nodes {
		n := global.Node{Addr: "127.0.0.1:1", Region: region}
		if r, ok := cutStar(region); ok {
			n.Region, n.Standby = r, true
		}
		tx = tx.PutNode(name, 0, n)
	}
	for name, t := range tenants {
		tx = tx.PutTenant(name, 0, t)
	}
	for n, sb := range standbys {
		tx = tx.PutStandby(n, 0, sb)
	}
	if _, err := tx.Commit(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return s
}

func cutStar(s string) (string, bool) {
	if len(s) > 0 && s[len(s)-1] == '*' {
		return s[:len(s)-1], true
	}
	return s, false
}

func testRepairer(s *global.Store, deps Deps) *Repairer {
	deps.Store = s
	if deps.UnknownNode == nil {
		deps.UnknownNode = func(err error) error {
			if errors.Is(err, global.ErrNotFound) {
				return fmt.Errorf("%w (%w)", errUnknownNode, err)
			}
			return err
		}
	}
	if deps.Fittest == nil {
		deps.Fittest = func(context.Context, map[string]global.Node) (string, error) {
			return "", errors.New("no node answered its sizes")
		}
	}
	return New(deps)
}

func TestPlacesOnAndLeftBehind(t *testing.T) {
	active := global.Tenant{Node: "a", Replica: "b", Target: "c", State: global.StateActive, Lineage: 7}
	for _, tc := range []struct {
		name       string
		t          global.Tenant
		node       string
		placesOn   bool
		leftBehind bool
	}{
		{"primary", active, "a", true, false},
		{"copy", active, "b", true, false},
		{"move target", active, "c", true, false},
		{"elsewhere", active, "d", false, true},
		{"read copy", with(active, func(t *global.Tenant) { t.ReadCopies = global.MakeNodeList("d") }), "d", false, false},
		{"failed off it", with(active, func(t *global.Tenant) { t.FailedFrom = "d" }), "d", false, false},
		{"held", with(active, func(t *global.Tenant) { t.HeldBy = "move" }), "d", false, false},
		{"not active", with(active, func(t *global.Tenant) { t.State = "" }), "d", false, false},
		{"no lineage recorded", with(active, func(t *global.Tenant) { t.Lineage = 0 }), "d", false, false},
	} {
		if got := PlacesOn(tc.t, tc.node); got != tc.placesOn {
			t.Errorf("%s: PlacesOn = %v, want %v", tc.name, got, tc.placesOn)
		}
		if got := leftBehind(tc.t, tc.node); got != tc.leftBehind {
			t.Errorf("%s: leftBehind = %v, want %v", tc.name, got, tc.leftBehind)
		}
	}
}

func with(t global.Tenant, change func(*global.Tenant)) global.Tenant {
	change(&t)
	return t
}

// TestPickReplica: the standby first; a region's other nodes only when
// spread, never the primary, a standby, another region's node or one
// holding a read copy; the fewest copies of the primary's tenants, then
// the fittest, then the name.
func TestPickReplica(t *testing.T) {
	ctx := context.Background()
	nodes := map[string]string{"a": "eu", "b": "eu", "c": "eu", "d": "us", "s": "eu*", "r": "eu"}
	tenants := map[string]global.Tenant{
		"t1": {Node: "a", Replica: "b", State: global.StateActive},
		"t2": {Node: "a", State: global.StateActive, ReadCopies: global.MakeNodeList("r")},
		"t3": {Node: "c", Replica: "r", State: global.StateActive},
	}
	for _, tc := range []struct {
		name     string
		standbys map[string]string
		tenant   string
		spread   bool
		fittest  func(context.Context, map[string]global.Node) (string, error)
		want     string
	}{
		{"standby wins", map[string]string{"a": "s"}, "t2", false, nil, "s"},
		{"standby wins, spread too", map[string]string{"a": "s"}, "t2", true, nil, "s"},
		{"none unless spread", nil, "t2", false, nil, ""},
		// b holds one of a's copies; r holds t2's read copy; d is in us;
		// s is a standby: c is left.
		{"fewest copies", nil, "t2", true, nil, "c"},
		// For t3 (on c): a, b, r hold none of c's copies but r's; the
		// sizes choose among a and b.
		{"fittest among the tied", nil, "t3", true, func(_ context.Context, cands map[string]global.Node) (string, error) {
			names := make([]string, 0, len(cands))
			for n := range cands {
				names = append(names, n)
			}
			slices.Sort(names)
			if !slices.Equal(names, []string{"a", "b"}) {
				return "", fmt.Errorf("asked the sizes of %v", names)
			}
			return "b", nil
		}, "b"},
		{"by name when no sizes", nil, "t3", true, nil, "a"},
	} {
		s := dirStore(t, nodes, tenants, tc.standbys)
		p := testRepairer(s, Deps{Fittest: tc.fittest})
		got, err := p.PickReplica(ctx, s, tenants[tc.tenant], tc.spread)
		if err != nil || got != tc.want {
			t.Errorf("%s: PickReplica = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

// TestPickReplicaRefusals: an unknown primary is the API's unknown node;
// a region with no other node gives no copy; a tenant to survive its
// region asks region/copies' candidates only.
func TestPickReplicaRefusals(t *testing.T) {
	ctx := context.Background()
	s := dirStore(t, map[string]string{"a": "eu", "d": "us", "e": "us"}, nil, nil)
	p := testRepairer(s, Deps{})
	if got, err := p.PickReplica(ctx, s, global.Tenant{Node: "gone"}, true); !errors.Is(err, errUnknownNode) || got != "" {
		t.Errorf("unknown primary: %q, %v; want errUnknownNode", got, err)
	}
	if got, err := p.PickReplica(ctx, s, global.Tenant{Node: "a"}, true); err != nil || got != "" {
		t.Errorf("alone in its region: %q, %v; want no copy", got, err)
	}
	var asked []string
	p = testRepairer(s, Deps{RegionCandidates: func(_ context.Context, _ *global.Store, t global.Tenant, primary global.Node, _ map[string]global.Versioned[global.Node]) map[string]int {
		asked = append(asked, primary.Region)
		return map[string]int{"e": 0}
	}})
	got, err := p.PickReplica(ctx, s, global.Tenant{Node: "a", Survive: global.SurviveRegion}, false)
	if err != nil || got != "e" || !slices.Equal(asked, []string{"eu"}) {
		t.Errorf("survive region: %q, %v (candidates asked for %v); want e, asked once for eu", got, err, asked)
	}
}

// TestCopiesOwedBackOff: a copy owed waits firstWait, then twice as long
// at each failure up to maxWait, and is given up after maxTries; one
// made is forgotten; owing again does not reset a wait.
func TestCopiesOwedBackOff(t *testing.T) {
	c := &clock{now: time.Unix(1000, 0)}
	p := testRepairer(nil, Deps{Now: c.Now})
	due := func() []string {
		var out []string
		p.mu.Lock()
		defer p.mu.Unlock()
		for tn, r := range p.tries {
			if !c.Now().Before(r.next) {
				out = append(out, tn)
			}
		}
		slices.Sort(out)
		return out
	}
	p.Later("t1")
	p.owe("t2")
	if got := due(); !slices.Equal(got, []string{"t2"}) {
		t.Fatalf("due at once: %v, want [t2]", got)
	}
	p.owe("t1") // owed already: its wait stands
	if got := due(); !slices.Equal(got, []string{"t2"}) {
		t.Fatalf("owed twice: due %v, want [t2]", got)
	}
	c.add(firstWait)
	if got := due(); !slices.Equal(got, []string{"t1", "t2"}) {
		t.Fatalf("after firstWait: due %v, want [t1 t2]", got)
	}
	p.tried("t2", nil)
	fail := errors.New("no node answers")
	var waits []time.Duration
	for range maxTries {
		p.tried("t1", fail)
		p.mu.Lock()
		if r := p.tries["t1"]; r != nil {
			waits = append(waits, r.next.Sub(c.Now()))
		}
		p.mu.Unlock()
	}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, maxWait, maxWait}
	if !slices.Equal(waits, want) {
		t.Errorf("waits %v, want %v", waits, want)
	}
	p.mu.Lock()
	left := len(p.tries)
	p.mu.Unlock()
	if left != 0 {
		t.Errorf("%d copies still owed, want none (t2 made, t1 given up)", left)
	}
	p.tried("t3", fail) // never owed: nothing to note
	if got := due(); len(got) != 0 {
		t.Errorf("a tenant never owed is owed: %v", got)
	}
}

// TestOweFromDirectory: once a term, a copy is owed to each tenant
// without one whose node has a standby, or every one under --replicas;
// nothing while not leading.
func TestOweFromDirectory(t *testing.T) {
	ctx := context.Background()
	tenants := map[string]global.Tenant{
		"t1": {Node: "a", State: global.StateActive},
		"t2": {Node: "b", State: global.StateActive},
		"t3": {Node: "a", Replica: "s", State: global.StateActive},
	}
	owed := func(p *Repairer) []string {
		p.mu.Lock()
		defer p.mu.Unlock()
		var out []string
		for tn := range p.tries {
			out = append(out, tn)
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		name     string
		replicas bool
		leading  bool
		want     []string
	}{
		{"standby's node", false, true, []string{"t1"}},
		{"--replicas", true, true, []string{"t1", "t2"}},
		{"not leading", true, false, nil},
	} {
		s := dirStore(t, map[string]string{"a": "eu", "b": "eu", "s": "eu*"}, tenants, map[string]string{"a": "s"})
		l := &fakeLead{}
		l.leading.Store(tc.leading)
		l.term.Store(3)
		p := testRepairer(s, Deps{Lead: l, Replicas: tc.replicas})
		list, _, err := s.ListTenants(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p.oweFromDirectory(ctx, s, list)
		if got := owed(p); !slices.Equal(got, tc.want) {
			t.Errorf("%s: owed %v, want %v", tc.name, got, tc.want)
		}
		if !tc.leading {
			continue
		}
		p.mu.Lock()
		clear(p.tries)
		p.mu.Unlock()
		p.oweFromDirectory(ctx, s, list) // the same term: read once
		if got := owed(p); len(got) != 0 {
			t.Errorf("%s: owed again in the same term: %v", tc.name, got)
		}
		l.term.Store(4)
		p.oweFromDirectory(ctx, s, list)
		if got := owed(p); !slices.Equal(got, tc.want) {
			t.Errorf("%s: at the next term owed %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestLoopOwnedAndStopped: the loop asks the lead every round, ends at
// Close (safe twice, and before Start) or when its context ends, and
// leaves no goroutine behind.
func TestLoopOwnedAndStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		New(Deps{}).Close() // never started

		l := &fakeLead{}
		p := New(Deps{Lead: l})
		p.Start(context.Background())
		time.Sleep(3*every + every/2)
		if got := l.asked.Load(); got != 3 {
			t.Errorf("lead asked %d times in 3.5 rounds, want 3", got)
		}
		p.Close()
		p.Close()
		time.Sleep(3 * every)
		if got := l.asked.Load(); got != 3 {
			t.Errorf("lead asked %d times, want 3: the loop ran on after Close", got)
		}

		ctx, cancel := context.WithCancel(context.Background())
		l2 := &fakeLead{}
		p2 := New(Deps{Lead: l2})
		p2.Start(ctx)
		cancel()
		synctest.Wait() // the loop has returned: nothing of the bubble is left running
		time.Sleep(2 * every)
		if got := l2.asked.Load(); got != 0 {
			t.Errorf("lead asked %d times after its context ended, want 0", got)
		}
		p2.Close()
	})
}
