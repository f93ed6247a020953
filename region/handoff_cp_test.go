package region

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/testkit"
)

// twoTiers is a global tier's leading router and region eu's leading
// router linked to it, both leasing for testLease, and two --lease nodes
// of eu recorded at the global tier, b a's standby, leased by it.
type twoTiers struct {
	g, e *cpRouter
	a, b *leaseNode
}

func startTwoTiers(t *testing.T) *twoTiers {
	t.Helper()
	g := startCPRouter(t, func(c *Config) { c.ID = "g"; c.AutoFailover = testLease })
	e := startCPRouter(t, func(c *Config) {
		c.ID, c.Region, c.GlobalURLs, c.AutoFailover = "eu-1", "eu", g.rt.DirectoryURLs(), testLease
		c.Audit = filepath.Join(t.TempDir(), "audit.jsonl")
	})
	a, b := startLeaseNode(t, true), startLeaseNode(t, true)
	g.addLeaseNode(t, "a", a, nil)
	g.addLeaseNode(t, "b", b, nil)
	if st, body := g.shard(t, http.MethodPut, "nodes/a", map[string]any{"standby": "b"}, nil); st != http.StatusCreated {
		t.Fatalf("standby: %d %s", st, body)
	}
	g.waitLeased(t, "a")
	g.waitLeased(t, "b")
	return &twoTiers{g: g, e: e, a: a, b: b}
}

// region reads region r as router rt lists it (the zero entry, named r,
// when it lists no such region yet).
func (r *cpRouter) region(tb testing.TB, name string) regionEntry {
	tb.Helper()
	var list []regionEntry
	if st, b := r.shard(tb, http.MethodGet, "regions", nil, &list); st != http.StatusOK {
		tb.Fatalf("regions: %d %s", st, b)
	}
	for _, e := range list {
		if e.Name == name {
			return e
		}
	}
	return regionEntry{Name: name}
}

// handoff asks r for region eu's handoff to side and wants status.
func (r *cpRouter) handoff(tb testing.TB, to string, force bool, want int) handoffAnswer {
	tb.Helper()
	var ans handoffAnswer
	st, b := r.shard(tb, http.MethodPost, "regions/eu/handoff", map[string]any{"to": to, "force": force}, nil)
	if st != want {
		tb.Fatalf("handoff to %s (force %v) on %s: %d %s, want %d", to, force, r.rt.id, st, b, want)
	}
	if st == http.StatusOK {
		if err := jsonUnmarshal(b, &ans); err != nil {
			tb.Fatal(err)
		}
	}
	return ans
}

