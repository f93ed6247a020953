package region

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/internal/testkit/testnode"
	"github.com/fenec-go/fenec/node"
	"github.com/fenec-go/fenec/wire"
)

// A move between nodes that replicate is made by following: the target's
// copy is promoted, the directory records the history it forked, the
// source's file goes. Run with --move-image, the same move copies the
// image instead.
func TestMoveByFollowingCP(t *testing.T) {
	for _, tc := range []struct {
		name  string
		image bool
		by    string
	}{{"follow", false, moveByFollow}, {"image", true, moveByImage}} {
		t.Run(tc.name, func(t *testing.T) {
			r := startCPRouter(t, func(c *Config) { c.MoveImage = tc.image })
			a, b := startReplNode(t), startReplNode(t)
			r.addReplNode(t, "a", a, nil)
			r.addReplNode(t, "b", b, nil)
			r.place(t, "m", "a")
			r.mustQuery(t, "m", "create collection c (n int)")
			r.mustQuery(t, "m", "put c [{n: 1}, {n: 2}, {n: 3}]")
			before := a.replication(t, "m")

			var ans moveAnswer
			if st, body := r.shard(t, http.MethodPost, "tenants/m/move", map[string]any{"to": "b"}, &ans); st != http.StatusOK {
				t.Fatalf("move: %d %s", st, body)
			}
			if ans.By != tc.by || ans.Bytes <= 0 || ans.PauseMS < 0 || ans.PauseMS > ans.MS {
				t.Fatalf("move answered %+v, want by %s", ans, tc.by)
			}
			got := b.replication(t, "m")
			if got.Role != "primary" || got.Seq < before.Seq || got.LineageID() != before.LineageID() {
				t.Fatalf("the target after the move %+v, the source before %+v", got, before)
			}
			rec, err := r.rt.store.GetTenant(cpCtx(t), "m")
			if err != nil {
				t.Fatal(err)
			}
			if rec.Value.Node != "b" || rec.Value.State != global.StateActive || rec.Value.MoveStep != "" || rec.Value.MoveSeq != 0 {
				t.Fatalf("the record after the move %+v", rec.Value)
			}
			if forked := rec.Value.ForkedHistory; (tc.image && forked != 0) || (!tc.image && forked != got.History) {
				t.Fatalf("forked history recorded %d, the target's history %d", forked, got.History)
			}
			if b := r.mustQuery(t, "m", "get c count"); !strings.Contains(string(b), `"count":3`) {
				t.Fatalf("count after the move: %s", b)
			}
			testkit.Eventually(t, cpWait, func() error {
				if st, body := a.call(t, http.MethodGet, "/_admin/tenants/m/replication", ""); st != http.StatusNotFound {
					return fmt.Errorf("the source's file: %d %s", st, body)
				}
				return nil
			})
			// A tenant never written moves as well.
			r.place(t, "empty", "a")
			if st, body := r.shard(t, http.MethodPost, "tenants/empty/move", map[string]any{"to": "b"}, &ans); st != http.StatusOK || ans.By != tc.by {
				t.Fatalf("move of a tenant never written: %d %s", st, body)
			}
			r.mustQuery(t, "empty", "create collection c (n int)")
		})
	}
}

