package region

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/testkit"
)

// quotaAns is PUT /_shard/tenants/<t>/quota's answer as a test reads it.
type quotaAns struct {
	Tenant string       `json:"tenant"`
	Quota  global.Quota `json:"quota"`
	Took   []string     `json:"took"`
	Failed []nodeWhy    `json:"failed"`
}

// nodeQuota reads tenant t's quota on the node itself.
func nodeQuota(tb testing.TB, n *replNode, t string) global.Quota {
	tb.Helper()
	st, b := n.call(tb, http.MethodGet, "/_admin/tenants/"+t+"/quota", "")
	if st != http.StatusOK {
		tb.Fatalf("node quota of %s: %d %s", t, st, b)
	}
	var q global.Quota
	if err := json.Unmarshal(b, &q); err != nil {
		tb.Fatalf("decode %s: %v", b, err)
	}
	return q
}

func TestQuotaStoredAndSentCP(t *testing.T) {
	r := startCPRouter(t, func(c *Config) { c.Replicas = true })
	a, b := startReplNode(t), startReplNode(t)
	r.addReplNode(t, "a", a, nil)
	r.addReplNode(t, "b", b, nil)
	r.place(t, "q", "a")
	if e := r.tenantsOf(t)["q"]; e.Replica != "b" {
		t.Fatalf("placement %+v", e)
	}

	want := global.Quota{Bytes: 1 << 20, Rows: 100, Streams: 2, Requests: 4, RowsPerS: 50, BytesPerS: 4096}
	var ans quotaAns
	if st, body := r.shard(t, http.MethodPut, "tenants/q/quota", want, &ans); st != http.StatusOK {
		t.Fatalf("put quota: %d %s", st, body)
	}
	if !slices.Equal(ans.Took, []string{"a", "b"}) || len(ans.Failed) != 0 || ans.Quota != want {
		t.Fatalf("answer %+v", ans)
	}
	for name, n := range map[string]*replNode{"a": a, "b": b} {
		if got := nodeQuota(t, n, "q"); got != want {
			t.Fatalf("on %s: %+v, want %+v", name, got, want)
		}
	}
	var got global.Quota
	if st, body := r.shard(t, http.MethodGet, "tenants/q/quota", nil, &got); st != http.StatusOK || got != want {
		t.Fatalf("get quota: %d %s", st, body)
	}
	// The node holds the tenant to it: a second row is 507.
	if st, body := r.shard(t, http.MethodPut, "tenants/q/quota", global.Quota{Rows: 1}, nil); st != http.StatusOK {
		t.Fatalf("put rows quota: %d %s", st, body)
	}
	r.mustQuery(t, "q", "create collection c (a int)")
	r.mustQuery(t, "q", "put c {a: 1}")
	if st, _, body := r.query(t, "q", "put c {a: 2}"); st != http.StatusInsufficientStorage {
		t.Fatalf("past the rows quota: %d %s", st, body)
	}

	// The copy's node down: stored all the same, the answer says who took it.
	b.down(t)
	second := global.Quota{Rows: 7}
	ans = quotaAns{}
	if st, body := r.shard(t, http.MethodPut, "tenants/q/quota", second, &ans); st != http.StatusOK {
		t.Fatalf("put quota with b down: %d %s", st, body)
	}
	if !slices.Equal(ans.Took, []string{"a"}) || len(ans.Failed) != 1 || ans.Failed[0].Node != "b" || ans.Failed[0].Why == "" {
		t.Fatalf("answer with b down %+v", ans)
	}
	if got := nodeQuota(t, a, "q"); got != second {
		t.Fatalf("on a: %+v", got)
	}
	s, err := r.rt.lead.Changes(cpCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if stored, err := s.GetQuota(cpCtx(t), "q"); err != nil || stored.Value != second {
		t.Fatalf("directory holds %+v, %v", stored.Value, err)
	}
}

func TestQuotaRefusalsCP(t *testing.T) {
	r := startCPRouter(t, func(c *Config) { c.ID = "ra" })
	r.addNode(t, "n1", startCPNode(t))
	r.place(t, "q", "n1")
	for _, c := range []struct {
		method, path, body string
		want               int
	}{
		{http.MethodPut, "tenants/ghost/quota", `{"rows": 1}`, http.StatusNotFound},
		{http.MethodGet, "tenants/ghost/quota", ``, http.StatusNotFound},
		{http.MethodPut, "tenants/q/quota", `{"rows": -1}`, http.StatusBadRequest},
		{http.MethodPut, "tenants/q/quota", `{"cpu": 1}`, http.StatusBadRequest},
		{http.MethodPut, "tenants/Q/quota", `{"rows": 1}`, http.StatusBadRequest},
		{http.MethodPost, "tenants/q/quota", `{"rows": 1}`, http.StatusMethodNotAllowed},
	} {
		st, _, b := cpDo(t, c.method, r.url+"/_shard/"+c.path, cpRouterToken, []byte(c.body), nil)
		if st != c.want {
			t.Fatalf("%s %s %s: %d %s, want %d", c.method, c.path, c.body, st, b, c.want)
		}
	}
	// No quota set: all zero, no limit.
	var q global.Quota
	if st, b := r.shard(t, http.MethodGet, "tenants/q/quota", nil, &q); st != http.StatusOK || q != (global.Quota{}) {
		t.Fatalf("unset quota: %d %s", st, b)
	}

	// A standby refuses the change, naming the leader, and reads the
	// directory's quota.
	sb := startCPRouter(t, func(c *Config) {
		c.ID, c.Standby, c.DirectoryURLs = "rb", true, r.rt.DirectoryURLs()
	})
	var refusal map[string]any
	st, b := sb.shard(t, http.MethodPut, "tenants/q/quota", global.Quota{Rows: 5}, &refusal)
	if st != http.StatusConflict || refusal["leader"] != "ra" {
		t.Fatalf("standby put: %d %s", st, b)
	}
	if st, b := r.shard(t, http.MethodPut, "tenants/q/quota", global.Quota{Rows: 9}, nil); st != http.StatusOK {
		t.Fatalf("leader put: %d %s", st, b)
	}
	testkit.Eventually(t, cpWait, func() error {
		var got global.Quota
		if st, b := sb.shard(t, http.MethodGet, "tenants/q/quota", nil, &got); st != http.StatusOK || got.Rows != 9 {
			return fmt.Errorf("standby get: %d %s", st, b)
		}
		return nil
	})

	// A held tenant (a move under way) takes no quota: it would reach only
	// the node the tenant leaves.
	s, err := r.rt.lead.Changes(cpCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	at, err := s.GetTenant(cpCtx(t), "q")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Hold(cpCtx(t), "q", at, "move"); err != nil {
		t.Fatal(err)
	}
	var held map[string]any
	if st, b := r.shard(t, http.MethodPut, "tenants/q/quota", global.Quota{Rows: 3}, &held); st != http.StatusConflict || held["held_by"] != "move" {
		t.Fatalf("held put: %d %s", st, b)
	}
	if !strings.Contains(fmt.Sprint(held["error"]), "held") {
		t.Fatalf("held refusal %v", held)
	}
}

// A quota follows its tenant: a move's target holds it before the flip, a
// copy made after it was set gets it, and the copy promoted by a failover
// enforces it.
func TestQuotaCarriedCP(t *testing.T) {
	r := startCPRouter(t, nil)
	a, b, c := startReplNode(t), startReplNode(t), startReplNode(t)
	r.addReplNode(t, "a", a, nil)
	r.addReplNode(t, "b", b, nil)
	r.addReplNode(t, "c", c, nil)
	r.place(t, "q", "a")
	want := global.Quota{Rows: 1}
	if st, body := r.shard(t, http.MethodPut, "tenants/q/quota", want, nil); st != http.StatusOK {
		t.Fatalf("put quota: %d %s", st, body)
	}
	if st, body := r.shard(t, http.MethodPost, "tenants/q/move", map[string]string{"to": "b"}, nil); st != http.StatusOK {
		t.Fatalf("move: %d %s", st, body)
	}
	if got := nodeQuota(t, b, "q"); got != want {
		t.Fatalf("move target holds %+v, want %+v", got, want)
	}
	if st, body := r.shard(t, http.MethodPost, "replicas", nil, nil); st != http.StatusOK {
		t.Fatalf("replicas: %d %s", st, body)
	}
	e := r.tenantsOf(t)["q"]
	if e.Replica == "" {
		t.Fatalf("no copy made: %+v", e)
	}
	copyNode := map[string]*replNode{"a": a, "c": c}[e.Replica]
	if got := nodeQuota(t, copyNode, "q"); got != want {
		t.Fatalf("copy on %s holds %+v, want %+v", e.Replica, got, want)
	}
	r.mustQuery(t, "q", "create collection k (a int)")
	r.mustQuery(t, "q", "put k {a: 1}")
	// The copy has taken its primary's file before the primary goes.
	primarySeq := b.replication(t, "q").Seq
	testkit.Eventually(t, cpWait, func() error {
		if got := copyNode.replication(t, "q").Seq; got != primarySeq {
			return fmt.Errorf("copy at seq %d, primary at %d", got, primarySeq)
		}
		return nil
	})
	b.down(t)
	if st, body := r.shard(t, http.MethodPost, "nodes/b/failover", map[string]any{}, nil); st != http.StatusOK {
		t.Fatalf("failover: %d %s", st, body)
	}
	if st, _, body := r.query(t, "q", "put k {a: 2}"); st != http.StatusInsufficientStorage {
		t.Fatalf("past the rows quota on the promoted copy: %d %s", st, body)
	}
}

// A quota PUT with If-Match lands only on the quota it was read as (GET's
// ETag): one naming limits changed since is refused 409 with the quota now
// and its tag, and nothing is stored; sent again on those, it lands. A
// PUT without If-Match is unconditioned, as before.
func TestQuotaIfMatchCP(t *testing.T) {
	r := startCPRouter(t, nil)
	a := startReplNode(t)
	r.addReplNode(t, "a", a, nil)
	r.place(t, "q", "a")
	get := func() (global.Quota, string) {
		t.Helper()
		st, hdr, b := cpDo(t, http.MethodGet, r.url+"/_shard/tenants/q/quota", cpRouterToken, nil, nil)
		var q global.Quota
		if st != http.StatusOK || json.Unmarshal(b, &q) != nil || hdr.Get("ETag") == "" {
			t.Fatalf("get quota: %d %v %s", st, hdr, b)
		}
		return q, hdr.Get("ETag")
	}
	put := func(q global.Quota, tag string) (int, http.Header, []byte) {
		t.Helper()
		b, _ := json.Marshal(q)
		var hdr map[string]string
		if tag != "" {
			hdr = map[string]string{"If-Match": tag}
		}
		return cpDo(t, http.MethodPut, r.url+"/_shard/tenants/q/quota", cpRouterToken, b, hdr)
	}

	none, read := get() // operator A reads: no limit
	if st, _, b := put(global.Quota{Rows: 10}, read); st != http.StatusOK {
		t.Fatalf("operator B's conditioned put: %d %s", st, b)
	}
	none.Bytes = 1 << 20 // A's change, on what A read
	st, _, b := put(none, read)
	var refused struct {
		Error string       `json:"error"`
		Quota global.Quota `json:"quota"`
		ETag  string       `json:"etag"`
	}
	if st != http.StatusConflict || json.Unmarshal(b, &refused) != nil || refused.Quota != (global.Quota{Rows: 10}) ||
		refused.ETag == read || !strings.Contains(refused.Error, "send it again") {
		t.Fatalf("a put on a quota changed since: %d %s", st, b)
	}
	if q, tag := get(); q != (global.Quota{Rows: 10}) || tag != refused.ETag {
		t.Fatalf("after the refused put: %+v %s, the refusal named %s", q, tag, refused.ETag)
	}
	now := refused.Quota
	now.Bytes = 1 << 20
	st, hdr, b := put(now, refused.ETag)
	if st != http.StatusOK {
		t.Fatalf("sent again on the quota now: %d %s", st, b)
	}
	if q, tag := get(); q != now || tag != hdr.Get("ETag") {
		t.Fatalf("after it: %+v %s, the put answered %s", q, tag, hdr.Get("ETag"))
	}
	if st, _, b := put(global.Quota{Streams: 3}, ""); st != http.StatusOK {
		t.Fatalf("an unconditioned put: %d %s", st, b)
	}
	if q, _ := get(); q != (global.Quota{Streams: 3}) {
		t.Fatalf("after the unconditioned put: %+v", q)
	}
	// A tag no read gave (garbage, a weak one, a list) stores nothing;
	// "*" is any quota the tenant has (RFC 9110 §13.1.1).
	for _, tag := range []string{"zzz", `W/` + hdr.Get("ETag"), `"a", "b"`, `""`} {
		if st, _, b := put(global.Quota{Rows: 1}, tag); st != http.StatusConflict {
			t.Fatalf("If-Match %s: %d %s", tag, st, b)
		}
	}
	if q, _ := get(); q != (global.Quota{Streams: 3}) {
		t.Fatalf("after the refused tags: %+v", q)
	}
	if st, _, b := put(global.Quota{Rows: 2}, "*"); st != http.StatusOK {
		t.Fatalf("If-Match *: %d %s", st, b)
	}
}