// A planned handoff global → region → global, asked on either router:
// the nodes bind to the region's directory and back at a higher epoch
// each time, the giver leases none of them meanwhile, changes are taken
// where the region is owned and refused 409 on the other side naming
// where to send them, what the region placed is in the global directory
// when it hands back, and the tenants write throughout.
func TestHandoffBothWaysCP(t *testing.T) {
	tt := startTwoTiers(t)
	g, e := tt.g, tt.e
	g.place(t, "t1", "a")
	g.mustQuery(t, "t1", "create collection c (n int)")
	testkit.Eventually(t, cpWait, func() error {
		if st, _, b := e.query(t, "t1", "put c {n: 1}"); st != http.StatusOK {
			return fmt.Errorf("write through the region before the handoff: %d %s", st, b)
		}
		return nil
	})
	if st, b := e.shard(t, http.MethodPut, "tenants/x", map[string]any{"node": "a"}, nil); st != http.StatusConflict || !strings.Contains(string(b), "global tier") {
		t.Fatalf("a change on the region's router while the global tier leases: %d %s", st, b)
	}

	ans := e.handoff(t, global.LeaserRegion, false, http.StatusOK)
	if ans.Leaser != global.LeaserRegion || ans.Epoch != 1 || ans.State != global.HandoffDone {
		t.Fatalf("handed to the region: %+v", ans)
	}
	e.waitLeased(t, "a")
	e.waitLeased(t, "b")
	for _, n := range []*leaseNode{tt.a, tt.b} {
		if st := n.leaseStatus(t); st.Dir != "region:eu" || st.Epoch != 1 {
			t.Fatalf("a node after the handoff: %+v", st)
		}
	}
	testkit.Eventually(t, cpWait, func() error {
		if l := g.leases(t); len(l.Nodes) != 0 {
			return fmt.Errorf("the global tier still leases %+v", l.Nodes)
		}
		return nil
	})
	testkit.Eventually(t, cpWait, func() error {
		if r := g.region(t, "eu"); r.Leaser != global.LeaserRegion || r.Epoch != 1 || r.Router != "eu-1" || r.Term == 0 || r.LeaseRecordMS != testLease.Milliseconds() {
			return fmt.Errorf("the global tier's regions after the handoff: %+v", r)
		}
		return nil
	})
	if st, b := g.shard(t, http.MethodPut, "tenants/t1/quota", map[string]any{"rows": 10}, nil); st != http.StatusConflict || !strings.Contains(string(b), "eu-1") {
		t.Fatalf("a change for the region's tenant at the global tier: %d %s", st, b)
	}
	if st, b := g.shard(t, http.MethodPut, "tenants/y", map[string]any{"node": "b"}, nil); st != http.StatusConflict {
		t.Fatalf("a placement in the region at the global tier: %d %s", st, b)
	}
	// A move out of a region that leases its own nodes is refused, saying
	// why and what to do.
	c := startLeaseNode(t, true)
	body := map[string]any{"addr": c.Addr(), "token": cpAdminToken, "region": "us"}
	if st, b := g.shard(t, http.MethodPut, "nodes/c", body, nil); st != http.StatusCreated {
		t.Fatalf("record c in us: %d %s", st, b)
	}
	if st, b := g.shard(t, http.MethodPost, "tenants/t1/move", map[string]any{"to": "c"}, nil); st != http.StatusConflict || !strings.Contains(string(b), "eu-1") {
		t.Fatalf("a move from a region that leases itself, at the global tier: %d %s", st, b)
	}
	e.place(t, "t2", "b")
	e.mustQuery(t, "t2", "create collection c (n int)")
	e.mustQuery(t, "t1", "put c {n: 2}")
	testkit.Eventually(t, cpWait, func() error {
		if _, ok := g.tenantsOf(t)["t2"]; !ok {
			return fmt.Errorf("the region's placement is not in the global directory")
		}
		return nil
	})
	g.mustQuery(t, "t2", "put c {n: 3}")

	ans = g.handoff(t, global.LeaserGlobal, false, http.StatusOK)
	if ans.Leaser != global.LeaserGlobal || ans.Epoch != 2 {
		t.Fatalf("handed back: %+v", ans)
	}
	g.waitLeased(t, "a")
	g.waitLeased(t, "b")
	for _, n := range []*leaseNode{tt.a, tt.b} {
		if st := n.leaseStatus(t); st.Dir != "global" || st.Epoch != 2 {
			t.Fatalf("a node after the handoff back: %+v", st)
		}
	}
	testkit.Eventually(t, cpWait, func() error {
		if l := e.leases(t); l.Leasing {
			return fmt.Errorf("the region still leases: %+v", l)
		}
		return nil
	})
	g.mustQuery(t, "t2", "put c {n: 4}")
	testkit.Eventually(t, cpWait, func() error {
		if st, _, b := e.query(t, "t2", "put c {n: 5}"); st != http.StatusOK {
			return fmt.Errorf("write through the region after the handoff back: %d %s", st, b)
		}
		return nil
	})
	testkit.Eventually(t, cpWait, func() error {
		// The region's router learns the handoff is done as its link reads
		// the global directory: a moment after the global tier's answer.
		if st, b := e.shard(t, http.MethodPut, "tenants/z", map[string]any{"node": "a"}, nil); st != http.StatusConflict {
			return fmt.Errorf("a change on the region's router after the handoff back: %d %s", st, b)
		}
		return nil
	})
	testkit.Eventually(t, cpWait, func() error {
		if r := e.region(t, "eu"); r.Leaser != global.LeaserGlobal || r.Epoch != 2 || r.Router != "g" {
			return fmt.Errorf("the region's regions after the handoff back: %+v", r)
		}
		return nil
	})
}

