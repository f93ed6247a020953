package leasing

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/lease"
)

// viewOf is a view of the records given, built through an in-memory
// directory.
func viewOf(t *testing.T, regions []global.Region, nodes map[string]string) *global.View {
	t.Helper()
	mem := global.NewMemory()
	t.Cleanup(func() { mem.Close() })
	s := global.NewStore(mem)
	tx := s.Txn()
	for _, r := range regions {
		tx.PutRegion(0, r)
	}
	for name, region := range nodes {
		tx.PutNode(name, 0, global.Node{Addr: "http://" + name, Region: region, Lease: true})
	}
	if _, err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	v, _, err := global.LoadView(context.Background(), mem)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func scopeNodes(sc leaseScope) []string {
	var out []string
	for n := range sc.terms {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Which nodes each side leases, on what terms: the global tier every node
// of a region it leases (none of one given, being given, or leased by
// the region); a region's router its region's nodes while its
// region leases, with the handoff that gave it (forced: a node must run
// its lease before it is failed over, until settled).
func TestLeaseScopes(t *testing.T) {
	nodes := map[string]string{"e1": "eu", "e2": "eu", "u1": "us", "x1": "xx"}
	taken := global.Region{Name: "eu", Leaser: global.LeaserRegion, Epoch: 3,
		Handoff: &global.Handoff{From: global.LeaserGlobal, To: global.LeaserRegion, State: global.HandoffDone, Seq: 2, Term: 7, LeaseRecordMS: 5000}}
	forced := taken
	forced.Handoff = &global.Handoff{From: global.LeaserGlobal, To: global.LeaserRegion, State: global.HandoffDone, Seq: 3, Force: true, LeaseRecordMS: 4000}
	given := global.Region{Name: "eu", Leaser: global.LeaserGlobal, Epoch: 1,
		Handoff: &global.Handoff{From: global.LeaserGlobal, To: global.LeaserRegion, State: global.HandoffGiven, Seq: 1}}
	back := global.Region{Name: "us", Leaser: global.LeaserGlobal, Epoch: 2,
		Handoff: &global.Handoff{From: global.LeaserRegion, To: global.LeaserGlobal, State: global.HandoffDone, Seq: 2, Term: 4, LeaseRecordMS: 3000}}

	v := viewOf(t, []global.Region{taken, back}, nodes)
	g := globalScope(v, scopeState{giving: map[string]bool{}})
	if got := scopeNodes(g); !slices.Equal(got, []string{"u1", "x1"}) || !g.active {
		t.Fatalf("global tier leases %v (active %v), want u1, x1", got, g.active)
	}
	if nt := g.terms["u1"]; nt.Epoch != 2 || nt.Handoff == nil || *nt.Handoff != (lease.Handoff{From: "region:us", Term: 4}) || nt.Floor != 3*time.Second || nt.MustRun {
		t.Fatalf("u1's terms %+v", nt)
	}
	if nt := g.terms["x1"]; nt != (lease.NodeTerms{}) {
		t.Fatalf("x1 (a region with no record) terms %+v", nt)
	}
	g = globalScope(v, scopeState{giving: map[string]bool{"us": true}})
	if got := scopeNodes(g); !slices.Equal(got, []string{"x1"}) {
		t.Fatalf("global tier giving us leases %v, want x1", got)
	}
	e := regionScope(v, "eu", scopeState{}, 0)
	if got := scopeNodes(e); !slices.Equal(got, []string{"e1", "e2"}) || !e.active {
		t.Fatalf("eu leases %v", got)
	}
	if nt := e.terms["e1"]; nt.Epoch != 3 || *nt.Handoff != (lease.Handoff{From: "global", Term: 7}) || nt.MustRun {
		t.Fatalf("e1's terms %+v", nt)
	}
	if us := regionScope(v, "us", scopeState{}, 0); us.active || len(us.terms) != 0 {
		t.Fatalf("us's router, the global tier leasing us: %+v", us)
	}

	v = viewOf(t, []global.Region{forced}, nodes)
	e = regionScope(v, "eu", scopeState{}, 0)
	if nt := e.terms["e2"]; !nt.MustRun || !nt.Handoff.Force || nt.Floor != 4*time.Second {
		t.Fatalf("forced, unsettled: %+v", nt)
	}
	if nt := regionScope(v, "eu", scopeState{settledAt: time.Second}, 2*time.Second).terms["e2"]; nt.MustRun {
		t.Fatalf("forced, settled: %+v", nt)
	}
	if nt := regionScope(v, "eu", scopeState{settledAt: 3 * time.Second}, 2*time.Second).terms["e2"]; !nt.MustRun {
		t.Fatalf("forced, settling: %+v", nt)
	}

	v = viewOf(t, []global.Region{given}, nodes)
	if got := scopeNodes(globalScope(v, scopeState{})); slices.Contains(got, "e1") {
		t.Fatalf("the global tier leases a region it gave: %v", got)
	}
	if e := regionScope(v, "eu", scopeState{}, 0); e.active {
		t.Fatal("a region's router leases a region given and not yet taken")
	}
}
