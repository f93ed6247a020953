package tests

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fenec-go/fenec/tests/cluster"
)

// same fails t unless the router's answer and the node's are alike: status,
// body, and the headers a client reads.
func same(t *testing.T, what string, via, direct *cluster.Resp) {
	t.Helper()
	if via.Err != nil || direct.Err != nil {
		t.Fatalf("%s: via router %s, direct %s", what, via, direct)
	}
	if via.Status != direct.Status || string(via.Body) != string(direct.Body) {
		t.Fatalf("%s: via router %s, direct %s", what, via, direct)
	}
	for _, h := range []string{"Content-Type", "Content-Length", "Fenec-Next", "Allow", "Retry-After"} {
		if via.Header.Get(h) != direct.Header.Get(h) {
			t.Fatalf("%s: header %s via router %q, direct %q", what, h, via.Header.Get(h), direct.Header.Get(h))
		}
	}
}

// TestForwardEveryRoute sends every data route through the router and
// checks it against the node's own answer: reads compared side by side,
// writes seen on the node, the subscription streamed, HEAD passed on.
func TestForwardEveryRoute(t *testing.T) {
	r, n := oneNode(t)
	c, d := r.Client(), NewDirect(t, n)
	r.Place("a", n)

	// POST /query: DDL, a write, a read, a count.
	wantStatus(t, c.Query("a", "create collection c (name text @text, n int @sorted, v vector<2> @hnsw(l2))"), 200, "create")
	w := c.Query("a", `put c [{name: "ann", n: 1, v: [0, 1]}, {name: "bob", n: 2, v: [1, 0]}]`)
	wantStatus(t, w, 200, "put")
	if w.Header.Get("Fenec-Seq") != "3" || w.Header.Get("X-Request-Id") == "" {
		t.Fatalf("put headers: %v", w.Header)
	}
	for _, q := range []string{"get c order n desc", "get c count", "get c select id near v [0.9, 0.1] limit 1", "get c match name 'bob'", "get nothere", "get c wher"} {
		same(t, q, c.Query("a", q), d.Query("a", q))
	}

	// POST /batch: one block.
	batch := `{"query":"put c {name: $1, n: 3}","params":["cy"]}` + "\n" + `{"query":"get c where n = 3"}` + "\n"
	b := c.Do("POST", "/t/a/batch", batch)
	wantStatus(t, b, 200, "batch")
	if b.Header.Get("Fenec-Seq") != "4" || !strings.Contains(string(b.Body), `"ok":2`) {
		t.Fatalf("batch: %s %v", b.Body, b.Header)
	}

	// REST: insert, read by filter, update, delete.
	ins := c.Do("POST", "/t/a/c", `[{"name":"dee","n":4},{"name":"eve","n":5}]`)
	wantStatus(t, ins, 201, "insert")
	if strings.TrimSpace(string(ins.Body)) != `{"ids":[4,5],"inserted":2}` {
		t.Fatalf("insert: %s", ins.Body)
	}
	for _, p := range []string{"/t/a/c?n=gt.2&order=n.desc&select=name", "/t/a/c?n=gt.1&count", "/t/a/c?n=bogus.1", "/t/a/none"} {
		same(t, "GET "+p, c.Do("GET", p, nil), d.Do("GET", p, nil))
	}
	wantStatus(t, c.Do("PATCH", "/t/a/c?n=gte.4", `{"name":"late"}`), 200, "patch")
	wantStatus(t, c.Do("DELETE", "/t/a/c?n=eq.5", nil), 200, "delete")
	if got := d.Do("GET", "/t/a/c?name=eq.late&select=n", nil); strings.TrimSpace(string(got.Body)) != `[{"n":4}]` {
		t.Fatalf("after patch and delete, on the node: %s", got.Body)
	}

	// HEAD goes on as HEAD: the node's status and headers, no body.
	for _, p := range []string{"/t/a/c", "/t/a/_changes"} {
		via, direct := c.Do("HEAD", p, nil), d.Do("HEAD", p, nil)
		same(t, "HEAD "+p, via, direct)
		wantStatus(t, via, 200, "HEAD "+p)
		if via.Header.Get("Content-Type") != "application/json" && p == "/t/a/c" {
			t.Fatalf("HEAD %s: content type %q", p, via.Header.Get("Content-Type"))
		}
		if len(via.Body) != 0 {
			t.Fatalf("HEAD %s: a body came back: %q", p, via.Body)
		}
	}

	// The change feed, with its cursor header.
	feed := "/t/a/_changes?since=2&limit=3"
	same(t, "GET "+feed, c.Do("GET", feed, nil), d.Do("GET", feed, nil))

	// An Idempotency-Key's replay passes back as the node made it.
	k1 := c.Do("POST", "/t/a/c", `{"name":"keyed","n":9}`, "Idempotency-Key", "k-1")
	k2 := c.Do("POST", "/t/a/c", `{"name":"keyed","n":9}`, "Idempotency-Key", "k-1")
	wantStatus(t, k1, 201, "keyed insert")
	if k2.Status != 201 || string(k2.Body) != string(k1.Body) || k2.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %s %v", k2, k2.Header)
	}
	wantError(t, c.Do("POST", "/t/a/c", `{"name":"other"}`, "Idempotency-Key", "k-1"), 422, "key reused")

	// The client's request id reaches the node and comes back.
	if got := c.Do("GET", "/t/a/c?count", nil, "X-Request-Id", "e2e-req-42"); got.Header.Get("X-Request-Id") != "e2e-req-42" {
		t.Fatalf("request id: %q", got.Header.Get("X-Request-Id"))
	}

	// A subscription streams: its seed, then each change as it lands.
	s, res := c.Subscribe("/t/a/c/changes?n=gte.9")
	if s == nil {
		t.Fatalf("subscribe: %s", res)
	}
	if ct := s.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("subscription Content-Type %q", ct)
	}
	ev, err := s.Next()
	if err != nil || ev.Name != "seed" || !strings.Contains(ev.Data, `"keyed"`) {
		t.Fatalf("seed: %+v %v", ev, err)
	}
	wantStatus(t, c.Do("POST", "/t/a/c", `{"name":"streamed","n":10}`), 201, "insert while subscribed")
	ev, err = s.Next()
	if err != nil || ev.Name != "change" || !strings.Contains(ev.Data, `"streamed"`) {
		t.Fatalf("change: %+v %v", ev, err)
	}
	var change struct {
		Seq uint64 `json:"seq"`
	}
	if err := json.Unmarshal([]byte(ev.Data), &change); err != nil || change.Seq == 0 {
		t.Fatalf("change data %q: %v", ev.Data, err)
	}
	s.Close()

	// The router's own refusals.
	wantError(t, c.Query("ghost", "get c"), 404, "unknown tenant")
}