// A handoff the taker cannot take (the region's router leases nothing)
// is refused saying why, and one offered to the side that leases already
// too; a forced takeover is the region's own.
func TestHandoffRefusalsCP(t *testing.T) {
	g := startCPRouter(t, func(c *Config) { c.ID = "g"; c.AutoFailover = testLease })
	e := startCPRouter(t, func(c *Config) { c.ID, c.Region, c.GlobalURLs = "eu-1", "eu", g.rt.DirectoryURLs() })
	a := startLeaseNode(t, true)
	g.addLeaseNode(t, "a", a, nil)
	g.waitLeased(t, "a")
	if st, b := e.shard(t, http.MethodPost, "regions/eu/handoff", map[string]any{"to": "region"}, nil); st != http.StatusBadRequest || !strings.Contains(string(b), "--auto-failover") {
		t.Fatalf("to a region router without --auto-failover: %d %s", st, b)
	}
	if st, b := g.shard(t, http.MethodPost, "regions/eu/handoff", map[string]any{"to": "region"}, nil); st != http.StatusConflict || !strings.Contains(string(b), "--auto-failover") {
		t.Fatalf("offered at the global tier to a region router without --auto-failover: %d %s", st, b)
	}
	if st, b := g.shard(t, http.MethodPost, "regions/eu/handoff", map[string]any{"to": "global"}, nil); st != http.StatusConflict {
		t.Fatalf("to the side that leases: %d %s", st, b)
	}
	if st, b := g.shard(t, http.MethodPost, "regions/eu/handoff", map[string]any{"to": "region", "force": true}, nil); st != http.StatusConflict || !strings.Contains(string(b), "region eu's leading router") {
		t.Fatalf("forced at the global tier: %d %s", st, b)
	}
	if st, b := e.shard(t, http.MethodPost, "regions/us/handoff", map[string]any{"to": "region"}, nil); st != http.StatusConflict {
		t.Fatalf("another region's handoff on a region's router: %d %s", st, b)
	}
	if st, b := g.shard(t, http.MethodPost, "regions/eu/handoff", map[string]any{"to": "elsewhere"}, nil); st != http.StatusBadRequest {
		t.Fatalf("to nowhere: %d %s", st, b)
	}
	// Nothing changed hands: the global tier still leases a.
	g.waitLeased(t, "a")
	if st := a.leaseStatus(t); st.Dir != "global" || st.Epoch != 0 {
		t.Fatalf("a after the refusals: %+v", st)
	}
}

// An offer to a region whose leading router is not running (no router of
// eu links the global tier) is taken back by the global tier once it has
// waited offerWait: the route answers 409 saying what to start, the
// record shows it rolled back, and the global tier never stopped leasing
// the region's node. Before, the offer stayed in offered for good, to be
// taken by the first router of eu started later, whenever that was.
func TestHandoffOfferNoOneTakesRolledBackCP(t *testing.T) {
	defer func(w time.Duration) { offerWait = w }(offerWait)
	offerWait = 500 * time.Millisecond
	g := startCPRouter(t, func(c *Config) { c.ID = "g"; c.AutoFailover = testLease })
	a := startLeaseNode(t, true)
	g.addLeaseNode(t, "a", a, nil)
	g.waitLeased(t, "a")
	st, b := g.shard(t, http.MethodPost, "regions/eu/handoff", map[string]any{"to": "region"}, nil)
	if st != http.StatusConflict || !strings.Contains(string(b), "--region eu --global") {
		t.Fatalf("offered to a region no router leads: %d %s, want 409 naming what to start", st, b)
	}
	rec := g.region(t, "eu")
	if rec.Leaser != global.LeaserGlobal || rec.Handoff == nil || rec.Handoff.State != global.HandoffRolledBack {
		t.Fatalf("the region record after the offer: %+v", rec)
	}
	g.waitLeased(t, "a")
	if st := a.leaseStatus(t); st.Dir != "global" || st.Epoch != 0 {
		t.Fatalf("a after the offer: %+v", st)
	}
}

