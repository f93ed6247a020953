package node

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
)

const claimQuery = `{"query":"set jobs {owner: $1} where owner is null order id limit 1 returning *","params":["%s"]}`

func claim(owner string) string { return strings.Replace(claimQuery, "%s", owner, 1) }

// jobsTenant makes tenant "a" with an empty jobs queue.
func jobsTenant(t *testing.T, n *testNode) {
	t.Helper()
	n.mkTenant("a")
	n.q("a", "create collection jobs (task text, owner text)")
}

// claimed is the task a claim answer took ("" for none).
func claimed(t *testing.T, r *resp) string {
	t.Helper()
	if r.Status != 200 {
		t.Fatalf("claim: %d %s", r.Status, r.Body)
	}
	var rows []map[string]any
	if err := json.Unmarshal(r.Body, &rows); err != nil {
		t.Fatalf("claim answer %s", r.Body)
	}
	if len(rows) == 0 {
		return ""
	}
	return rows[0]["task"].(string)
}

func TestFenecWaitClaim(t *testing.T) {
	n := startNode(t, nil)
	jobsTenant(t, n)
	// Nothing to take and no wait: answered at once with nothing.
	if got := claimed(t, n.do("POST", "/t/a/query", claim("w0"))); got != "" {
		t.Fatalf("took %q from an empty queue", got)
	}
	// Held, then woken by a later put.
	done := make(chan *resp, 1)
	go func() { done <- n.do("POST", "/t/a/query", claim("w1"), "Fenec-Wait", "20000") }()
	testkit.Eventually(t, 5*time.Second, func() bool { return heldRequests(n) == 1 }, "the claim is held")
	n.q("a", `put jobs {task: "t1"}`)
	r := <-done
	if got := claimed(t, r); got != "t1" {
		t.Fatalf("woken claim took %q", got)
	}
	if r.Header.Get("Fenec-Seq") == "" {
		t.Fatal("a claim that took a job carries no Fenec-Seq")
	}
	// The wait ends: answered with what it took, nothing.
	r = n.do("POST", "/t/a/query", claim("w2"), "Fenec-Wait", "30")
	if got := claimed(t, r); got != "" || r.Header.Get("Fenec-Seq") != "" {
		t.Fatalf("timed-out claim took %q", got)
	}
	wantJSONError(t, n.do("POST", "/t/a/query", claim("w3"), "Fenec-Wait", "soon"), 400)
}

func TestFenecWaitArrivalOrder(t *testing.T) {
	n := startNode(t, nil)
	jobsTenant(t, n)
	first := make(chan *resp, 1)
	second := make(chan *resp, 1)
	go func() { first <- n.do("POST", "/t/a/query", claim("first"), "Fenec-Wait", "20000") }()
	testkit.Eventually(t, 5*time.Second, func() bool { return heldRequests(n) == 1 }, "the first claim is held")
	go func() { second <- n.do("POST", "/t/a/query", claim("second"), "Fenec-Wait", "20000") }()
	testkit.Eventually(t, 5*time.Second, func() bool { return heldRequests(n) == 2 }, "both claims are held")
	n.q("a", `put jobs {task: "j1"}`)
	if got := claimed(t, <-first); got != "j1" {
		t.Fatalf("first waiter took %q", got)
	}
	select {
	case r := <-second:
		t.Fatalf("second waiter answered before a second job: %s", r.Body)
	default:
	}
	n.q("a", `put jobs {task: "j2"}`)
	if got := claimed(t, <-second); got != "j2" {
		t.Fatalf("second waiter took %q", got)
	}
	rows := n.q("a", "get jobs where owner is not null order id").JSON(t).([]any)
	if len(rows) != 2 || rows[0].(map[string]any)["owner"] != "first" || rows[1].(map[string]any)["owner"] != "second" {
		t.Fatalf("owners %v", rows)
	}
}

func TestFenecWaitKeyedClaim(t *testing.T) {
	n := startNode(t, nil)
	jobsTenant(t, n)
	done := make(chan *resp, 1)
	go func() {
		done <- n.do("POST", "/t/a/query", claim("k"), "Fenec-Wait", "20000", "Idempotency-Key", "claim-1")
	}()
	testkit.Eventually(t, 5*time.Second, func() bool { return heldRequests(n) == 1 }, "the keyed claim is held")
	n.q("a", `put jobs [{task: "a1"}, {task: "a2"}]`)
	r := <-done
	if got := claimed(t, r); got != "a1" {
		t.Fatalf("keyed claim took %q", got)
	}
	again := n.do("POST", "/t/a/query", claim("k"), "Fenec-Wait", "20000", "Idempotency-Key", "claim-1")
	if again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(r.Body) {
		t.Fatalf("retry of a keyed claim: %q %s", again.Header.Get("Idempotent-Replayed"), again.Body)
	}
	if got := strings.TrimSpace(string(n.q("a", "get jobs where owner = \"k\" count").Body)); got != `{"count":1}` {
		t.Fatalf("keyed claim took %s jobs", got)
	}
}

func TestFenecWaitShutdown(t *testing.T) {
	n := startNode(t, nil)
	jobsTenant(t, n)
	done := make(chan *resp, 1)
	go func() { done <- n.do("POST", "/t/a/query", claim("w"), "Fenec-Wait", "30000") }()
	testkit.Eventually(t, 5*time.Second, func() bool { return heldRequests(n) == 1 }, "the claim is held")
	closed := make(chan error, 1)
	go func() { closed <- n.s.Close() }()
	if got := claimed(t, <-done); got != "" {
		t.Fatalf("claim at shutdown took %q", got)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

func TestFenecWaitTenantDeleted(t *testing.T) {
	n := startNode(t, nil)
	jobsTenant(t, n)
	done := make(chan *resp, 1)
	go func() { done <- n.do("POST", "/t/a/query", claim("w"), "Fenec-Wait", "30000") }()
	testkit.Eventually(t, 5*time.Second, func() bool { return heldRequests(n) == 1 }, "the claim is held")
	if r := n.admin("DELETE", "tenants/a", ""); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	r := <-done
	wantJSONError(t, r, 503)
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
}

func TestFenecWaitWakesAtTime(t *testing.T) {
	n := startNode(t, nil)
	n.mkTenant("a")
	n.q("a", "create collection jobs (task text, owner text, due timestamp)")
	n.q("a", `put jobs {task: "later", due: now() + 300}`)
	q := `{"query":"set jobs {owner: $1} where owner is null and due <= now() limit 1 returning *","params":["w"]}`
	// No write lands meanwhile: only the job's due time can wake it.
	r := n.do("POST", "/t/a/query", q, "Fenec-Wait", "20000")
	if got := claimed(t, r); got != "later" {
		t.Fatalf("claim took %q", got)
	}
}
