package node

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
)

// lineageOf is the first history of a tenant's file on n.
func lineageOf(t *testing.T, n *testNode, tenant string) string {
	t.Helper()
	st := replication(t, n, tenant)
	return st["lineage"].([]any)[0].(map[string]any)["history"].(json.Number).String()
}

// A copy's writes are refused with the tenant's name, Retry-After and
// Fenec-Refused: replica, whatever route they take; reads are served.
func TestReplicaRefusesWritesByName(t *testing.T) {
	a := startNode(t, withRepl)
	b := startNode(t, withRepl)
	people(t, a)
	b.mkTenant("a")
	b.admin("POST", "tenants/a/follow", `{"from":"`+a.url+`"}`)
	testkit.Eventually(t, 10*time.Second, func() bool { return count(b, "a") == `{"count":3}` }, "the copy caught up")
	for _, r := range []*resp{
		b.query("a", `put c {name: "no"}`),
		b.do("POST", "/t/a/c", `{"name": "no"}`),
		b.do("DELETE", "/t/a/c?n=eq.1", ""),
		b.do("POST", "/t/a/batch", `{"query": "put c {name: \"no\"}"}`+"\n"),
	} {
		m := wantJSONError(t, r, 503)
		if m["error"] != "this node holds a copy of tenant a; write to its primary" ||
			r.Header.Get("Fenec-Refused") != "replica" || r.Header.Get("Retry-After") == "" {
			t.Fatalf("refusal %v %v", m, r.Header)
		}
	}
	if got := count(b, "a"); got != `{"count":3}` {
		t.Fatalf("copy after refused writes: %s", got)
	}
}

// A copy of another lineage (a file with writes of its own) is sent the
// whole image first, then records: it ends with the primary's seq,
// lineage and answers.
func TestCopyOffTheLineageTakesTheImage(t *testing.T) {
	a := startNode(t, withRepl)
	b := startNode(t, withRepl)
	people(t, a)
	b.mkTenant("a")
	b.q("a", "create collection other (x int)")
	b.q("a", `put other [{x: 1}, {x: 2}, {x: 3}, {x: 4}, {x: 5}]`)
	if lineageOf(t, a, "a") == lineageOf(t, b, "a") {
		t.Fatal("two files made apart share a lineage")
	}
	b.admin("POST", "tenants/a/follow", `{"from":"`+a.url+`"}`)
	a.q("a", `put c {name: "dee", n: 4}`)
	testkit.Eventually(t, 10*time.Second, func() bool {
		sa, sb := replication(t, a, "a"), replication(t, b, "a")
		return sb["seq"] == sa["seq"] && sb["history"] == sa["history"]
	}, "the copy took the image and what came after")
	if la, lb := lineageOf(t, a, "a"), lineageOf(t, b, "a"); la != lb {
		t.Fatalf("lineage %s on the copy, %s on the primary", lb, la)
	}
	for _, path := range []string{"/t/a/c?order=n.asc", "/t/a/c?count", "/t/a/c?n=gte.2&select=name"} {
		ra, rb := a.do("GET", path, ""), b.do("GET", path, "")
		if ra.Status != 200 || string(ra.Body) != string(rb.Body) {
			t.Fatalf("%s: primary %d %s, copy %d %s", path, ra.Status, ra.Body, rb.Status, rb.Body)
		}
	}
	wantJSONError(t, b.do("GET", "/t/a/other?count", ""), 404) // its own writes are gone
}

// A promoted copy stays a primary across a restart: it takes writes and
// follows nobody.
func TestPromotionSurvivesRestart(t *testing.T) {
	a := startNode(t, withRepl)
	dir := t.TempDir()
	b := startNode(t, func(c *Config) { withRepl(c); c.Dir = dir })
	people(t, a)
	b.mkTenant("a")
	b.admin("POST", "tenants/a/follow", `{"from":"`+a.url+`"}`)
	testkit.Eventually(t, 10*time.Second, func() bool { return count(b, "a") == `{"count":3}` }, "the copy caught up")
	r := b.admin("POST", "tenants/a/promote", `{"lineage": `+lineageOf(t, a, "a")+`}`)
	if r.Status != 200 || r.Obj(t)["promoted"] != true {
		t.Fatalf("promote: %d %s", r.Status, r.Body)
	}
	history := replication(t, b, "a")["history"]
	if err := b.s.Close(); err != nil {
		t.Fatal(err)
	}
	a.q("a", `put c {name: "after"}`) // the old primary's: must not arrive
	b2 := startNode(t, func(c *Config) { withRepl(c); c.Dir = dir })
	st := replication(t, b2, "a")
	if st["role"] != "primary" || st["history"] != history {
		t.Fatalf("after restart %v, promoted at history %v", st, history)
	}
	b2.q("a", `put c {name: "mine"}`)
	if got := count(b2, "a"); got != `{"count":4}` {
		t.Fatalf("promoted copy after restart: %s", got)
	}
}