// The global tier gone (its router and directory stopped), region eu's
// router forces the takeover: the nodes it reaches take its grants at
// epoch two and bind to its directory; a node it cannot reach is failed
// over by no one automatically, however long it stays silent, and by an
// operator with force; the tenant writes again on its copy. Forcing is
// refused while the global directory answered within forceGuard, unless
// the operator says even_if_global_answers; the audit log names the
// region, force, the epoch and the nodes fenced.
func TestForcedTakeoverCP(t *testing.T) {
	tt := startTwoTiers(t)
	g, e := tt.g, tt.e
	g.place(t, "t1", "a")
	g.mustQuery(t, "t1", "create collection c (n int)")
	testkit.Eventually(t, cpWait, func() error {
		if _, ok := e.tenantsOf(t)["t1"]; !ok {
			return fmt.Errorf("t1 not in the region's copy")
		}
		return nil
	})
	tt.a.cut.Store(true) // a's grants hang, from both tiers
	if err := g.rt.Close(); err != nil {
		t.Fatal(err)
	}
	if st, b := e.shard(t, http.MethodPost, "regions/eu/handoff", map[string]any{"to": "region"}, nil); st != http.StatusServiceUnavailable || !strings.Contains(string(b), "force") {
		t.Fatalf("a planned handoff with the global tier gone: %d %s", st, b)
	}
	// The global directory answered the link moments ago: forcing is
	// refused, naming the planned handoff and the field that forces anyway.
	st, b := e.shard(t, http.MethodPost, "regions/eu/handoff", map[string]any{"to": "region", "force": true}, nil)
	if st != http.StatusConflict || !strings.Contains(string(b), "use a planned handoff") || !strings.Contains(string(b), "even_if_global_answers") {
		t.Fatalf("forced while the global directory answered within %v: %d %s", forceGuard, st, b)
	}
	if rec := e.region(t, "eu"); rec.Leaser == global.LeaserRegion {
		t.Fatalf("a refused forced takeover changed the record: %+v", rec)
	}
	var ans handoffAnswer
	st, b = e.shard(t, http.MethodPost, "regions/eu/handoff", map[string]any{"to": "region", "force": true, "even_if_global_answers": true}, nil)
	if st != http.StatusOK || jsonUnmarshal(b, &ans) != nil || ans.Leaser != global.LeaserRegion || ans.Epoch != 2 || ans.Handoff == nil || !ans.Handoff.Force {
		t.Fatalf("forced: %d %s", st, b)
	}
	e.waitLeased(t, "b")
	if st := tt.b.leaseStatus(t); st.Dir != "region:eu" || st.Epoch != 2 {
		t.Fatalf("b after the forced takeover: %+v", st)
	}
	time.Sleep(4 * testLease) // past the lease and a tenth many times over
	if e := e.tenantsOf(t)["t1"]; e.Node != "a" {
		t.Fatalf("a node the region never reached was failed over on its own: %+v", e)
	}
	var res FailoverResult
	if st, b := e.shard(t, http.MethodPost, "nodes/a/failover", map[string]any{"force": true}, &res); st != http.StatusOK || len(res.Promoted) != 1 {
		t.Fatalf("failover by hand: %d %s", st, b)
	}
	e.mustQuery(t, "t1", "put c {n: 1}")
	raw, err := os.ReadFile(e.rt.cfg.Audit)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"what":"handoff"`) || !strings.Contains(string(raw), `"what":"failover"`) {
		t.Fatalf("the forced takeover and the forced failover are not in the audit log:\n%s", raw)
	}
	if !strings.Contains(string(raw), `"what":"forced_takeover"`) || !strings.Contains(string(raw), "region eu force true epoch 2 even_if_global_answers true") ||
		!strings.Contains(string(raw), "nodes fenced: a,b") || !strings.Contains(string(raw), `"what":"region_record"`) {
		t.Fatalf("the forced takeover's audit line does not name the region, force, the epoch and the nodes:\n%s", raw)
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// The handoff route refuses what is not a handoff, each refusal saying
// what to do: no token or a wrong one (401), another method (405), a body
// that is not one (400), a region nobody knows (404), a standby (409
// naming the leader). A client that hangs up as soon as it asked does not
// stop the handoff: its states are in the directory, and it is done.
func TestHandoffHostileCP(t *testing.T) {
	tt := startTwoTiers(t)
	g, e := tt.g, tt.e
	sb := startCPRouter(t, func(c *Config) {
		c.ID, c.Standby, c.DirectoryURLs, c.AutoFailover = "g2", true, g.rt.DirectoryURLs(), testLease
	})
	url := g.url + "/_shard/regions/eu/handoff"
	body := []byte(`{"to": "region"}`)
	for _, token := range []string{"", "wrong"} {
		if st, h, b := cpDo(t, http.MethodPost, url, token, body, nil); st != http.StatusUnauthorized || h.Get("WWW-Authenticate") == "" || !strings.Contains(string(b), "error") {
			t.Fatalf("token %q: %d %s", token, st, b)
		}
	}
	if st, _, b := cpDo(t, http.MethodGet, url, cpRouterToken, nil, nil); st != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d %s", st, b)
	}
	for _, bad := range []string{`{"to": "region"`, `{"to": "region", "later": true}`, `[1]`, `{"to": 7}`, `{}`,
		`{"to": "region", "even_if_global_answers": true}`, `{"to": "region", "force": true, "even_if_global_answers": "yes"}`} {
		if st, _, b := cpDo(t, http.MethodPost, url, cpRouterToken, []byte(bad), nil); st != http.StatusBadRequest || !strings.Contains(string(b), "error") {
			t.Fatalf("body %s: %d %s", bad, st, b)
		}
	}
	if st, _, b := cpDo(t, http.MethodPost, g.url+"/_shard/regions/nowhere/handoff", cpRouterToken, body, nil); st != http.StatusNotFound {
		t.Fatalf("unknown region: %d %s", st, b)
	}
	if st, _, b := cpDo(t, http.MethodPost, g.url+"/_shard/regions/NOT%20A%20NAME/handoff", cpRouterToken, body, nil); st != http.StatusBadRequest {
		t.Fatalf("bad region name: %d %s", st, b)
	}
	var ans map[string]any
	if st, b := sb.shard(t, http.MethodPost, "regions/eu/handoff", map[string]any{"to": "region"}, &ans); st != http.StatusConflict || ans["leader"] != "g" {
		t.Fatalf("on a standby: %d %s", st, b)
	}
	// Asked, and hung up on as soon as the offer is in the directory.
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+cpRouterToken)
	asked := make(chan struct{})
	go func() {
		defer close(asked)
		if resp, err := cpClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	testkit.Eventually(t, cpWait, func() error {
		if h := g.region(t, "eu").Handoff; h == nil {
			return fmt.Errorf("no handoff offered yet")
		}
		return nil
	})
	cancel()
	<-asked
	testkit.Eventually(t, cpWait, func() error {
		if r := e.region(t, "eu"); r.Leaser != global.LeaserRegion {
			return fmt.Errorf("eu after a handoff asked and hung up on: %+v", r)
		}
		return nil
	})
	e.waitLeased(t, "a")
}
