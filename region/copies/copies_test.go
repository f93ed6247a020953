package copies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/region/nodeapi"
	"github.com/fenec-go/fenec/wire"
)

var (
	errHeld     = errors.New("held")
	errNotOwned = errors.New("the region leases itself")
)

// fixture is Copies over an in-memory directory, with the router's side
// (Deps) recorded rather than done: what a test asked of it is in calls.
type fixture struct {
	s     *global.Store
	c     *Copies
	owned map[string]bool // regions leased by the global tier
	pick  string          // what PickReplica answers

	mu    sync.Mutex // guards calls
	calls []string
}

func (f *fixture) call(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

func (f *fixture) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// newFixture records nodes and tenants in a new in-memory directory; the
// regions eu and us are leased by the global tier, others not.
func newFixture(tb testing.TB, nodes map[string]global.Node, tenants map[string]global.Tenant) *fixture {
	tb.Helper()
	ctx := context.Background()
	f := &fixture{s: global.NewStore(global.NewMemory()), owned: map[string]bool{"eu": true, "us": true}}
	tx := f.s.Txn()
	for n, v := range nodes {
		if v.Addr == "" {
			v.Addr = "http://127.0.0.1:9"
		}
		v.Token = "tok"
		tx = tx.PutNode(n, 0, v)
	}
	for t, v := range tenants {
		if v.State == "" {
			v.State = global.StateActive
		}
		tx = tx.PutTenant(t, 0, v)
	}
	if _, err := tx.Commit(ctx); err != nil {
		tb.Fatal(err)
	}
	nc := nodeapi.New(2*time.Second, "")
	tb.Cleanup(nc.Close)
	f.c = New(Deps{
		Nodes: nc,
		Own: func(ctx context.Context, s *global.Store, region string) (*global.Store, error) {
			f.call("own %s", region)
			if !f.owned[region] {
				return nil, errNotOwned
			}
			return s, nil
		},
		Apart: func(ctx context.Context, s *global.Store, keep, target string) (global.Node, error) {
			n, err := s.GetNode(ctx, target)
			return n.Value, err
		},
		Fittest: func(ctx context.Context, cands map[string]global.Node) (string, error) {
			names := slices.Sorted(maps.Keys(cands))
			f.call("fittest %s", strings.Join(names, ","))
			return names[len(names)-1], nil
		},
		PickReplica: func(ctx context.Context, s *global.Store, t global.Tenant, spread bool) (string, error) {
			f.call("pick survive=%q spread=%v", t.Survive, spread)
			return f.pick, nil
		},
		AddReplica: func(ctx context.Context, s *global.Store, name, target string) error {
			f.call("add replica %s on %s", name, target)
			at, err := s.GetTenant(ctx, name)
			if err != nil {
				return err
			}
			_, err = s.UpdateTenant(ctx, name, at, func(t *global.Tenant) error { t.Replica = target; return nil })
			return err
		},
		RecordLineage: func(ctx context.Context, s *global.Store, name string) (global.Versioned[global.Tenant], error) {
			return s.GetTenant(ctx, name)
		},
		AwaitCopy: func(ctx context.Context, n global.Node, tenant string, lineage uint64) error { return nil },
		RemoveStale: func(ctx context.Context, s *global.Store, tenant, stale string, keep ...string) error {
			f.call("remove %s on %s keeping %s", tenant, stale, strings.Join(keep, ","))
			return nil
		},
		Settle:        func(ctx context.Context, rev int64) {},
		UnknownNode:   func(err error) error { return fmt.Errorf("unknown node: %w", err) },
		UnknownTenant: func(err error) error { return fmt.Errorf("unknown tenant: %w", err) },
		Held:          func(tenant, by string) error { return fmt.Errorf("%w: %s by %s", errHeld, tenant, by) },
	})
	return f
}

func (f *fixture) tenant(tb testing.TB, name string) global.Tenant {
	tb.Helper()
	at, err := f.s.GetTenant(context.Background(), name)
	if err != nil {
		tb.Fatal(err)
	}
	return at.Value
}

// world: eu (the tenants' home, leased by the global tier), us (leased by
// it too) and ap (leasing itself).
func world() map[string]global.Node {
	return map[string]global.Node{
		"eu1": {Region: "eu", Lease: true},
		"eu2": {Region: "eu", Lease: true},
		"us1": {Region: "us", Lease: true},
		"us2": {Region: "us", Lease: true},
		"us3": {Region: "us", Lease: true, Standby: true},
		"ap1": {Region: "ap", Lease: true},
	}
}

func TestReadCandidates(t *testing.T) {
	nodes := map[string]global.Versioned[global.Node]{}
	for n, v := range map[string]global.Node{
		"us1": {Region: "us", Lease: true},
		"us2": {Region: "us"}, // takes no leases
		"us3": {Region: "us", Lease: true, Standby: true},
		"us4": {Region: "us", Lease: true, Lapsed: time.Unix(1, 0)},
		"us5": {Region: "us", Lease: true, Sealed: "x"}, // unusable here
		"us6": {Region: "us", Lease: true},              // the tenant's voting copy
		"us7": {Region: "us", Lease: true},              // a move's target
		"us8": {Region: "us", Lease: true},
		"eu1": {Region: "eu", Lease: true},
	} {
		nodes[n] = global.Versioned[global.Node]{Value: v}
	}
	got := slices.Sorted(maps.Keys(readCandidates(global.Tenant{Node: "eu1", Replica: "us6", Target: "us7"}, "us", nodes)))
	if want := []string{"us1", "us8"}; !slices.Equal(got, want) {
		t.Errorf("candidates %v, want %v", got, want)
	}
}

// TestByRegion: the copy a region holds already is kept without measuring;
// a region the global tier does not lease, or with no node that can take
// one, is refused; else the fittest of the region's candidates.
func TestByRegion(t *testing.T) {
	nodes := world()
	nodes["as1"] = global.Node{Region: "as", Lease: true, Standby: true}
	f := newFixture(t, nodes, map[string]global.Tenant{"t": {Node: "eu1", Replica: "eu2", ReadCopies: global.MakeNodeList("us1")}})
	f.owned["as"] = true
	ctx := context.Background()
	all, _, err := f.s.ListNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tn := f.tenant(t, "t")
	got, err := f.c.ByRegion(ctx, f.s, "t", tn, []string{"us"}, all)
	if err != nil || !slices.Equal(got, []string{"us1"}) {
		t.Errorf("us, holding a copy on us1: %v, %v", got, err)
	}
	if c := f.called(); len(c) != 0 {
		t.Errorf("the copy kept asked %v", c)
	}
	if _, err := f.c.ByRegion(ctx, f.s, "t", tn, []string{"us", "ap"}, all); !errors.Is(err, ErrReadCopy) || !errors.Is(err, errNotOwned) {
		t.Errorf("ap, leasing itself: %v", err)
	}
	if _, err := f.c.ByRegion(ctx, f.s, "t", tn, []string{"as"}, all); !errors.Is(err, ErrReadCopy) || !strings.Contains(err.Error(), "region as has no node that can hold a read copy of t") {
		t.Errorf("as, a standby only: %v", err)
	}
	tn.ReadCopies = ""
	f.calls = nil
	got, err = f.c.ByRegion(ctx, f.s, "t", tn, []string{"us"}, all)
	if err != nil || !slices.Equal(got, []string{"us2"}) {
		t.Errorf("us, no copy there: %v, %v", got, err)
	}
	if c := f.called(); !slices.Contains(c, "fittest us1,us2") {
		t.Errorf("measured %v, want us1 and us2 (not the standby us3)", c)
	}
}

// TestSetDropsBeforeDeleting: a read copy no longer wanted leaves the
// record, then its file is deleted keeping the primary and its copy.
func TestSetDropsBeforeDeleting(t *testing.T) {
	f := newFixture(t, world(), map[string]global.Tenant{"t": {Node: "eu1", Replica: "eu2", ReadCopies: global.MakeNodeList("us1", "us2")}})
	ctx := context.Background()
	at, err := f.s.GetTenant(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	ans, err := f.c.Set(ctx, f.s, "t", at, []string{"us1"})
	if err != nil {
		t.Fatal(err)
	}
	want := ReadCopies{Tenant: "t", Node: "eu1", ReadCopies: []string{"us1"}, Added: []string{}, Dropped: []string{"us2"}}
	if fmt.Sprint(ans) != fmt.Sprint(want) {
		t.Errorf("answer %+v, want %+v", ans, want)
	}
	if rc := f.tenant(t, "t").ReadCopies; rc != "us1" {
		t.Errorf("recorded read copies %q", rc)
	}
	if c := f.called(); !slices.Equal(c, []string{"remove t on us2 keeping eu1,eu2"}) {
		t.Errorf("calls %v", c)
	}
	at, _ = f.s.GetTenant(ctx, "t")
	ans, err = f.c.Set(ctx, f.s, "t", at, nil)
	if err != nil || ans.ReadCopies == nil || len(ans.ReadCopies) != 0 {
		t.Errorf("all dropped: %+v, %v (read_copies must be [], not null)", ans, err)
	}
}

// TestAddRefuses: a read copy is refused on a node holding the tenant, a
// standby, a node of its own region or of a region the global tier does
// not lease, and for a held tenant; nothing is recorded.
func TestAddRefuses(t *testing.T) {
	f := newFixture(t, world(), map[string]global.Tenant{
		"t":    {Node: "eu1", Replica: "eu2"},
		"held": {Node: "eu1", HeldBy: "move"},
	})
	ctx := context.Background()
	for _, c := range []struct {
		tenant, target string
		want           error
		says           string
	}{
		{"t", "eu1", ErrReadCopy, "holds tenant t already"},
		{"t", "eu2", ErrReadCopy, "holds tenant t already"},
		{"t", "us3", ErrReadCopy, "is a standby"},
		{"t", "ap1", ErrReadCopy, `node ap1's region "ap" is not leased by the global tier`},
		{"held", "us1", errHeld, "held by move"},
		{"t", "zz9", global.ErrNotFound, "unknown node"},
	} {
		err := f.c.add(ctx, f.s, c.tenant, c.target)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("read copy of %s on %s: %v; want %v saying %q", c.tenant, c.target, err, c.want, c.says)
		}
	}
	nodes := world()
	nodes["eu3"] = global.Node{Region: "eu", Lease: true}
	g := newFixture(t, nodes, map[string]global.Tenant{"t": {Node: "eu1"}})
	if err := g.c.add(ctx, g.s, "t", "eu3"); !errors.Is(err, ErrReadCopy) || !strings.Contains(err.Error(), `own region "eu"`) {
		t.Errorf("read copy in the tenant's own region: %v", err)
	}
	if rc := f.tenant(t, "t").ReadCopies; rc != "" {
		t.Errorf("recorded %q", rc)
	}
}

// TestSetSurvive: to region, the copy named goes to a node of another
// region leased by the global tier, then the record says so; back to
// zone, the record first, then the copy comes home where the router
// places it. Each wrong copy is refused with nothing changed.
func TestSetSurvive(t *testing.T) {
	f := newFixture(t, world(), map[string]global.Tenant{
		"t":    {Node: "eu1", Replica: "eu2", ReadCopies: global.MakeNodeList("us2")},
		"held": {Node: "eu1", HeldBy: "quota"},
	})
	ctx := context.Background()
	for _, c := range []struct {
		tenant, copy string
		want         error
		says         string
	}{
		{"t", "eu1", ErrSurvive, "is the tenant's primary"},
		{"t", "eu2", ErrSurvive, `own region "eu"`},
		{"t", "us2", ErrSurvive, "holds the tenant's read copy"},
		{"t", "ap1", ErrSurvive, `region "ap" is not leased`},
		{"held", "us1", errHeld, "held by quota"},
		{"none", "us1", global.ErrNotFound, "unknown tenant"},
	} {
		_, err := f.c.SetSurvive(ctx, f.s, c.tenant, global.SurviveRegion, c.copy)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("survive region, %s's copy on %s: %v; want %v saying %q", c.tenant, c.copy, err, c.want, c.says)
		}
	}
	if _, err := f.c.SetSurvive(ctx, f.s, "t", global.SurviveRegion, ""); !errors.Is(err, ErrSurvive) || !strings.Contains(err.Error(), "no node of another region") {
		t.Errorf("survive region, none to pick: %v", err)
	}
	if tn := f.tenant(t, "t"); tn.Survive != "" || tn.Replica != "eu2" {
		t.Fatalf("refusals changed the record: %+v", tn)
	}

	f.calls = nil
	ans, err := f.c.SetSurvive(ctx, f.s, "t", global.SurviveRegion, "us1")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Survival{Tenant: "t", Survive: "region", Node: "eu1", Replica: "us1"}); ans != want {
		t.Errorf("answer %+v, want %+v", ans, want)
	}
	if tn := f.tenant(t, "t"); tn.Survive != global.SurviveRegion || tn.Replica != "us1" {
		t.Errorf("recorded %+v", tn)
	}
	if c := f.called(); !slices.Contains(c, "add replica t on us1") {
		t.Errorf("calls %v", c)
	}

	f.calls, f.pick = nil, "eu2"
	ans, err = f.c.SetSurvive(ctx, f.s, "t", global.SurviveZone, "")
	if err != nil {
		t.Fatal(err)
	}
	if tn := f.tenant(t, "t"); tn.Survive != "" || tn.Replica != "eu2" || ans.Replica != "us1" {
		t.Errorf("back to zone: recorded %+v, answered %+v (the copy as the record said before it came home)", tn, ans)
	}
	if c := f.called(); !slices.Equal(c, []string{`pick survive="" spread=true`, "add replica t on eu2"}) {
		t.Errorf("calls %v", c)
	}
}

