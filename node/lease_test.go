package node

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenec-go/fenec/lease"
)

// jumpClock is a manual clock that can be armed to jump forward after
// its next reading: a write checked under the lease as it lands is then
// answered after the lease lapsed.
type jumpClock struct {
	mu    sync.Mutex
	now   time.Duration
	armed bool
	jump  time.Duration
}

func (c *jumpClock) Now() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now
	if c.armed {
		c.armed = false
		c.now += c.jump
	}
	return now
}

func (c *jumpClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now += d
	c.mu.Unlock()
}

func (c *jumpClock) arm(d time.Duration) {
	c.mu.Lock()
	c.armed, c.jump = true, d
	c.mu.Unlock()
}

// grant sends a grant and returns the answer.
func (n *testNode) grant(g lease.Grant) (*resp, lease.Answer) {
	n.tb.Helper()
	b, _ := json.Marshal(g)
	r := n.admin("POST", "lease", string(b))
	var a lease.Answer
	if r.Status == 200 {
		if err := json.Unmarshal(r.Body, &a); err != nil {
			n.tb.Fatalf("answer %s: %v", r.Body, err)
		}
	}
	return r, a
}

func TestNodeWithoutLease(t *testing.T) {
	n := startNode(t, nil)
	people(t, n)
	r, _ := n.grant(lease.Grant{Term: 1, Router: "r", N: 1, MS: 3000, Tenants: []string{"a"}, List: lease.ListID([]string{"a"})})
	m := wantJSONError(t, r, 409)
	if m["error"] != "this node takes no lease" {
		t.Fatalf("grant to a node without --lease: %s", r.Body)
	}
	n.q("a", `put c {name: "free"}`)
}

func TestLeaseGatesWrites(t *testing.T) {
	clock := &jumpClock{now: time.Hour}
	n := startNode(t, func(c *Config) { c.Lease = true; c.LeaseClock = clock })
	n.mkTenant("a")
	// No lease yet: refused unrun, saying so.
	r := n.query("a", "create collection c (name text)")
	wantJSONError(t, r, 503)
	if r.Header.Get("Fenec-Refused") != "lease" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("refusal headers %v", r.Header)
	}
	list := []string{"a"}
	g := lease.Grant{Term: 1, Router: "r1", N: 1, MS: 3000, Tenants: list, List: lease.ListID(list)}
	if _, a := n.grant(g); !a.Took || a.LeftMS != 0 {
		t.Fatalf("first grant: %+v", a)
	}
	wantJSONError(t, n.query("a", "create collection c (name text)"), 503) // a first grant runs no lease
	g2 := lease.Grant{Term: 1, Router: "r1", N: 2, Ack: 1, MS: 3000, List: lease.ListID(list)}
	if _, a := n.grant(g2); !a.Took || a.LeftMS <= 0 {
		t.Fatalf("second grant: %+v", a)
	}
	n.q("a", "create collection c (name text)")
	if st := n.admin("GET", "lease", "").Obj(t); st["tenants"].([]any)[0] != "a" || st["term"] != json.Number("1") {
		t.Fatalf("lease status %v", st)
	}
	// Reads go on without a lease; writes stop when it lapses.
	clock.advance(4 * time.Second)
	wantJSONError(t, n.query("a", `put c {name: "late"}`), 503)
	if r := n.do("GET", "/t/a/c?count", ""); r.Status != 200 {
		t.Fatalf("read without lease: %d", r.Status)
	}
	// A lower term is refused, and the higher term is on disk.
	if _, a := n.grant(lease.Grant{Term: 2, Router: "r2", N: 1, MS: 3000, Tenants: list, List: lease.ListID(list)}); !a.Took {
		t.Fatalf("term 2 grant: %+v", a)
	}
	r, _ = n.grant(lease.Grant{Term: 1, Router: "r1", N: 3, Ack: 2, MS: 3000, List: lease.ListID(list)})
	wantJSONError(t, r, 409)
	if b, err := os.ReadFile(filepath.Join(n.cfg.Dir, lease.TermFileName)); err != nil || !strings.Contains(string(b), "2") {
		t.Fatalf("term file %q %v", b, err)
	}
	if names := n.admin("GET", "tenants", ""); strings.TrimSpace(string(names.Body)) != `["a"]` {
		t.Fatalf("the term file counts as a tenant: %s", names.Body)
	}
}

func TestLeaseLapsedBeforeAnswer(t *testing.T) {
	clock := &jumpClock{now: time.Hour}
	n := startNode(t, func(c *Config) { c.Lease = true; c.LeaseClock = clock })
	n.mkTenant("a")
	list := []string{"a"}
	n.grant(lease.Grant{Term: 1, Router: "r", N: 1, MS: 3000, Tenants: list, List: lease.ListID(list)})
	n.grant(lease.Grant{Term: 1, Router: "r", N: 2, Ack: 1, MS: 3000, List: lease.ListID(list)})
	n.q("a", "create collection c (name text)")
	// A keyed write under the lease.
	if r := n.do("POST", "/t/a/c", `{"name":"k"}`, "Idempotency-Key", "k1"); r.Status != 201 {
		t.Fatalf("keyed write: %d %s", r.Status, r.Body)
	}
	// Checked as it lands (under the lease), then the clock jumps past it.
	clock.arm(10 * time.Second)
	r := n.query("a", `put c {name: "fate unknown"}`)
	m := wantJSONError(t, r, 500)
	if m["outcome"] != "unknown" || m["seq"] == nil || m["history"] == nil || r.Header.Get("Fenec-Seq") != "" {
		t.Fatalf("lapsed answer %s", r.Body)
	}
	// The write is in the file: a read with its seq and history finds it.
	hist := m["history"].(json.Number).String()
	seq := m["seq"].(json.Number).String()
	rr := n.do("GET", "/t/a/c?name=eq.fate%20unknown&count", "", "Fenec-After", seq, "Fenec-History", hist)
	if rr.Status != 200 || strings.TrimSpace(string(rr.Body)) != `{"count":1}` {
		t.Fatalf("read back: %d %s", rr.Status, rr.Body)
	}
	// A keyed retry is refused while the lease is lapsed, before the key is looked up.
	r = n.do("POST", "/t/a/c", `{"name":"k"}`, "Idempotency-Key", "k1")
	wantJSONError(t, r, 503)
	if r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatal("replayed without a lease")
	}
}