// A target with no replication token refuses to follow with its code
// (wire.ErrCannotFollow, through the router's node client as through the
// wire), and a move to it copies the image instead: by image, the tenant
// whole on the target, its file there made anew.
func TestMoveTargetCannotFollowCP(t *testing.T) {
	r := startCPRouter(t, nil)
	a := startReplNode(t)
	b := &replNode{testnode.Start(t, testnode.Options{Configure: func(c *node.Config) {
		c.Sync, c.ReplicationToken = "always", ""
	}})}
	r.addReplNode(t, "a", a, nil)
	r.addReplNode(t, "b", b, nil)
	r.place(t, "m", "a")
	r.mustQuery(t, "m", "create collection c (n int)")
	r.mustQuery(t, "m", "put c [{n: 1}, {n: 2}]")

	v := r.rt.watcher.View()
	na, _ := v.Node("a")
	nb, _ := v.Node("b")
	if b.Admin().Create(cpCtx(t), "probe") != nil {
		t.Fatal("create probe on b")
	}
	err := r.rt.nodes.Follow(cpCtx(t), nb, "b", "probe", na)
	if !errors.Is(err, wire.ErrCannotFollow) {
		t.Fatalf("follow on a node with no replication token: %v", err)
	}
	if err := r.rt.nodes.Follow(cpCtx(t), na, "a", "probe", global.Node{Addr: "ftp://x"}); err == nil || errors.Is(err, wire.ErrCannotFollow) {
		t.Fatalf("follow from an address no node has: %v", err)
	}

	var ans moveAnswer
	if st, body := r.shard(t, http.MethodPost, "tenants/m/move", map[string]any{"to": "b"}, &ans); st != http.StatusOK || ans.By != moveByImage {
		t.Fatalf("move to a node that cannot follow: %d %s", st, body)
	}
	if e := r.tenantsOf(t)["m"]; e.Node != "b" || e.State != "active" || e.MoveStep != "" {
		t.Fatalf("after the move: %+v", e)
	}
	if b := r.mustQuery(t, "m", "get c count"); !strings.Contains(string(b), `"count":2`) {
		t.Fatalf("count after the move: %s", b)
	}
}

// A target that never hears from its source (another replication token)
// fails the move once the bound passes: 502 saying why, the record back
// on the source, the target's file deleted, the source writable.
func TestMoveTargetNeverHearsCP(t *testing.T) {
	r := startCPRouter(t, nil)
	a := startReplNode(t)
	b := &replNode{testnode.Start(t, testnode.Options{Configure: func(c *node.Config) {
		c.Sync, c.ReplicationToken = "always", "not-the-sources-token"
	}})}
	r.addReplNode(t, "a", a, nil)
	r.addReplNode(t, "b", b, nil)
	r.place(t, "m", "a")
	r.mustQuery(t, "m", "create collection c (n int)")
	r.mustQuery(t, "m", "put c {n: 1}")

	st, body := r.shard(t, http.MethodPost, "tenants/m/move", map[string]any{"to": "b"}, nil)
	if st != http.StatusBadGateway || !strings.Contains(string(body), "has not heard from a") || !strings.Contains(string(body), "--replication-token") {
		t.Fatalf("move to a node that cannot follow the source: %d %s", st, body)
	}
	if e := r.tenantsOf(t)["m"]; e.Node != "a" || e.State != "active" || e.HeldBy != "" || e.MoveStep != "" || e.Target != "" {
		t.Fatalf("put back: %+v", e)
	}
	if st, body := b.call(t, http.MethodGet, "/_admin/tenants/m/replication", ""); st != http.StatusNotFound {
		t.Fatalf("the target's copy after the move was put back: %d %s", st, body)
	}
	r.mustQuery(t, "m", "put c {n: 2}")
}

