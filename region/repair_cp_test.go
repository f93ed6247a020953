package region

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/node"
	"github.com/fenec-go/fenec/wire"
)

// startCopyingNode is a cpNode that follows primaries (its copies take
// their images over the replication feed) under --sync always.
func startCopyingNode(tb testing.TB) *cpNode {
	tb.Helper()
	return startCPNodeWith(tb, func(c *node.Config) { c.Sync = "always" })
}

// replicationOf reads tenant t's role and position on n: the status and,
// on 200, the answer.
func (n *cpNode) replicationOf(tb testing.TB, t string) (int, wire.Replication) {
	tb.Helper()
	var st wire.Replication
	code, b := n.admin(tb, http.MethodGet, "/_admin/tenants/"+t+"/replication", nil)
	if code == http.StatusOK {
		if err := json.Unmarshal(b, &st); err != nil {
			tb.Fatalf("replication of %s: %v", t, err)
		}
	}
	return code, st
}

// copyCaughtUp says why the copy of t on n does not hold what the primary
// on p holds (nil when it does).
func copyCaughtUp(tb testing.TB, t string, p, n *cpNode) error {
	tb.Helper()
	_, want := p.replicationOf(tb, t)
	code, got := n.replicationOf(tb, t)
	if code != http.StatusOK || got.Role != "replica" || got.Seq != want.Seq || got.History != want.History {
		return fmt.Errorf("copy of %s: %d %+v, primary at %+v", t, code, got, want)
	}
	return nil
}

// postLater sends a POST to the router on a goroutine the test owns and
// hands its status on (0: no answer, the router went away).
func postLater(tb testing.TB, r *cpRouter, path string, body any) <-chan int {
	tb.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan int, 1)
	done := make(chan struct{})
	tb.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url+"/_shard/"+path, bytes.NewReader(b))
		if err != nil {
			out <- 0
			return
		}
		req.Header.Set("Authorization", "Bearer "+cpRouterToken)
		res, err := cpClient.Do(req)
		if err != nil {
			out <- 0
			return
		}
		res.Body.Close()
		out <- res.StatusCode
	}()
	return out
}

// auditHas waits until the audit log at path holds a line with every one
// of want.
func auditHas(tb testing.TB, path string, want ...string) {
	tb.Helper()
	testkit.Eventually(tb, cpWait, func() error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for line := range bytes.SplitSeq(b, []byte("\n")) {
			all := true
			for _, w := range want {
				all = all && bytes.Contains(line, []byte(w))
			}
			if all {
				return nil
			}
		}
		return fmt.Errorf("no audit line with %q in:\n%s", want, b)
	})
}

