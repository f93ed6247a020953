package region

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/region/lead"
)

func TestStandbyCP(t *testing.T) {
	a := startCPRouter(t, func(c *Config) { c.ID = "ra" })
	audit := filepath.Join(t.TempDir(), "audit.log")
	b := startCPRouter(t, func(c *Config) {
		c.ID, c.Standby, c.DirectoryURLs, c.Audit = "rb", true, a.rt.DirectoryURLs(), audit
	})
	n1 := startCPNode(t)
	a.addNode(t, "n1", n1)
	a.place(t, "sb", "n1")
	a.mustQuery(t, "sb", "create collection c (a int)")

	// The standby forwards from the same placements and answers reads.
	testkit.Eventually(t, cpWait, func() error {
		if st, _, body := b.query(t, "sb", "put c {a: 1}"); st != http.StatusOK {
			return fmt.Errorf("write through the standby: %d %s", st, body)
		}
		return nil
	})
	var list []tenantEntry
	if st, body := b.shard(t, http.MethodGet, "tenants", nil, &list); st != http.StatusOK || len(list) != 1 || list[0].Node != "n1" {
		t.Fatalf("standby's tenants: %d %s", st, body)
	}
	if st, _ := b.shard(t, http.MethodGet, "nodes", nil, nil); st != http.StatusOK {
		t.Fatalf("standby's nodes: %d", st)
	}
	// It refuses every change, naming the leader.
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{http.MethodPut, "tenants/x", map[string]any{}},
		{http.MethodDelete, "tenants/sb", nil},
		{http.MethodPost, "tenants/sb/move", map[string]any{"to": "n1"}},
		{http.MethodPut, "nodes/n2", map[string]any{"addr": n1.Addr(), "token": cpAdminToken}},
		{http.MethodDelete, "nodes/n1", nil},
	} {
		var ans map[string]any
		st, body := b.shard(t, c.method, c.path, c.body, &ans)
		if st != http.StatusConflict || ans["leader"] != "ra" {
			t.Fatalf("standby %s %s: %d %s", c.method, c.path, st, body)
		}
	}
	if b.rt.Leading() || !a.rt.Leading() {
		t.Fatalf("leading: a %v, b %v", a.rt.Leading(), b.rt.Leading())
	}
	raw, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(raw), `"status":409`); got != 5 || !strings.Contains(string(raw), `"what":"move"`) {
		t.Fatalf("the standby's refusals in its audit log (%d):\n%s", got, raw)
	}

	// The old leader's fenced store, as it was before the promotion.
	oldStore, err := a.rt.lead.Changes(cpCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	var prom struct {
		Leader string `json:"leader"`
		Term   uint64 `json:"term"`
	}
	if st, body := b.shard(t, http.MethodPost, "promote", nil, &prom); st != http.StatusOK || prom.Leader != "rb" || prom.Term != 2 {
		t.Fatalf("promote: %d %s", st, body)
	}
	// The old leader's writes fail on the fence, whatever its view says.
	at, err := oldStore.GetTenant(cpCtx(t), "sb")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := oldStore.Hold(cpCtx(t), "sb", at, "quota"); !errors.Is(err, global.ErrConflict) {
		t.Fatalf("old leader's fenced write: %v", err)
	}
	// And once its view shows the promotion it refuses changes 409.
	testkit.Eventually(t, cpWait, func() error {
		var ans map[string]any
		st, body := a.shard(t, http.MethodPut, "tenants/y", map[string]any{}, &ans)
		if st != http.StatusConflict || ans["leader"] != "rb" {
			return fmt.Errorf("old leader's change: %d %s", st, body)
		}
		return nil
	})
	if a.rt.Leading() || !b.rt.Leading() {
		t.Fatalf("after promote, leading: a %v, b %v", a.rt.Leading(), b.rt.Leading())
	}
	// The promoted router takes changes.
	if got := b.place(t, "z", ""); got != "n1" {
		t.Fatalf("placed on %s", got)
	}
	testkit.Eventually(t, cpWait, func() error {
		if st, _, body := a.query(t, "z", "get _health_probe"); st != http.StatusNotFound || strings.Contains(string(body), "unknown tenant") {
			return fmt.Errorf("old leader forwards the new tenant: %d %s", st, body)
		}
		return nil
	})
	// A promotion of the old leader moves the term on again.
	if st, body := a.shard(t, http.MethodPost, "promote", nil, &prom); st != http.StatusOK || prom.Leader != "ra" || prom.Term != 3 {
		t.Fatalf("promote back: %d %s", st, body)
	}
	testkit.Eventually(t, cpWait, func() error {
		if b.rt.Leading() {
			return errors.New("rb still leads")
		}
		return nil
	})
}

