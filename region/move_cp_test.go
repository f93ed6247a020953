package region

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/testkit"
)

// cpWriter inserts documents through the router until stopped, asking
// again after a 503 (a frozen tenant), and keeps what was acknowledged. A
// stop lets the write in flight finish, so every write that landed was
// answered.
type cpWriter struct {
	r        *cpRouter
	tenant   string
	stopping atomic.Bool
	wg       sync.WaitGroup

	mu    sync.Mutex
	ids   []int64  // guarded by mu: acknowledged ids, in order
	seqs  []uint64 // guarded by mu: Fenec-Seq of each acknowledged write
	other []string // guarded by mu: answers neither 201 nor 503
}

func startCPWriter(tb testing.TB, r *cpRouter, tenant string) *cpWriter {
	w := &cpWriter{r: r, tenant: tenant}
	w.wg.Go(w.run)
	tb.Cleanup(w.stop)
	return w
}

func (w *cpWriter) stop() {
	w.stopping.Store(true)
	w.wg.Wait()
}

func (w *cpWriter) run() {
	ctx, cancel := context.WithTimeout(context.Background(), cpWait)
	defer cancel()
	for i := 0; !w.stopping.Load() && ctx.Err() == nil; i++ {
		f := float64(i%97) / 97
		body := fmt.Sprintf(`{"title": "w%d", "v": [%g, %g, 0.5, 0.25]}`, i, f, 1-f)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, w.r.url+"/t/"+w.tenant+"/docs", strings.NewReader(body))
		resp, err := cpClient.Do(req)
		if err != nil {
			w.mu.Lock()
			w.other = append(w.other, err.Error())
			w.mu.Unlock()
			continue
		}
		var ans struct {
			IDs []int64 `json:"ids"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&ans)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusCreated:
			seq, _ := strconv.ParseUint(resp.Header.Get("Fenec-Seq"), 10, 64)
			w.mu.Lock()
			w.ids = append(w.ids, ans.IDs...)
			w.seqs = append(w.seqs, seq)
			w.mu.Unlock()
		case http.StatusServiceUnavailable:
			// Frozen for the move: asked again after Retry-After's worth
			// of a pause, shortened for the test.
			time.Sleep(5 * time.Millisecond)
		default:
			w.mu.Lock()
			w.other = append(w.other, resp.Status)
			w.mu.Unlock()
		}
	}
}

func (w *cpWriter) acked() ([]int64, []uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.ids), slices.Clone(w.seqs)
}

// nodeIDs reads every id of tenant t's docs straight from a node.
func nodeIDs(tb testing.TB, n *cpNode, t string) map[int64]bool {
	tb.Helper()
	st, _, b := cpDo(tb, http.MethodGet, n.URL()+"/t/"+t+"/docs?select=id&limit=10000", "", nil, nil)
	if st != http.StatusOK {
		tb.Fatalf("read %s on node: %d %s", t, st, b)
	}
	var rows []struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal(b, &rows); err != nil {
		tb.Fatal(err)
	}
	out := map[int64]bool{}
	for _, r := range rows {
		out[r.ID] = true
	}
	return out
}

func TestMoveUnderWritesCP(t *testing.T) {
	r := startCPRouter(t, nil)
	n1, n2 := startCPNode(t), startCPNode(t)
	r.addNode(t, "n1", n1)
	r.addNode(t, "n2", n2)
	r.place(t, "mv", "n1")
	r.mustQuery(t, "mv", "create collection docs (title text @text, v vector<4> @hnsw(l2))")

	_, events := r.openStream(t, "/t/mv/docs/changes")
	if ev, _ := nextEvent(t, events); ev.name != "seed" {
		t.Fatalf("first event %+v", ev)
	}
	w := startCPWriter(t, r, "mv")
	testkit.Eventually(t, cpWait, func() error {
		if ids, _ := w.acked(); len(ids) < 20 {
			return fmt.Errorf("%d writes acknowledged", len(ids))
		}
		return nil
	})
	var ans moveAnswer
	st, b := r.shard(t, http.MethodPost, "tenants/mv/move", map[string]any{"to": "n2"}, &ans)
	if st != http.StatusOK {
		t.Fatalf("move: %d %s", st, b)
	}
	if ans.Tenant != "mv" || ans.From != "n1" || ans.To != "n2" || ans.Bytes <= 0 {
		t.Fatalf("move answer %s", b)
	}
	before, _ := w.acked()
	testkit.Eventually(t, cpWait, func() error {
		if ids, _ := w.acked(); len(ids) < len(before)+20 {
			return fmt.Errorf("%d writes after the move", len(ids)-len(before))
		}
		return nil
	})
	w.stop()
	ids, seqs := w.acked()
	if len(w.other) > 0 {
		t.Fatalf("writes answered neither 201 nor 503: %v", w.other)
	}

	// Every acknowledged write is on the target; the source has no file.
	onTarget := nodeIDs(t, n2, "mv")
	for _, id := range ids {
		if !onTarget[id] {
			t.Fatalf("acknowledged id %d missing on the target", id)
		}
	}
	if len(onTarget) != len(ids) {
		t.Fatalf("target holds %d docs, %d acknowledged", len(onTarget), len(ids))
	}
	// The source goes once the grace after the answer has passed.
	testkit.Eventually(t, cpWait, func() error {
		if _, b := n1.admin(t, http.MethodGet, "/_admin/tenants", nil); strings.Contains(string(b), "mv") {
			return fmt.Errorf("source still has the tenant: %s", b)
		}
		return nil
	})
	// Ids and seq continue across the move: each one above the last.
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("id %d after %d", ids[i], ids[i-1])
		}
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Fatalf("seq %d after %d", seqs[i], seqs[i-1])
		}
	}
	// The graph travelled: a near query answers on the target.
	b = r.mustQuery(t, "mv", "get docs select id near v [0.5, 0.5, 0.5, 0.25] limit 3")
	var near []map[string]any
	if err := json.Unmarshal(b, &near); err != nil || len(near) != 3 {
		t.Fatalf("near on the target: %s", b)
	}

	// The subscription on the source ends when its file goes; resumed
	// with since through the router, it continues on the target with no
	// seed, and between the two every acknowledged write was seen.
	seen := map[int64]bool{}
	var last string
	collect := func(ev sseEvent) {
		var ch struct {
			Puts []struct {
				ID int64 `json:"id"`
			} `json:"puts"`
		}
		if err := json.Unmarshal([]byte(ev.data), &ch); err != nil {
			t.Fatalf("change %q: %v", ev.data, err)
		}
		for _, p := range ch.Puts {
			seen[p.ID] = true
		}
		last = ev.id
	}
	for {
		ev, ok := nextEvent(t, events)
		if !ok || ev.name == "error" {
			break
		}
		if ev.name != "change" {
			t.Fatalf("event %+v on the first stream", ev)
		}
		collect(ev)
	}
	if last == "" {
		t.Fatal("no change seen before the move")
	}
	_, resumed := r.openStream(t, "/t/mv/docs/changes?since="+last)
	testkit.Eventually(t, cpWait, func() error {
		for len(seen) < len(ids) {
			select {
			case ev, ok := <-resumed:
				if !ok {
					return fmt.Errorf("resumed stream ended")
				}
				if ev.name != "change" {
					t.Fatalf("resumed stream sent %+v (want changes only, no seed)", ev)
				}
				collect(ev)
			default:
				return fmt.Errorf("%d of %d writes seen", len(seen), len(ids))
			}
		}
		return nil
	})
	for _, id := range ids {
		if !seen[id] {
			t.Fatalf("subscriber never saw id %d", id)
		}
	}
	if got := metricValue(t, r, `fenec_router_moves_total{outcome="done"}`); got != 1 {
		t.Fatalf("moves done %v", got)
	}
	var list []tenantEntry
	r.shard(t, http.MethodGet, "tenants", nil, &list)
	if len(list) != 1 || list[0].Node != "n2" || list[0].State != "active" || list[0].HeldBy != "" {
		t.Fatalf("placement after move %+v", list)
	}
}

// metricValue reads one series' value from the router's /_metrics.
func metricValue(tb testing.TB, r *cpRouter, series string) float64 {
	tb.Helper()
	_, _, b := cpDo(tb, http.MethodGet, r.url+"/_metrics", cpRouterToken, nil, nil)
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return f
		}
	}
	tb.Fatalf("no series %s in\n%s", series, b)
	return 0
}

func TestMoveTargetRefusesCP(t *testing.T) {
	r := startCPRouter(t, nil)
	n1, n2 := startCPNode(t), startCPNode(t)
	r.addNode(t, "n1", n1)
	r.addNode(t, "n2", n2)
	r.place(t, "stay", "n1")
	r.mustQuery(t, "stay", "create collection docs (title text)")
	r.mustQuery(t, "stay", "put docs {title: 'one'}")

	n2.refuseInstall.Store(true)
	st, b := r.shard(t, http.MethodPost, "tenants/stay/move", map[string]any{"to": "n2"}, nil)
	if st != http.StatusBadGateway || !strings.Contains(string(b), "no room") {
		t.Fatalf("refused move: %d %s", st, b)
	}
	// Everything is put back: the record, the hold, the freeze.
	var list []tenantEntry
	r.shard(t, http.MethodGet, "tenants", nil, &list)
	if len(list) != 1 || list[0].Node != "n1" || list[0].State != "active" || list[0].HeldBy != "" || list[0].Target != "" {
		t.Fatalf("after a failed move %+v", list)
	}
	if st, _, b := r.query(t, "stay", "put docs {title: 'two'}"); st != http.StatusOK {
		t.Fatalf("write after a failed move: %d %s", st, b)
	}
	if got := metricValue(t, r, `fenec_router_moves_total{outcome="aborted"}`); got != 1 {
		t.Fatalf("moves aborted %v", got)
	}
	// A move onto an unknown node or onto its own node never begins.
	if st, _ := r.shard(t, http.MethodPost, "tenants/stay/move", map[string]any{"to": "nx"}, nil); st != http.StatusNotFound {
		t.Fatalf("move to unknown node: %d", st)
	}
	if st, _ := r.shard(t, http.MethodPost, "tenants/stay/move", map[string]any{"to": "n1"}, nil); st != http.StatusConflict {
		t.Fatalf("move onto its own node: %d", st)
	}
	if st, _ := r.shard(t, http.MethodPost, "tenants/nobody/move", map[string]any{"to": "n2"}, nil); st != http.StatusNotFound {
		t.Fatalf("move of unknown tenant: %d", st)
	}
	// Once the target takes images, the move goes through.
	n2.refuseInstall.Store(false)
	if st, b := r.shard(t, http.MethodPost, "tenants/stay/move", map[string]any{"to": "n2"}, nil); st != http.StatusOK {
		t.Fatalf("second move: %d %s", st, b)
	}
	if got := len(nodeIDs(t, n2, "stay")); got != 2 {
		t.Fatalf("target holds %d docs, want 2", got)
	}
}

// A source whose image is cut midway aborts the move: the target keeps
// nothing it would serve, the source takes writes again, and a move once
// the source sends whole images goes through.
func TestMoveSourceCutCP(t *testing.T) {
	r := startCPRouter(t, nil)
	n1, n2 := startCPNode(t), startCPNode(t)
	r.addNode(t, "n1", n1)
	r.addNode(t, "n2", n2)
	r.place(t, "cut", "n1")
	r.mustQuery(t, "cut", "create collection docs (title text, v vector<2> @hnsw(l2))")
	r.mustQuery(t, "cut", "put docs [{title: 'one', v: [1, 0]}, {title: 'two', v: [0, 1]}]")

	n1.cutImage.Store(true)
	if st, b := r.shard(t, http.MethodPost, "tenants/cut/move", map[string]any{"to": "n2"}, nil); st/100 != 5 {
		t.Fatalf("move from a source that cuts its image: %d %s", st, b)
	}
	var list []tenantEntry
	r.shard(t, http.MethodGet, "tenants", nil, &list)
	if len(list) != 1 || list[0].Node != "n1" || list[0].State != "active" || list[0].HeldBy != "" {
		t.Fatalf("after a cut move %+v", list)
	}
	if _, b := n2.admin(t, http.MethodGet, "/_admin/tenants", nil); strings.Contains(string(b), "cut") {
		t.Fatalf("the target kept a cut image: %s", b)
	}
	if st, _, b := r.query(t, "cut", "put docs {title: 'three', v: [1, 1]}"); st != http.StatusOK {
		t.Fatalf("write after a cut move: %d %s", st, b)
	}
	n1.cutImage.Store(false)
	if st, b := r.shard(t, http.MethodPost, "tenants/cut/move", map[string]any{"to": "n2"}, nil); st != http.StatusOK {
		t.Fatalf("move once whole: %d %s", st, b)
	}
	if got := len(nodeIDs(t, n2, "cut")); got != 3 {
		t.Fatalf("target holds %d docs, want 3", got)
	}
}

func TestMoveReplacesStaleCopyCP(t *testing.T) {
	r := startCPRouter(t, nil)
	n1, n2 := startCPNode(t), startCPNode(t)
	r.addNode(t, "n1", n1)
	r.addNode(t, "n2", n2)
	// A stale copy left on n2 by an earlier move that failed after its
	// install: a file of the same name holding something else.
	if st, b := n2.admin(t, http.MethodPut, "/_admin/tenants/st", nil); st != http.StatusCreated {
		t.Fatalf("stale create: %d %s", st, b)
	}
	cpDo(t, http.MethodPost, n2.URL()+"/t/st/query", "", []byte(`{"query": "create collection junk (a int)"}`), nil)
	r.place(t, "st", "n1")
	r.mustQuery(t, "st", "create collection docs (title text)")
	r.mustQuery(t, "st", "put docs [{title: 'a'}, {title: 'b'}, {title: 'c'}]")

	if st, b := r.shard(t, http.MethodPost, "tenants/st/move", map[string]any{"to": "n2"}, nil); st != http.StatusOK {
		t.Fatalf("move over a stale copy: %d %s", st, b)
	}
	if got := len(nodeIDs(t, n2, "st")); got != 3 {
		t.Fatalf("target holds %d docs, want 3", got)
	}
	if st, _, b := r.query(t, "st", "get junk"); st != http.StatusNotFound {
		t.Fatalf("the stale copy's collection answers: %d %s", st, b)
	}
}

func TestRouterStoppedMidMoveCP(t *testing.T) {
	m := cpMember(t)
	onMember := func(c *Config) { c.DirectoryURLs = m.ClientURLs(); c.ID = "r1" }
	n1, n2 := startCPNode(t), startCPNode(t)

	first := startCPRouter(t, onMember)
	first.addNode(t, "n1", n1)
	first.addNode(t, "n2", n2)
	first.place(t, "mid", "n1")
	first.mustQuery(t, "mid", "create collection docs (title text)")
	first.mustQuery(t, "mid", "put docs [{title: 'a'}, {title: 'b'}]")
	first.place(t, "doomed", "n1")
	if err := first.rt.Close(); err != nil {
		t.Fatal(err)
	}

	// The router stopped mid-move: the directory says moving, the source
	// is frozen, and the target holds a partial copy.
	dir, err := m.Open(cpCtx(t), global.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dir.Close() })
	store := global.NewStore(dir)
	at, err := store.GetTenant(cpCtx(t), "mid")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.BeginMove(cpCtx(t), "mid", at, "n2"); err != nil {
		t.Fatal(err)
	}
	if st, b := n1.admin(t, http.MethodPost, "/_admin/tenants/mid/freeze", nil); st != http.StatusOK {
		t.Fatalf("freeze: %d %s", st, b)
	}
	if st, b := n2.admin(t, http.MethodPut, "/_admin/tenants/mid", nil); st != http.StatusCreated {
		t.Fatalf("partial copy: %d %s", st, b)
	}
	// And it stopped mid-delete of another tenant: held, file gone.
	dt, err := store.GetTenant(cpCtx(t), "doomed")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Hold(cpCtx(t), "doomed", dt, holdDelete); err != nil {
		t.Fatal(err)
	}
	n1.admin(t, http.MethodDelete, "/_admin/tenants/doomed", nil)

	// Another router, not the leader that stopped, neither leads nor
	// changes anything: it names the leader.
	other := startCPRouter(t, func(c *Config) { c.DirectoryURLs = m.ClientURLs(); c.ID = "r2" })
	var refusal map[string]any
	if st, b := other.shard(t, http.MethodPost, "tenants/mid/move", map[string]any{"to": "n2"}, &refusal); st != http.StatusConflict || refusal["leader"] != "r1" {
		t.Fatalf("non-leader's move: %d %s", st, b)
	}
	if err := other.rt.Close(); err != nil {
		t.Fatal(err)
	}

	// The leader restarts: it puts the move back, serving from the source.
	r := startCPRouter(t, onMember)
	testkit.Eventually(t, cpWait, func() error {
		v, err := store.GetTenant(cpCtx(t), "mid")
		if err != nil {
			return err
		}
		if v.Value.State != global.StateActive || v.Value.HeldBy != "" || v.Value.Node != "n1" {
			return fmt.Errorf("record %+v", v.Value)
		}
		return nil
	})
	testkit.Eventually(t, cpWait, func() error {
		if _, err := store.GetTenant(cpCtx(t), "doomed"); !errors.Is(err, global.ErrNotFound) {
			return fmt.Errorf("the unfinished delete: %v", err)
		}
		return nil
	})
	if st, _, b := r.query(t, "mid", "put docs {title: 'c'}"); st != http.StatusOK {
		t.Fatalf("write on the source after recovery: %d %s", st, b)
	}
	// A second move replaces the partial copy on the target.
	if st, b := r.shard(t, http.MethodPost, "tenants/mid/move", map[string]any{"to": "n2"}, nil); st != http.StatusOK {
		t.Fatalf("second move: %d %s", st, b)
	}
	if got := len(nodeIDs(t, n2, "mid")); got != 3 {
		t.Fatalf("target holds %d docs, want 3", got)
	}
	if st, _, b := r.query(t, "mid", "get docs count"); st != http.StatusOK || !strings.Contains(string(b), `"count":3`) {
		t.Fatalf("count through the router: %d %s", st, b)
	}
}

func TestMovingTenantServedBySourceCP(t *testing.T) {
	r := startCPRouter(t, nil)
	n1, n2 := startCPNode(t), startCPNode(t)
	r.addNode(t, "n1", n1)
	r.addNode(t, "n2", n2)
	r.place(t, "mvg", "n1")
	r.mustQuery(t, "mvg", "create collection docs (title text)")
	r.mustQuery(t, "mvg", "put docs {title: 'a'}")

	hold := make(chan struct{})
	n2.holdInstall.Store(&hold)
	type result struct {
		st   int
		body []byte
	}
	done := make(chan result, 1)
	go func() { // the move; it ends once the install is let go
		req, _ := http.NewRequest(http.MethodPost, r.url+"/_shard/tenants/mvg/move", strings.NewReader(`{"to": "n2"}`))
		req.Header.Set("Authorization", "Bearer "+cpRouterToken)
		resp, err := cpClient.Do(req)
		if err != nil {
			done <- result{0, []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		done <- result{resp.StatusCode, b}
	}()
	testkit.Eventually(t, cpWait, func() error {
		var list []tenantEntry
		r.shard(t, http.MethodGet, "tenants", nil, &list)
		if len(list) != 1 || list[0].State != "moving" || list[0].Target != "n2" || list[0].HeldBy != "move" {
			return fmt.Errorf("listing %+v", list)
		}
		return nil
	})
	// The directory says "moving" as the move begins, and the source is
	// frozen just after: once the image reaches the target, it is.
	testkit.Eventually(t, cpWait, func() bool { return n2.installsHeld.Load() > 0 }, "the image reaches the target")
	// While moving it is served by its source: reads answer, writes are
	// refused with Retry-After (frozen), and a second operation is 409.
	if b := r.mustQuery(t, "mvg", "get docs count"); !strings.Contains(string(b), `"count":1`) {
		t.Fatalf("read while moving: %s", b)
	}
	st, h, b := r.data(t, http.MethodPost, "/t/mvg/docs", `{"title": "b"}`, nil)
	if st != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
		t.Fatalf("write while moving: %d %v %s", st, h, b)
	}
	var ans map[string]any
	if st, b := r.shard(t, http.MethodPost, "tenants/mvg/move", map[string]any{"to": "n2"}, &ans); st != http.StatusConflict || ans["held_by"] != "move" {
		t.Fatalf("second move: %d %s", st, b)
	}
	close(hold)
	res := <-done
	if res.st != http.StatusOK {
		t.Fatalf("move: %d %s", res.st, res.body)
	}
	if st, _, b := r.data(t, http.MethodPost, "/t/mvg/docs", `{"title": "b"}`, nil); st != http.StatusCreated {
		t.Fatalf("write after the move: %d %s", st, b)
	}
}
