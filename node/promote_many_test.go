package node

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/wire"
)

// copies has b follow a's tenants names, caught up, and returns each
// one's lineage.
func copies(t *testing.T, a, b *testNode, names ...string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, name := range names {
		a.mkTenant(name)
		a.q(name, "create collection c (n int)")
		a.q(name, "put c {n: 1}")
		b.mkTenant(name)
		if r := b.admin("POST", "tenants/"+name+"/follow", `{"from":"`+a.url+`"}`); r.Status != 200 {
			t.Fatalf("follow %s: %d %s", name, r.Status, r.Body)
		}
		testkit.Eventually(t, 10*time.Second, func() bool { return count(b, name) == `{"count":1}` }, name+"'s copy caught up")
		var l uint64
		if _, err := fmt.Sscan(lineageOf(t, a, name), &l); err != nil {
			t.Fatal(err)
		}
		out[name] = l
	}
	return out
}

func promoteMany(t *testing.T, n *testNode, body string) (int, wire.PromotedMany, []byte) {
	t.Helper()
	r := n.admin("POST", "promote", body)
	var ans wire.PromotedMany
	if r.Status == http.StatusOK {
		if err := json.Unmarshal(r.Body, &ans); err != nil {
			t.Fatalf("answer %s: %v", r.Body, err)
		}
	}
	return r.Status, ans, r.Body
}

// Many copies promoted in one call: each is checked as alone — the
// tenant's copy of its lineage is promoted, one of another lineage is
// refused 409 with the file's lineage and follows on, a file already a
// primary's is answered as it is, a tenant the node lacks is 404 — in
// the order asked; the promoted take writes and stay primaries across a
// restart.
func TestPromoteManyEachCheckedAsAlone(t *testing.T) {
	a := startNode(t, withRepl)
	dir := t.TempDir()
	b := startNode(t, func(c *Config) { withRepl(c); c.Dir = dir })
	lin := copies(t, a, b, "p1", "p2", "other")
	b.mkTenant("mine") // a primary's file of its own
	body := fmt.Sprintf(`{"tenants": [{"tenant": "p1", "lineage": %d}, {"tenant": "other", "lineage": 99}, {"tenant": "mine"},
		{"tenant": "gone"}, {"tenant": "p2", "lineage": %d}]}`, lin["p1"], lin["p2"])
	st, ans, raw := promoteMany(t, b, body)
	if st != 200 || len(ans.Tenants) != 5 {
		t.Fatalf("promote many: %d %s", st, raw)
	}
	want := []struct {
		name     string
		status   int
		promoted bool
	}{{"p1", 200, true}, {"other", 409, false}, {"mine", 200, false}, {"gone", 404, false}, {"p2", 200, true}}
	for i, w := range want {
		got := ans.Tenants[i]
		if got.Tenant != w.name || got.Status != w.status || got.Promoted != w.promoted {
			t.Fatalf("tenant %d: %+v, want %+v", i, got, w)
		}
	}
	if ans.Tenants[1].Lineage != lin["other"] || !strings.Contains(ans.Tenants[1].Error, "another lineage") {
		t.Fatalf("refusal: %+v", ans.Tenants[1])
	}
	if st := replication(t, b, "other"); st["role"] != "replica" {
		t.Fatalf("the refused copy: %v", st)
	}
	a.q("other", "put c {n: 2}")
	testkit.Eventually(t, 10*time.Second, func() bool { return count(b, "other") == `{"count":2}` }, "the refused copy follows on")
	for _, name := range []string{"p1", "p2"} {
		b.q(name, "put c {n: 5}")
	}
	if err := b.s.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := startNode(t, func(c *Config) { withRepl(c); c.Dir = dir })
	for _, name := range []string{"p1", "p2"} {
		if st := replication(t, b2, name); st["role"] != "primary" {
			t.Fatalf("%s after a restart: %v", name, st)
		}
		if got := count(b2, name); got != `{"count":2}` {
			t.Fatalf("%s after a restart: %s", name, got)
		}
	}
}

// The route's refusals of the whole call: no token, a wrong one, a body
// that is not one, no tenant, a bad name, a tenant named twice, too many
// tenants, an unknown field, the wrong method; none promotes anything.
func TestPromoteManyHostile(t *testing.T) {
	a := startNode(t, withRepl)
	b := startNode(t, withRepl)
	lin := copies(t, a, b, "p1")
	ok := fmt.Sprintf(`{"tenants": [{"tenant": "p1", "lineage": %d}]}`, lin["p1"])
	if r := b.do("POST", "/_admin/promote", ok); r.Status != 401 {
		t.Fatalf("no token: %d %s", r.Status, r.Body)
	}
	if r := b.do("POST", "/_admin/promote", ok, "Authorization", "Bearer nope"); r.Status != 401 && r.Status != 403 {
		t.Fatalf("wrong token: %d %s", r.Status, r.Body)
	}
	many := make([]string, wire.MaxPromoteMany+1)
	for i := range many {
		many[i] = fmt.Sprintf(`{"tenant": "t%d"}`, i)
	}
	for _, c := range []struct{ what, body string }{
		{"not json", `{"tenants": [`},
		{"no body", ``},
		{"no tenant", `{"tenants": []}`},
		{"bad name", `{"tenants": [{"tenant": "A/../b"}]}`},
		{"named twice", fmt.Sprintf(`{"tenants": [{"tenant": "p1", "lineage": %d}, {"tenant": "p1", "lineage": %d}]}`, lin["p1"], lin["p1"])},
		{"too many", `{"tenants": [` + strings.Join(many, ",") + `]}`},
		{"unknown field", `{"tenants": [{"tenant": "p1"}], "forse": true}`},
		{"tenants not a list", `{"tenants": "p1"}`},
	} {
		r := b.admin("POST", "promote", c.body)
		if r.Status != 400 {
			t.Fatalf("%s: %d %s", c.what, r.Status, r.Body)
		}
		wantJSONError(t, r, 400)
	}
	if r := b.admin("GET", "promote", ""); r.Status != 405 {
		t.Fatalf("GET: %d %s", r.Status, r.Body)
	}
	if st := replication(t, b, "p1"); st["role"] != "replica" {
		t.Fatalf("a refused call promoted: %v", st)
	}
	if st, ans, raw := promoteMany(t, b, ok); st != 200 || !ans.Tenants[0].Promoted {
		t.Fatalf("the call itself: %d %s", st, raw)
	}
}