// An old primary's file told to follow the new primary is refused
// promotion (with the forked history) until it has heard from it, and
// promoted once it has; the hello is remembered across a restart.
func TestOldPrimaryPromotedOnceItHeard(t *testing.T) {
	dirA := t.TempDir()
	a := startNode(t, func(c *Config) { withRepl(c); c.Dir = dirA })
	b := startNode(t, withRepl)
	people(t, a)
	lineage := lineageOf(t, a, "a")
	b.mkTenant("a")
	b.admin("POST", "tenants/a/follow", `{"from":"`+a.url+`"}`)
	testkit.Eventually(t, 10*time.Second, func() bool { return count(b, "a") == `{"count":3}` }, "the copy caught up")
	p := b.admin("POST", "tenants/a/promote", `{"lineage": `+lineage+`}`).Obj(t)
	forked := p["history"].(json.Number).String()
	b.q("a", `put c {name: "on b"}`)

	// The old primary is told to follow a node it cannot reach yet.
	if r := a.admin("POST", "tenants/a/follow", `{"from":"http://127.0.0.1:1"}`); r.Status != 200 {
		t.Fatalf("follow: %d %s", r.Status, r.Body)
	}
	body := fmt.Sprintf(`{"lineage": %s, "forked_history": %s}`, lineage, forked)
	wantJSONError(t, a.admin("POST", "tenants/a/promote", body), 409)
	// Refused, it still follows and refuses writes.
	if st := replication(t, a, "a"); st["role"] != "replica" {
		t.Fatalf("after a refused promotion %v", st)
	}
	wantJSONError(t, a.query("a", `put c {name: "no"}`), 503)

	// Told to follow the new primary, it hears from it and takes its
	// history; a restart keeps that it heard.
	a.admin("POST", "tenants/a/follow", `{"from":"`+b.url+`"}`)
	testkit.Eventually(t, 10*time.Second, func() bool {
		st := replication(t, a, "a")
		return st["heard"] == true && count(a, "a") == `{"count":4}`
	}, "the old primary follows the new one")
	if err := a.s.Close(); err != nil {
		t.Fatal(err)
	}
	a2 := startNode(t, func(c *Config) { withRepl(c); c.Dir = dirA })
	if st := replication(t, a2, "a"); st["heard"] != true {
		t.Fatalf("after restart %v", st)
	}
	r := a2.admin("POST", "tenants/a/promote", body)
	if r.Status != 200 || r.Obj(t)["promoted"] != true {
		t.Fatalf("promote the copy that heard: %d %s", r.Status, r.Body)
	}
	a2.q("a", `put c {name: "back on a"}`)
}

// Under --sync always, a copy that made a write wait out the bound is
// not waited for again until it has acknowledged all its stream had sent
// when it last stood at the end of what was durable; then it is.
func TestLaggingStreamNotWaitedForAgain(t *testing.T) {
	n := startNode(t, func(c *Config) { withRepl(c); c.Sync = "always" })
	people(t, n)
	tn, err := n.s.reg.acquire(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	defer n.s.reg.release(tn)
	seq := tn.db.Seq()
	f, drop := tn.addFeed(seq, "", false) // a copy caught up that acknowledges nothing more
	defer drop()
	if tn.waitAcked(t.Context(), seq+1, 10*time.Millisecond) {
		t.Fatal("a write did not wait for a copy that has not acknowledged it")
	}
	// Lagging: the next write is not held for it at all (the bound would
	// fail the test if it were).
	if !tn.waitAcked(t.Context(), seq+1, 30*time.Second) {
		t.Fatal("a write waited for a lagging copy")
	}
	tn.ackedTo(f, seq+1) // its stream has not yet sent all: still lagging
	if !tn.waitAcked(t.Context(), seq+2, 30*time.Second) {
		t.Fatal("a write waited for a copy still lagging")
	}
	tn.sentAllTo(f, seq+3)
	tn.ackedTo(f, seq+2) // short of what was sent: still lagging
	if !tn.waitAcked(t.Context(), seq+3, 30*time.Second) {
		t.Fatal("a write waited for a copy still lagging")
	}
	tn.ackedTo(f, seq+3) // caught up: waited for again
	if tn.waitAcked(t.Context(), seq+4, 10*time.Millisecond) {
		t.Fatal("a write did not wait for a copy that caught up")
	}
}
