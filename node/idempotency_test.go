package node

import (
	"fmt"

	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
)

// keyRows counts the stored idempotency keys.
func keyRows(t *testing.T, n *testNode) string {
	t.Helper()
	return strings.TrimSpace(string(n.q("a", "get _idempotency count").Body))
}

func TestIdempotencyKey(t *testing.T) {
	n := startNode(t, nil)
	people(t, n)
	body := `{"name":"kay","n":7}`
	first := n.do("POST", "/t/a/c", body, "Idempotency-Key", "k1")
	if first.Status != 201 || first.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first: %d %s", first.Status, first.Body)
	}
	again := n.do("POST", "/t/a/c", body, "Idempotency-Key", "k1")
	if again.Status != 201 || again.Header.Get("Idempotent-Replayed") != "true" ||
		string(again.Body) != string(first.Body) || again.Header.Get("Fenec-Seq") != first.Header.Get("Fenec-Seq") {
		t.Fatalf("replay: %d %q %s seq %q, first %s seq %q", again.Status, again.Header.Get("Idempotent-Replayed"),
			again.Body, again.Header.Get("Fenec-Seq"), first.Body, first.Header.Get("Fenec-Seq"))
	}
	if got := strings.TrimSpace(string(n.do("GET", "/t/a/c?name=eq.kay&count", "").Body)); got != `{"count":1}` {
		t.Fatalf("the write ran twice: %s", got)
	}
	// The key's seq is the block's: nothing else landed.
	if n.seq("a") != first.Header.Get("Fenec-Seq") {
		t.Fatalf("tenant seq %s, stored %s", n.seq("a"), first.Header.Get("Fenec-Seq"))
	}
	// The same key with another request.
	wantJSONError(t, n.do("POST", "/t/a/c", `{"name":"other"}`, "Idempotency-Key", "k1"), 422)
	wantJSONError(t, n.do("POST", "/t/a/c?x=1", body, "Idempotency-Key", "k1"), 422)
	// A failed write keeps no key: the retry runs (and fails) again.
	bad := `{"query":"put c {n: \"no\"}"}`
	wantJSONError(t, n.do("POST", "/t/a/query", bad, "Idempotency-Key", "k2"), 400)
	r := n.do("POST", "/t/a/query", bad, "Idempotency-Key", "k2")
	wantJSONError(t, r, 400)
	if r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatal("a failed write was replayed")
	}
	// Batch and query keep keys too.
	q := `{"query":"set c {owner: $1} where name = $2","params":["z","ann"]}`
	a1 := n.do("POST", "/t/a/query", q, "Idempotency-Key", "k3")
	a2 := n.do("POST", "/t/a/query", q, "Idempotency-Key", "k3")
	if a1.Status != 200 || a2.Header.Get("Idempotent-Replayed") != "true" || string(a1.Body) != string(a2.Body) {
		t.Fatalf("query key: %s / %s", a1.Body, a2.Body)
	}
	// A read keeps no key: it answers what is there now.
	n.do("POST", "/t/a/query", `{"query":"get c count"}`, "Idempotency-Key", "k4")
	n.q("a", `put c {name: "more"}`)
	r = n.do("POST", "/t/a/query", `{"query":"get c count"}`, "Idempotency-Key", "k4")
	if r.Header.Get("Idempotent-Replayed") != "" || strings.TrimSpace(string(r.Body)) != `{"count":5}` {
		t.Fatalf("keyed read: %q %s", r.Header.Get("Idempotent-Replayed"), r.Body)
	}
	if got := keyRows(t, n); got != `{"count":2}` {
		t.Fatalf("keys stored: %s", got)
	}
	wantJSONError(t, n.do("POST", "/t/a/c", body, "Idempotency-Key", strings.Repeat("k", 256)), 400)
}