// gatedDirectory holds back every List until open is closed: a router
// whose directory has not arrived.
type gatedDirectory struct {
	global.Directory
	open chan struct{}
}

func (d *gatedDirectory) List(ctx context.Context, prefix string) ([]global.KV, int64, error) {
	select {
	case <-d.open:
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	return d.Directory.List(ctx, prefix)
}

func TestStandbyBeforeDirectoryCP(t *testing.T) {
	mem := global.NewMemory()
	t.Cleanup(func() { mem.Close() })
	gd := &gatedDirectory{Directory: mem, open: make(chan struct{})}
	r := startCPRouter(t, func(c *Config) { c.Standby, c.Directory = true, gd })

	st, h, body := r.data(t, http.MethodPost, "/t/acme/query", `{"query": "get c"}`, nil)
	if st != http.StatusServiceUnavailable || h.Get("Retry-After") == "" || h.Get("X-Request-Id") == "" {
		t.Fatalf("before the directory: %d %v %s", st, h, body)
	}
	if _, _, body := cpDo(t, http.MethodGet, r.url+"/_health", "", nil, nil); !strings.Contains(string(body), `"ready":false`) {
		t.Fatalf("health before the directory: %s", body)
	}
	if st, body := r.shard(t, http.MethodGet, "tenants", nil, nil); st != http.StatusServiceUnavailable {
		t.Fatalf("shard read before the directory: %d %s", st, body)
	}
	close(gd.open)
	testkit.Eventually(t, cpWait, func() error {
		if st, _, body := r.data(t, http.MethodPost, "/t/acme/query", `{"query": "get c"}`, nil); st != http.StatusNotFound {
			return fmt.Errorf("after the directory: %d %s", st, body)
		}
		return nil
	})
}

func TestFailoverCutsOnEveryRouterCP(t *testing.T) {
	a := startCPRouter(t, func(c *Config) { c.ID = "ra" })
	b := startCPRouter(t, func(c *Config) {
		c.ID, c.Standby, c.DirectoryURLs = "rb", true, a.rt.DirectoryURLs()
	})
	n1, n2 := startCPNode(t), startCPNode(t)
	a.addNode(t, "n1", n1)
	a.addNode(t, "n2", n2)
	a.place(t, "fo", "n1")
	a.place(t, "calm", "n1")
	for _, tn := range []string{"fo", "calm"} {
		a.mustQuery(t, tn, "create collection c (a int)")
	}
	// The promoted copy on n2 (a failover's work; here made by hand).
	if st, body := n2.admin(t, http.MethodPut, "/_admin/tenants/fo", nil); st != http.StatusCreated {
		t.Fatalf("copy: %d %s", st, body)
	}
	cpDo(t, http.MethodPost, n2.URL()+"/t/fo/query", "", []byte(`{"query": "create collection c (a int)"}`), nil)

	testkit.Eventually(t, cpWait, func() error {
		if st, _, _ := b.query(t, "fo", "get c"); st != http.StatusOK {
			return fmt.Errorf("standby not forwarding yet: %d", st)
		}
		return nil
	})
	_, evA := a.openStream(t, "/t/fo/c/changes")
	_, evB := b.openStream(t, "/t/fo/c/changes")
	_, evCalm := a.openStream(t, "/t/calm/c/changes")
	for _, ch := range []<-chan sseEvent{evA, evB, evCalm} {
		if ev, _ := nextEvent(t, ch); ev.name != "seed" {
			t.Fatalf("first event %+v", ev)
		}
	}

	s, err := a.rt.lead.Changes(cpCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	at, err := s.GetTenant(cpCtx(t), "fo")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Failover(cpCtx(t), "fo", at, "n2", 7); err != nil {
		t.Fatal(err)
	}
	// Both routers end the subscription to the failed-over node's tenant.
	for name, ch := range map[string]<-chan sseEvent{"leader": evA, "standby": evB} {
		for {
			if _, ok := nextEvent(t, ch); !ok {
				break
			}
		}
		t.Logf("%s: stream ended", name)
	}
	for _, r := range []*cpRouter{a, b} {
		if got := metricValue(t, r, `fenec_router_cut_requests_total{outcome="stream_ended"}`); got != 1 {
			t.Fatalf("%s cut %v streams", r.rt.ID(), got)
		}
	}
	// What was out for the tenant the failover left on n1 is untouched.
	a.mustQuery(t, "calm", "put c {a: 1}")
	if ev, ok := nextEvent(t, evCalm); !ok || ev.name != "change" {
		t.Fatalf("calm stream: %+v %v", ev, ok)
	}
	// Requests go to the new primary.
	a.mustQuery(t, "fo", "put c {a: 2}")
	if got := len(nodeIDsColl(t, n2, "fo", "c")); got != 1 {
		t.Fatalf("new primary holds %d", got)
	}
	// A move cuts nothing.
	if st, body := a.shard(t, http.MethodPost, "tenants/calm/move", map[string]any{"to": "n2"}, nil); st != http.StatusOK {
		t.Fatalf("move: %d %s", st, body)
	}
	if got := metricValue(t, a, `fenec_router_cut_requests_total{outcome="stream_ended"}`); got != 1 {
		t.Fatalf("a move cut something: %v", got)
	}
}

// nodeIDsColl reads the ids of collection coll of tenant t on a node.
func nodeIDsColl(tb testing.TB, n *cpNode, t, coll string) []int64 {
	tb.Helper()
	st, _, b := cpDo(tb, http.MethodGet, n.URL()+"/t/"+t+"/"+coll+"?select=id&limit=10000", "", nil, nil)
	if st != http.StatusOK {
		tb.Fatalf("read %s/%s on node: %d %s", t, coll, st, b)
	}
	var rows []struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal(b, &rows); err != nil {
		tb.Fatalf("rows %q: %v", b, err)
	}
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	return ids
}

func TestClaimRaceOneLeaderCP(t *testing.T) {
	m := cpMember(t)
	for round := range 3 {
		prefix := fmt.Sprintf("/race%d/", round)
		routers := make([]*Router, 4)
		errs := make([]error, len(routers))
		var wg sync.WaitGroup
		for i := range routers {
			cfg := DefaultConfig()
			cfg.Listen, cfg.Token, cfg.Logger = "127.0.0.1:0", cpRouterToken, testkit.Logger()
			cfg.ID, cfg.DirectoryURLs, cfg.Prefix = fmt.Sprintf("r%d", i), m.ClientURLs(), prefix
			rt, err := NewRouter(cfg)
			if err != nil {
				t.Fatal(err)
			}
			routers[i] = rt
			t.Cleanup(func() { _ = rt.Close() })
			wg.Go(func() { errs[i] = rt.Start(context.Background()) })
		}
		wg.Wait()
		leaders := 0
		for i, rt := range routers {
			if errs[i] != nil {
				t.Fatalf("router %d: %v", i, errs[i])
			}
			if rt.Leading() {
				leaders++
			}
		}
		if leaders != 1 {
			t.Fatalf("round %d: %d routers lead", round, leaders)
		}
	}
}

// interleaving runs a hook once, just before the first read of key.
type interleaving struct {
	global.Directory
	key  string
	once sync.Once
	hook func()
}

func (d *interleaving) Get(ctx context.Context, key string) (global.KV, error) {
	if key == d.key {
		d.once.Do(d.hook)
	}
	return d.Directory.Get(ctx, key)
}

// TestClaimLosesToAClaimBetweenItsReadsCP plays the interleaving where
// another router claims the lead after this one read no leader and before
// it read the term: this one must not lead.
func TestClaimLosesToAClaimBetweenItsReadsCP(t *testing.T) {
	mem := global.NewMemory()
	t.Cleanup(func() { mem.Close() })
	other := lead.New(lead.Deps{ID: "ra", Store: global.NewStore(mem), Log: testkit.Logger()})
	d := &interleaving{Directory: mem, key: global.KeyTerm, hook: func() {
		if ok, err := other.Claim(cpCtx(t)); !ok || err != nil {
			t.Errorf("the other claim: %v %v", ok, err)
		}
	}}
	l := lead.New(lead.Deps{ID: "rb", Store: global.NewStore(d), Log: testkit.Logger()})
	ok, err := l.Claim(cpCtx(t))
	if err != nil || ok {
		t.Fatalf("claim between reads: leads %v, err %v", ok, err)
	}
	rec, err := global.NewStore(mem).Leader(cpCtx(t))
	if err != nil || rec.Value.Router != "ra" || rec.Value.Term != 1 {
		t.Fatalf("leader %+v %v", rec.Value, err)
	}
	// The router that led claims again when it restarts, at a new term:
	// its nodes take its first grants as newer than the lease they hold.
	again := lead.New(lead.Deps{ID: "ra", Store: global.NewStore(mem), View: func() *global.View { return nil }, Log: testkit.Logger()})
	ok, err = again.Claim(cpCtx(t))
	if _, term := again.Status(); !ok || err != nil || term != 2 {
		t.Fatalf("restarted leader: %v %v term %d, want 2", ok, err, term)
	}
}