// A router stopped right after a move's flip, before the source's file
// went, leaves it frozen on the source; started again, its repair deletes
// it, logged and audited. Files that only look like it are kept: one of
// another lineage frozen, one of the tenant's lineage not frozen.
func TestSourceLeftFrozenCollectedCP(t *testing.T) {
	m := cpMember(t)
	auditPath := filepath.Join(t.TempDir(), "audit.log")
	onMember := func(c *Config) { c.DirectoryURLs = m.ClientURLs(); c.ID = "r1"; c.Audit = auditPath }
	n1, n2 := startCPNode(t), startCPNode(t)
	first := startCPRouter(t, onMember)
	first.addNode(t, "n1", n1)
	first.addNode(t, "n2", n2)
	for _, name := range []string{"moved", "a-other", "b-thawed"} {
		first.place(t, name, "n1")
		first.mustQuery(t, name, "create collection docs (title text)")
		first.mustQuery(t, name, "put docs [{title: 'a'}, {title: 'b'}]")
	}
	// a-other moves to n2; n1 then holds a file of that name of another
	// lineage, frozen.
	if st, b := first.shard(t, http.MethodPost, "tenants/a-other/move", map[string]any{"to": "n2"}, nil); st != http.StatusOK {
		t.Fatalf("move a-other: %d %s", st, b)
	}
	testkit.Eventually(t, cpWait, func() error {
		if code, _ := n1.replicationOf(t, "a-other"); code != http.StatusNotFound {
			return fmt.Errorf("a-other's source still on n1: %d", code)
		}
		return nil
	})
	if st, b := n1.admin(t, http.MethodPut, "/_admin/tenants/a-other", nil); st != http.StatusCreated {
		t.Fatalf("another a-other: %d %s", st, b)
	}
	if st, b := n1.admin(t, http.MethodPost, "/_admin/tenants/a-other/freeze", nil); st != http.StatusOK {
		t.Fatalf("freeze: %d %s", st, b)
	}
	// b-thawed moves to n2, and its image goes back to n1 by hand: the
	// same lineage, not frozen.
	if st, b := first.shard(t, http.MethodPost, "tenants/b-thawed/move", map[string]any{"to": "n2"}, nil); st != http.StatusOK {
		t.Fatalf("move b-thawed: %d %s", st, b)
	}
	testkit.Eventually(t, cpWait, func() error {
		if code, _ := n1.replicationOf(t, "b-thawed"); code != http.StatusNotFound {
			return fmt.Errorf("b-thawed's source still on n1: %d", code)
		}
		return nil
	})
	st, _, img := cpDo(t, http.MethodGet, n2.URL()+"/_admin/tenants/b-thawed/file", cpAdminToken, nil, nil)
	if st != http.StatusOK {
		t.Fatalf("b-thawed's image: %d", st)
	}
	if st, _, b := cpDo(t, http.MethodPut, n1.URL()+"/_admin/tenants/b-thawed/file", cpAdminToken, img, nil); st != http.StatusCreated {
		t.Fatalf("b-thawed's image back on n1: %d %s", st, b)
	}

	// moved: the router stops as it deletes the source, after the flip.
	hold := make(chan struct{})
	n1.holdDelete.Store(&hold)
	if st, b := first.shard(t, http.MethodPost, "tenants/moved/move", map[string]any{"to": "n2"}, nil); st != http.StatusOK {
		t.Fatalf("move: %d %s", st, b)
	}
	select {
	case <-n1.deleting:
	case <-cpCtx(t).Done():
		t.Fatal("the source's deletion never came")
	}
	if err := first.rt.Close(); err != nil {
		t.Fatal(err)
	}
	n1.holdDelete.Store(nil)
	close(hold)
	if code, st := n1.replicationOf(t, "moved"); code != http.StatusOK || !st.Frozen {
		t.Fatalf("the source after its router stopped: %d %+v", code, st)
	}

	r := startCPRouter(t, onMember)
	testkit.Eventually(t, cpWait, func() error {
		if code, st := n1.replicationOf(t, "moved"); code != http.StatusNotFound {
			return fmt.Errorf("the source left frozen is still on n1: %d %+v", code, st)
		}
		return nil
	})
	auditHas(t, auditPath, `"what":"collect source"`, `"tenant":"moved"`, `"node":"n1"`, `"outcome":"ok"`)
	if st, _, b := r.query(t, "moved", "get docs count"); st != http.StatusOK || !bytes.Contains(b, []byte(`"count":2`)) {
		t.Fatalf("the moved tenant through the router: %d %s", st, b)
	}
	// The same look passed over the files that only look like one (the
	// node lists its files by name: a-other, b-thawed, moved).
	if code, st := n1.replicationOf(t, "a-other"); code != http.StatusOK || !st.Frozen {
		t.Fatalf("a frozen file of another lineage: %d %+v", code, st)
	}
	if code, st := n1.replicationOf(t, "b-thawed"); code != http.StatusOK || st.Frozen {
		t.Fatalf("a file of the tenant's lineage, not frozen: %d %+v", code, st)
	}
}

// A move onto the node holding the tenant's copy, refused by that node as
// it installs, is put back: the directory names no copy that the move
// replaced, and the repair makes the copy again.
func TestMoveOntoCopyPutBackCP(t *testing.T) {
	r := startCPRouter(t, func(c *Config) { c.Replicas = true })
	a, b := startCopyingNode(t), startCopyingNode(t)
	r.addNode(t, "a", a)
	r.addNode(t, "b", b)
	r.place(t, "m", "a")
	r.mustQuery(t, "m", "create collection c (n int)")
	r.mustQuery(t, "m", "put c {n: 1}")
	if e := r.tenantsOf(t)["m"]; e.Replica != "b" {
		t.Fatalf("before the move %+v", e)
	}
	testkit.Eventually(t, cpWait, func() error { return copyCaughtUp(t, "m", a, b) })
	b.refuseInstall.Store(true)
	if st, body := r.shard(t, http.MethodPost, "tenants/m/move", map[string]any{"to": "b"}, nil); st == http.StatusOK {
		t.Fatalf("move onto a node refusing installs: %d %s", st, body)
	}
	if e := r.tenantsOf(t)["m"]; e.Node != "a" || e.Replica == "b" {
		t.Fatalf("put back, the tenant names the copy the move replaced: %+v", e)
	}
	b.refuseInstall.Store(false) // it takes the tenant's image again: the copy is made there
	r.mustQuery(t, "m", "put c {n: 2}")
	testkit.Eventually(t, cpWait, func() error {
		if e := r.tenantsOf(t)["m"]; e.Node != "a" || e.Replica != "b" {
			return fmt.Errorf("record %+v", e)
		}
		return copyCaughtUp(t, "m", a, b)
	})
}