func TestIdempotencyConcurrent(t *testing.T) {
	n := startNode(t, nil)
	people(t, n)
	const clients = 8
	var wg sync.WaitGroup
	answers := make([]*resp, clients)
	for i := range clients {
		wg.Go(func() { answers[i] = n.do("POST", "/t/a/c", `{"name":"once"}`, "Idempotency-Key", "same") })
	}
	wg.Wait()
	replayed := 0
	for _, r := range answers {
		if r.Status != 201 {
			t.Fatalf("answer %d %s", r.Status, r.Body)
		}
		if r.Header.Get("Idempotent-Replayed") == "true" {
			replayed++
		}
		if string(r.Body) != string(answers[0].Body) {
			t.Fatalf("answers differ: %s / %s", r.Body, answers[0].Body)
		}
	}
	if replayed != clients-1 {
		t.Fatalf("%d replayed, want %d", replayed, clients-1)
	}
	if got := strings.TrimSpace(string(n.do("GET", "/t/a/c?name=eq.once&count", "").Body)); got != `{"count":1}` {
		t.Fatalf("concurrent keyed writes ran %s times", got)
	}
}

func TestIdempotentReplayAfterDroppedConnection(t *testing.T) {
	n := startNode(t, nil)
	people(t, n)
	body := `{"name":"dropped","n":9}`
	conn, err := net.Dial("tcp", n.s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /t/a/c HTTP/1.1\r\nHost: x\r\nIdempotency-Key: drop-1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	conn.Close() // gone before reading the answer
	var r *resp
	testkit.Eventually(t, 10*time.Second, func() bool {
		r = n.do("POST", "/t/a/c", body, "Idempotency-Key", "drop-1")
		return r.Header.Get("Idempotent-Replayed") == "true"
	}, "the retry is answered from the key")
	if r.Status != 201 || !strings.Contains(string(r.Body), `"inserted":1`) {
		t.Fatalf("replayed answer %d %s", r.Status, r.Body)
	}
	if got := strings.TrimSpace(string(n.do("GET", "/t/a/c?name=eq.dropped&count", "").Body)); got != `{"count":1}` {
		t.Fatalf("the write exists %s times", got)
	}
}

func TestIdempotencyKeyExpires(t *testing.T) {
	n := startNode(t, func(c *Config) { c.IdempotencyTTL = time.Second })
	people(t, n)
	body := `{"name":"ttl"}`
	if r := n.do("POST", "/t/a/c", body, "Idempotency-Key", "short"); r.Status != 201 {
		t.Fatalf("first: %d %s", r.Status, r.Body)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		r := n.do("POST", "/t/a/c", body, "Idempotency-Key", "short")
		if r.Status != 201 {
			t.Fatalf("retry: %d %s", r.Status, r.Body)
		}
		return r.Header.Get("Idempotent-Replayed") == ""
	}, "the key expires and the request runs again")
	// And the key is kept again for the new run.
	if r := n.do("POST", "/t/a/c", body, "Idempotency-Key", "short"); r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("key not kept after its renewal: %d %s", r.Status, r.Body)
	}
}

func TestIdempotencyKeySeqOfAnyBlock(t *testing.T) {
	n := startNode(t, nil)
	people(t, n)
	// The create finds its collection and writes nothing.
	body := `{"query":"create collection if not exists c (name text)"}` + "\n" + `{"query":"put c {name: \"b\"}"}`
	first := n.do("POST", "/t/a/batch", body, "Idempotency-Key", "b1")
	if first.Status != 200 {
		t.Fatalf("batch: %d %s", first.Status, first.Body)
	}
	again := n.do("POST", "/t/a/batch", body, "Idempotency-Key", "b1")
	if again.Header.Get("Idempotent-Replayed") != "true" || again.Header.Get("Fenec-Seq") != first.Header.Get("Fenec-Seq") {
		t.Fatalf("replayed seq %q, first %q", again.Header.Get("Fenec-Seq"), first.Header.Get("Fenec-Seq"))
	}
}
