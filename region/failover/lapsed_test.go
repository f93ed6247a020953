package failover

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/region/forward"
)

// viewOf is a view of the nodes given, built through an in-memory
// directory.
func viewOf(t *testing.T, nodes map[string]global.Node) *global.View {
	t.Helper()
	mem := global.NewMemory()
	t.Cleanup(func() { mem.Close() })
	tx := global.NewStore(mem).Txn()
	for name, n := range nodes {
		tx.PutNode(name, 0, n)
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

// A tenant of a lapsed node is answered 503 at once, its reason and words
// by what it survives, whether its region is lost and whether it has read
// copies; one whose node has not lapsed, or that a failover holds, is not.
func TestUnavailable(t *testing.T) {
	since := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	up := global.Node{Addr: "http://e2", Region: "eu"}
	lapsed := global.Node{Addr: "http://e1", Region: "eu", Lapsed: since}
	for _, tc := range []struct {
		name    string
		nodes   map[string]global.Node
		tenant  global.Tenant
		node    global.Node
		nilWant bool
		reason  string
		has     []string
		hasNot  []string
	}{
		{name: "node up", nodes: map[string]global.Node{"e1": up}, tenant: global.Tenant{Node: "e1"}, node: up, nilWant: true},
		{name: "held by a failover", nodes: map[string]global.Node{"e1": lapsed},
			tenant: global.Tenant{Node: "e1", HeldBy: global.HoldFailover}, node: lapsed, nilWant: true},
		{name: "zone tenant, region not lost", nodes: map[string]global.Node{"e1": lapsed, "e2": up},
			tenant: global.Tenant{Node: "e1"}, node: lapsed, reason: forward.UnavailableZone,
			has:    []string{"tenant t is unavailable", "node e1 of region eu", "2026-03-01T12:00:00Z", `survives its zone only`, "no read copy", "/survive"},
			hasNot: []string{"the region is lost"}},
		{name: "zone tenant, region lost, with a copy", nodes: map[string]global.Node{"e1": lapsed, "e2": {Addr: "http://e2", Region: "eu", Lapsed: since}},
			tenant: global.Tenant{Node: "e1", Replica: "e2"}, node: lapsed, reason: forward.UnavailableZone,
			has: []string{"every node of region eu has lapsed: the region is lost", "its copy on e2 could not be promoted"}},
		{name: "region tenant not failed over", nodes: map[string]global.Node{"e1": lapsed},
			tenant: global.Tenant{Node: "e1", Replica: "u1", Survive: global.SurviveRegion}, node: lapsed, reason: forward.UnavailableNotFailedOver,
			has:    []string{"failover to its copy on u1 did not complete", "POST /_shard/nodes/e1/failover"},
			hasNot: []string{"/survive"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Unavailable(viewOf(t, tc.nodes), "t", tc.tenant, tc.node)
			if tc.nilWant {
				if got != nil {
					t.Fatalf("got %+v, want none", got)
				}
				return
			}
			if got == nil {
				t.Fatal("got none, want the tenant unavailable")
			}
			if got.Reason != tc.reason || got.Tenant != "t" || got.Node != "e1" || got.Region != "eu" || !got.Since.Equal(since) {
				t.Fatalf("got %+v, want reason %s, tenant t on e1 of eu since %v", got, tc.reason, since)
			}
			for _, s := range tc.has {
				if !strings.Contains(got.Msg, s) {
					t.Errorf("message lacks %q: %s", s, got.Msg)
				}
			}
			for _, s := range tc.hasNot {
				if strings.Contains(got.Msg, s) {
					t.Errorf("message holds %q: %s", s, got.Msg)
				}
			}
		})
	}
}