// A router stopped after the flip of a move onto the copy's node, as it
// makes the tenant's new copy, owed a copy it kept nowhere but the
// directory: started again, its repair makes it.
func TestCopyOwedByStoppedRouterCP(t *testing.T) {
	m := cpMember(t)
	onMember := func(c *Config) { c.DirectoryURLs = m.ClientURLs(); c.ID = "r1"; c.Replicas = true }
	nodes := map[string]*cpNode{"a": startCopyingNode(t), "b": startCopyingNode(t), "c": startCopyingNode(t)}
	first := startCPRouter(t, onMember)
	for _, name := range []string{"a", "b", "c"} {
		first.addNode(t, name, nodes[name])
	}
	first.place(t, "m", "a")
	first.mustQuery(t, "m", "create collection c (n int)")
	first.mustQuery(t, "m", "put c {n: 1}")
	to := first.tenantsOf(t)["m"].Replica
	if to != "b" && to != "c" {
		t.Fatalf("copy of m on %q", to)
	}
	testkit.Eventually(t, cpWait, func() error { return copyCaughtUp(t, "m", nodes["a"], nodes[to]) })
	hold := make(chan struct{})
	for name, n := range nodes {
		if name != to {
			n.holdCreate.Store(&hold)
		}
	}
	moved := postLater(t, first, "tenants/m/move", map[string]any{"to": to})
	var made string
	select {
	case made = <-nodes["a"].creating:
	case made = <-nodes[map[string]string{"b": "c", "c": "b"}[to]].creating:
	case <-cpCtx(t).Done():
		t.Fatal("the move made no new copy")
	}
	if err := first.rt.Close(); err != nil {
		t.Fatal(err)
	}
	<-moved
	for _, n := range nodes {
		n.holdCreate.Store(nil)
	}
	close(hold)
	dir, err := m.Open(cpCtx(t), global.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dir.Close() })
	at, err := global.NewStore(dir).GetTenant(cpCtx(t), "m")
	if err != nil || at.Value.Node != to || at.Value.Replica != "" {
		t.Fatalf("after the flip, stopped as it made %s: %+v, %v", made, at.Value, err)
	}

	r := startCPRouter(t, onMember)
	r.mustQuery(t, "m", "put c {n: 2}")
	testkit.Eventually(t, cpWait, func() error {
		e := r.tenantsOf(t)["m"]
		if e.Node != to || e.Replica == "" || e.Replica == to {
			return fmt.Errorf("record %+v", e)
		}
		return copyCaughtUp(t, "m", nodes[to], nodes[e.Replica])
	})
}

// A copy whose file is damaged on disk (a bit flipped while its node was
// down) is dropped and a new copy made by the repair, audited: the tenant
// keeps its copy, which holds every write.
func TestDamagedCopyReplacedCP(t *testing.T) {
	auditPath := filepath.Join(t.TempDir(), "audit.log")
	r := startCPRouter(t, func(c *Config) { c.Replicas = true; c.Audit = auditPath })
	a, b := startReplNode(t), startReplNode(t)
	r.addReplNode(t, "a", a, nil)
	r.addReplNode(t, "b", b, nil)
	r.place(t, "d", "a")
	r.mustQuery(t, "d", "create collection c (n int, s text)")
	for i := range 20 {
		r.mustQuery(t, "d", fmt.Sprintf("put c {n: %d, s: 'some text to make the file longer than its header %d'}", i, i))
	}
	if e := r.tenantsOf(t)["d"]; e.Replica != "b" {
		t.Fatalf("copy %+v", e)
	}
	caughtUp(t, "d", a, b)
	b.down(t)
	path := filepath.Join(b.Config().Dir, "d.fenec")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 0x08
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	b.up(t)
	if code, body := b.call(t, http.MethodGet, "/_admin/tenants/d/replication", ""); code < 500 || !bytes.Contains(body, []byte(`"damaged":true`)) {
		t.Fatalf("the damaged copy's replication: %d %s", code, body)
	}
	r.mustQuery(t, "d", "put c {n: 100, s: 'after the damage'}")
	testkit.Eventually(t, cpWait, func() error {
		if e := r.tenantsOf(t)["d"]; e.Node != "a" || e.Replica != "b" {
			return fmt.Errorf("record %+v", e)
		}
		want, got := a.replication(t, "d"), b.replication(t, "d")
		if got.Role != "replica" || got.Seq != want.Seq || got.History != want.History {
			return fmt.Errorf("copy at %+v, primary at %+v", got, want)
		}
		return nil
	})
	auditHas(t, auditPath, `"what":"drop damaged copy"`, `"tenant":"d"`, `"node":"b"`, `"outcome":"ok"`)
	if rows := r.countVia(t, "d"); rows != `{"count":21}` {
		t.Fatalf("rows through the router: %s", rows)
	}
}