// TestRegionCandidates: nodes of other regions leased by the global tier,
// neither standbys nor holding the tenant's read copies; each region's
// lease asked once.
func TestRegionCandidates(t *testing.T) {
	f := newFixture(t, world(), nil)
	ctx := context.Background()
	nodes, _, err := f.s.ListNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tn := global.Tenant{Node: "eu1", ReadCopies: global.MakeNodeList("us2")}
	got := f.c.RegionCandidates(ctx, f.s, tn, nodes["eu1"].Value, nodes)
	if want := map[string]int{"us1": 0}; !maps.Equal(got, want) {
		t.Errorf("candidates %v, want %v", got, want)
	}
	if c := f.called(); len(c) != 2 || !slices.Contains(c, "own us") || !slices.Contains(c, "own ap") {
		t.Errorf("owners asked %v, want us and ap once each", c)
	}
}

// TestRefuseRegionalLeasing: a region holding tenants set to survive it,
// or their copies, is not handed to its own leasing; the refusal names
// them, sorted and counted.
func TestRefuseRegionalLeasing(t *testing.T) {
	f := newFixture(t, world(), map[string]global.Tenant{
		"b":    {Node: "eu1", Replica: "us1", Survive: global.SurviveRegion},
		"a":    {Node: "us1", Replica: "eu2", Survive: global.SurviveRegion},
		"zone": {Node: "eu1", Replica: "eu2"},
		"far":  {Node: "us1", Replica: "us2", Survive: global.SurviveRegion},
	})
	ctx := context.Background()
	err := RefuseRegionalLeasing(ctx, f.s, "eu")
	if !errors.Is(err, ErrSurvive) || !strings.Contains(err.Error(), "region eu holds 2 tenants (a, b) set to survive") {
		t.Errorf("eu: %v", err)
	}
	if err := RefuseRegionalLeasing(ctx, f.s, "ap"); err != nil {
		t.Errorf("ap: %v", err)
	}
}