// A /batch is one block: refused whole while the node holds no lease for
// its tenant (503, nothing landed), and, landed under the lease but
// answered after it lapsed, answered 500 outcome unknown naming the
// block's seq and history.
func TestLeaseBatch(t *testing.T) {
	clock := &jumpClock{now: time.Hour}
	n := startNode(t, func(c *Config) { c.Lease = true; c.LeaseClock = clock })
	n.mkTenant("a")
	n.mkTenant("b")
	list := []string{"a"}
	n.grant(lease.Grant{Term: 1, Router: "r", N: 1, MS: 3000, Tenants: list, List: lease.ListID(list)})
	n.grant(lease.Grant{Term: 1, Router: "r", N: 2, Ack: 1, MS: 3000, List: lease.ListID(list)})
	n.q("a", "create collection c (name text)")
	batch := `{"query":"put c {name: \"one\"}"}` + "\n" + `{"query":"put c {name: \"two\"}"}` + "\n"

	// b is not on the lease's list: refused unrun.
	r := n.do("POST", "/t/b/batch", `{"query":"create collection c (name text)"}`+"\n")
	wantJSONError(t, r, 503)
	if r.Header.Get("Fenec-Refused") != "lease" {
		t.Fatalf("batch on a tenant the lease does not name: %v", r.Header)
	}

	before := n.seq("a")
	clock.arm(10 * time.Second)
	r = n.do("POST", "/t/a/batch", batch)
	m := wantJSONError(t, r, 500)
	if m["outcome"] != "unknown" || m["seq"] == nil || m["history"] == nil {
		t.Fatalf("batch answered after the lapse: %s", r.Body)
	}
	if m["seq"].(json.Number).String() == before {
		t.Fatalf("the batch did not land: seq %s", before)
	}
	// Lapsed now: the next batch lands nothing.
	wantJSONError(t, n.do("POST", "/t/a/batch", batch), 503)
	if got := strings.TrimSpace(string(n.do("GET", "/t/a/c?count", "").Body)); got != `{"count":2}` {
		t.Fatalf("rows after the batches: %s", got)
	}
}

// A promotion asked by a router of another directory than the one leasing
// the node, or of an earlier epoch or term of it, is refused whatever its
// force: the router no longer owns the node's region (its request was held
// on the network and read late). One of the leasing directory, or naming
// none (an operator's by hand), is judged as ever.
func TestPromoteFencedByTheLease(t *testing.T) {
	clock := &jumpClock{now: time.Hour}
	n := startNode(t, func(c *Config) { c.Lease = true; c.LeaseClock = clock })
	n.mkTenant("a")
	g := lease.Grant{Term: 3, Router: "r", N: 1, MS: 3000, Tenants: []string{"a"}, List: lease.ListID([]string{"a"}),
		Dir: "region:eu", Epoch: 2, Handoff: &lease.Handoff{From: "global", Force: true}}
	if r, a := n.grant(g); r.Status != 200 || !a.Took || a.Dir != "region:eu" || a.Epoch != 2 {
		t.Fatalf("grant: %d %s", r.Status, r.Body)
	}
	if b, err := os.ReadFile(filepath.Join(n.cfg.Dir, lease.TermFileName)); err != nil || strings.TrimSpace(string(b)) != "3 region:eu 2" {
		t.Fatalf("binding on disk: %q %v", b, err)
	}
	for _, body := range []string{
		`{"force": true, "dir": "global", "epoch": 9, "term": 9}`,
		`{"force": true, "dir": "region:eu", "epoch": 1, "term": 3}`,
		`{"force": true, "dir": "region:eu", "epoch": 2, "term": 2}`,
	} {
		r := n.admin("POST", "tenants/a/promote", body)
		if m := wantJSONError(t, r, 409); !strings.Contains(m["error"].(string), "leased by region:eu") || m["leased_by"] != "region:eu" {
			t.Fatalf("promotion %s: %d %s", body, r.Status, r.Body)
		}
	}
	for _, body := range []string{`{"dir": "region:eu", "epoch": 2, "term": 3}`, `{}`} {
		if r := n.admin("POST", "tenants/a/promote", body); r.Status != 200 {
			t.Fatalf("promotion %s: %d %s", body, r.Status, r.Body)
		}
	}
	if st := n.admin("GET", "lease", ""); !strings.Contains(string(st.Body), `"dir":"region:eu"`) || !strings.Contains(string(st.Body), `"epoch":2`) {
		t.Fatalf("lease status: %s", st.Body)
	}
}