// A router stopped with its move recorded promoting, whose source took
// writes past the seq recorded (a source started again, its freeze
// lost): the router that leads next does not finish the move, which would
// lose them, but puts it back and deletes the target's file.
func TestRecoverPromotingSourceAheadCP(t *testing.T) {
	m := cpMember(t)
	onMember := func(c *Config) { c.DirectoryURLs = m.ClientURLs(); c.ID = "r1" }
	a, b := startReplNode(t), startReplNode(t)
	first := startCPRouter(t, onMember)
	first.addReplNode(t, "a", a, nil)
	first.addReplNode(t, "b", b, nil)
	first.place(t, "m", "a")
	first.mustQuery(t, "m", "create collection c (n int)")
	first.mustQuery(t, "m", "put c {n: 1}")
	recorded := a.replication(t, "m").Seq
	first.mustQuery(t, "m", "put c {n: 2}") // past what the step records
	if err := first.rt.Close(); err != nil {
		t.Fatal(err)
	}

	dir, err := m.Open(cpCtx(t), global.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dir.Close() })
	store := global.NewStore(dir)
	at, err := store.GetTenant(cpCtx(t), "m")
	if err != nil {
		t.Fatal(err)
	}
	moving, err := store.BeginMove(cpCtx(t), "m", at, "b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.StepMove(cpCtx(t), "m", moving, global.MovePromoting, recorded); err != nil {
		t.Fatal(err)
	}
	if st, body := b.call(t, http.MethodPut, "/_admin/tenants/m", ""); st != http.StatusCreated {
		t.Fatalf("the target's file: %d %s", st, body)
	}

	r := startCPRouter(t, onMember)
	testkit.Eventually(t, cpWait, func() error {
		e := r.tenantsOf(t)["m"]
		if e.Node != "a" || e.State != "active" || e.HeldBy != "" || e.MoveStep != "" {
			return fmt.Errorf("record %+v", e)
		}
		if st, _ := b.call(t, http.MethodGet, "/_admin/tenants/m/replication", ""); st != http.StatusNotFound {
			return fmt.Errorf("the target's file answers %d", st)
		}
		return nil
	})
	if b := r.mustQuery(t, "m", "get c count"); !strings.Contains(string(b), `"count":2`) {
		t.Fatalf("count on the source: %s", b)
	}
	r.mustQuery(t, "m", "put c {n: 3}")
}

// A source cut off just as it froze for the switch: the move fails and is
// put back, the target's copy deleted; the source, frozen still, is
// thawed by the router once it answers again, and takes writes.
func TestMoveSourceCutAtSwitchCP(t *testing.T) {
	var armed, cut atomic.Bool
	a := &replNode{testnode.Start(t, testnode.Options{
		Configure: func(c *node.Config) { c.Sync = "always" },
		Wrap: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if cut.Load() {
					http.Error(w, `{"error": "cut off"}`, http.StatusBadGateway)
					return
				}
				next.ServeHTTP(w, r)
				if armed.Load() && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/freeze") {
					cut.Store(true)
				}
			})
		},
	})}
	b := startReplNode(t)
	r := startCPRouter(t, nil)
	r.addReplNode(t, "a", a, nil)
	r.addReplNode(t, "b", b, nil)
	r.place(t, "m", "a")
	r.mustQuery(t, "m", "create collection c (n int)")
	r.mustQuery(t, "m", "put c {n: 1}")

	armed.Store(true)
	st, body := r.shard(t, http.MethodPost, "tenants/m/move", map[string]any{"to": "b"}, nil)
	if st != http.StatusBadGateway {
		t.Fatalf("move with its source cut off at the switch: %d %s", st, body)
	}
	if e := r.tenantsOf(t)["m"]; e.Node != "a" || e.State != "active" || e.HeldBy != "" || e.MoveStep != "" {
		t.Fatalf("put back: %+v", e)
	}
	if st, body := b.call(t, http.MethodGet, "/_admin/tenants/m/replication", ""); st != http.StatusNotFound {
		t.Fatalf("the target's copy after the move was put back: %d %s", st, body)
	}
	armed.Store(false)
	cut.Store(false)
	testkit.Eventually(t, cpWait, func() error {
		if st := a.replication(t, "m"); st.Frozen || st.Role != "primary" {
			return fmt.Errorf("the source %+v", st)
		}
		return nil
	})
	r.mustQuery(t, "m", "put c {n: 2}")
	if b := r.mustQuery(t, "m", "get c count"); !strings.Contains(string(b), `"count":2`) {
		t.Fatalf("count on the source: %s", b)
	}
}