// copyNode is a node's admin API holding read copies: it answers each
// tenant's replication as st says, and records the follows it is told.
type copyNode struct {
	srv *httptest.Server

	mu      sync.Mutex // guards st, follows, asked
	st      map[string]wire.Replication
	follows []wire.Follow
	asked   int
}

func startCopyNode(tb testing.TB) *copyNode {
	tb.Helper()
	n := &copyNode{st: map[string]wire.Replication{}}
	n.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.mu.Lock()
		defer n.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/replication"):
			n.asked++
			_ = json.NewEncoder(w).Encode(n.st[strings.Split(r.URL.Path, "/")[3]])
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/follow"):
			var f wire.Follow
			_ = json.NewDecoder(r.Body).Decode(&f)
			n.follows = append(n.follows, f)
			_, _ = w.Write([]byte(`{}`))
		default:
			http.NotFound(w, r)
		}
	}))
	tb.Cleanup(n.srv.Close)
	return n
}

// TestPoint: a read copy following an old primary is told to follow the
// new one, once; one answering as a primary is left alone; one that
// follows already is only noted; what the directory no longer names is
// forgotten.
func TestPoint(t *testing.T) {
	cn := startCopyNode(t)
	nodes := world()
	for n, addr := range map[string]string{"us1": cn.srv.URL, "us2": cn.srv.URL, "eu1": "http://eu1:7071", "eu2": "http://eu2:7071"} {
		v := nodes[n]
		v.Addr = addr
		nodes[n] = v
	}
	tenants := map[string]global.Tenant{
		"moved": {Node: "eu2", ReadCopies: global.MakeNodeList("us1")},
		"rogue": {Node: "eu1", ReadCopies: global.MakeNodeList("us1")},
		"fine":  {Node: "eu1", ReadCopies: global.MakeNodeList("us2")},
		"held":  {Node: "eu1", ReadCopies: global.MakeNodeList("us2"), HeldBy: "move"},
	}
	f := newFixture(t, nodes, tenants)
	ctx := context.Background()
	eu1, eu2 := wire.BaseURL(nodes["eu1"].Addr), wire.BaseURL(nodes["eu2"].Addr)
	cn.st["moved"] = wire.Replication{Role: "replica", CopyRole: wire.RoleRead, From: "http://old:1"}
	cn.st["rogue"] = wire.Replication{Role: "primary"}
	cn.st["fine"] = wire.Replication{Role: "replica", CopyRole: wire.RoleRead, From: eu1}
	ns, _, _ := f.s.ListNodes(ctx)
	ts, _, _ := f.s.ListTenants(ctx)

	f.c.Point(ctx, ts, ns)
	cn.mu.Lock()
	follows, asked := slices.Clone(cn.follows), cn.asked
	cn.mu.Unlock()
	if len(follows) != 1 || follows[0].From != eu2 || follows[0].As != "us1" || follows[0].Role != wire.RoleRead {
		t.Errorf("follows told %+v; want moved's copy on us1 to follow eu2 as a read copy", follows)
	}
	if asked != 3 {
		t.Errorf("replication asked %d times, want 3 (not the held tenant's)", asked)
	}
	if want := map[string]string{"moved/us1": eu2, "fine/us2": eu1}; !maps.Equal(f.c.seen, want) {
		t.Errorf("seen %v, want %v", f.c.seen, want)
	}

	f.c.Point(ctx, ts, ns)
	cn.mu.Lock()
	follows, asked = slices.Clone(cn.follows), cn.asked
	cn.mu.Unlock()
	if len(follows) != 1 || asked != 4 {
		t.Errorf("a second round: %d follows, %d asks; want 1 and 4 (only the rogue asked again)", len(follows), asked)
	}

	delete(ts, "moved")
	f.c.Point(ctx, ts, ns)
	if _, ok := f.c.seen["moved/us1"]; ok {
		t.Errorf("a tenant gone is remembered: %v", f.c.seen)
	}
}