// A move whose record changes under it in a way that is not the move's —
// the tenant's copy recorded behind, as its primary's node reports it,
// while the move holds the tenant — still records its steps and flips:
// each write is made again on the record read anew. Without that, the
// flip and then the put-back were refused (the directory changed since
// the move read it), and the tenant was left moving, unwritable, until
// another router led and recovered it.
func TestMoveRecordChangedUnderItCP(t *testing.T) {
	for _, tc := range []struct {
		name   string
		target bool   // the change is made as the target is asked, else the source
		suffix string // as this request arrives
	}{{"at the switch", false, "/freeze"}, {"at the promotion", true, "/promote"}} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				armed atomic.Bool
				store atomic.Pointer[global.Store]
				fired atomic.Bool
			)
			behind := func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/tenants/m"+tc.suffix) && armed.CompareAndSwap(true, false) {
						s := store.Load()
						at, err := s.GetTenant(r.Context(), "m")
						if err == nil {
							_, err = s.UpdateTenant(r.Context(), "m", at, func(t *global.Tenant) error {
								t.ReplicaBehind = at.Value.ReplicaBehind + 7
								return nil
							})
						}
						if err != nil {
							http.Error(w, err.Error(), http.StatusInternalServerError)
							return
						}
						fired.Store(true)
					}
					next.ServeHTTP(w, r)
				})
			}
			source, target := func(h http.Handler) http.Handler { return h }, behind
			if !tc.target {
				source, target = behind, source
			}
			a := &replNode{testnode.Start(t, testnode.Options{Configure: func(c *node.Config) { c.Sync = "always" }, Wrap: source})}
			b := &replNode{testnode.Start(t, testnode.Options{Configure: func(c *node.Config) { c.Sync = "always" }, Wrap: target})}
			r := startCPRouter(t, nil)
			store.Store(r.rt.store)
			r.addReplNode(t, "a", a, nil)
			r.addReplNode(t, "b", b, nil)
			r.place(t, "m", "a")
			r.mustQuery(t, "m", "create collection c (n int)")
			r.mustQuery(t, "m", "put c [{n: 1}, {n: 2}]")

			armed.Store(true)
			var ans moveAnswer
			if st, body := r.shard(t, http.MethodPost, "tenants/m/move", map[string]any{"to": "b"}, &ans); st != http.StatusOK || ans.By != moveByFollow {
				t.Fatalf("move with its record changed %s: %d %s", tc.name, st, body)
			}
			if !fired.Load() {
				t.Fatalf("the record was never changed %s", tc.name)
			}
			if e := r.tenantsOf(t)["m"]; e.Node != "b" || e.State != "active" || e.HeldBy != "" || e.MoveStep != "" || e.ReplicaBehind != 0 {
				t.Fatalf("after the move: %+v", e)
			}
			r.mustQuery(t, "m", "put c {n: 3}")
			if b := r.mustQuery(t, "m", "get c count"); !strings.Contains(string(b), `"count":3`) {
				t.Fatalf("count after the move: %s", b)
			}
		})
	}
}

// A move's write is made again only over a change of ReplicaBehind: any
// other change to the record under it fails the write as before.
func TestOnlyBehindChanged(t *testing.T) {
	was := global.Tenant{Node: "a", State: global.StateMoving, Replica: "c", HeldBy: global.HoldMove, Target: "b",
		MoveStep: global.MovePromoting, MoveSeq: 9, ReadCopies: global.MakeNodeList("d")}
	for _, tc := range []struct {
		name   string
		change func(*global.Tenant)
		want   bool
	}{
		{"nothing", func(*global.Tenant) {}, true},
		{"recorded behind", func(t *global.Tenant) { t.ReplicaBehind = 12 }, true},
		{"failed over", func(t *global.Tenant) {
			t.Node, t.State, t.HeldBy, t.Target, t.MoveStep = "c", global.StateActive, "", "", ""
		}, false},
		{"put back", func(t *global.Tenant) {
			t.State, t.HeldBy, t.Target, t.MoveStep, t.MoveSeq = global.StateActive, "", "", "", 0
		}, false},
		{"another step", func(t *global.Tenant) { t.MoveStep, t.MoveSeq = global.MoveSwitching, 0 }, false},
		{"another copy", func(t *global.Tenant) { t.Replica = "e" }, false},
		{"read copies", func(t *global.Tenant) { t.ReadCopies = global.MakeNodeList("d", "e") }, false},
		{"behind and another copy", func(t *global.Tenant) { t.ReplicaBehind, t.Replica = 3, "" }, false},
	} {
		now := was
		tc.change(&now)
		if got := onlyBehindChanged(was, now); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}
