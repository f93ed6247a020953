package node

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
)

// setQuota sets tenant's quota through /_admin/.
func setQuota(t *testing.T, n *testNode, tenant, body string) {
	t.Helper()
	if r := n.admin("PUT", "tenants/"+tenant+"/quota", body); r.Status != 200 {
		t.Fatalf("quota %s: %d %s", body, r.Status, r.Body)
	}
}

// batchBody is NDJSON, one /query body a line.
func batchBody(queries ...string) string {
	var b strings.Builder
	for _, q := range queries {
		line, _ := json.Marshal(map[string]any{"query": q, "params": []any{}})
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// TestBytesQuotaCompactWritesAgain: a tenant at its bytes quota deletes
// rows (which the quota lets through, the file growing by their
// tombstones), is still full, compacts, and writes again; by the
// statement, by the admin route and by a /batch holding a compact.
func TestBytesQuotaCompactWritesAgain(t *testing.T) {
	n := startNode(t, nil)
	n.mkTenant("a")
	n.q("a", "create collection c (n int, body text)")
	body := strings.Repeat("x", 400)
	setQuota(t, n, "a", `{"bytes": 20000}`)
	fill := func() int {
		t.Helper()
		for i := 0; ; i++ {
			r := n.query("a", "put c {n: $1, body: $2}", i, body)
			if r.Status == 507 {
				return i
			}
			if r.Status != 200 {
				t.Fatalf("put %d: %d %s", i, r.Status, r.Body)
			}
		}
	}
	rows := fill()
	if rows < 10 {
		t.Fatalf("full after %d rows", rows)
	}
	n.q("a", "del c where n >= 0")
	if r := n.query("a", "put c {n: 1, body: $1}", body); r.Status != 507 {
		t.Fatalf("a put after the delete, before a compact: %d %s", r.Status, r.Body)
	}
	r := n.q("a", "compact")
	var msg map[string]string
	if err := json.Unmarshal(r.Body, &msg); err != nil || !strings.HasPrefix(msg["message"], "compacted: ") {
		t.Fatalf("compact answered %s", r.Body)
	}
	// A cursor from before the compact is gone, and says so.
	wantJSONError(t, n.do("GET", "/t/a/_changes?since=1", ""), 410)
	if got := fill(); got < rows-1 {
		t.Fatalf("after the compact %d rows fit, %d before", got, rows)
	}

	// The admin route does the same, and says the sizes.
	n.q("a", "del c where n >= 0")
	r = n.admin("POST", "tenants/a/compact", "")
	ans := r.Obj(t)
	if r.Status != 200 || ans["tenant"] != "a" {
		t.Fatalf("admin compact: %d %s", r.Status, r.Body)
	}
	was, _ := strconv.Atoi(string(ans["was"].(json.Number)))
	now, _ := strconv.Atoi(string(ans["bytes"].(json.Number)))
	if now >= was || int64(now) != fileSize(t, n, "a") {
		t.Fatalf("admin compact: %s (file %d)", r.Body, fileSize(t, n, "a"))
	}
	fill()

	// A /batch holding one: the delete, the compact and a write, in order.
	r = n.do("POST", "/t/a/batch", batchBody("del c where n >= 0", "compact", `put c {n: 7, body: "back"}`))
	if r.Status != 200 || !strings.HasPrefix(string(r.Body), `{"ok":3,`) || r.Header.Get("Fenec-Seq") == "" {
		t.Fatalf("a batch holding a compact: %d %s", r.Status, r.Body)
	}
	if got := strings.TrimSpace(string(n.do("GET", "/t/a/c?count", "").Body)); got != `{"count":1}` {
		t.Fatalf("after the batch: %s", got)
	}

	// The wrong way round: hostile and careless calls.
	wantJSONError(t, n.do("POST", "/_admin/tenants/a/compact", ""), 401)
	wantJSONError(t, n.admin("GET", "tenants/a/compact", ""), 405)
	wantJSONError(t, n.admin("POST", "tenants/nosuch/compact", ""), 404)
	wantJSONError(t, n.query("a", "compact c"), 400)
	e := wantJSONError(t, n.do("POST", "/t/a/batch", batchBody("put c {n: 8}", "compact"), "Idempotency-Key", "k1"), 400)
	if !strings.Contains(e["error"].(string), "key") {
		t.Fatalf("a keyed batch holding a compact: %v", e)
	}
	wantJSONError(t, n.do("POST", "/t/a/batch", batchBody("compact"), "Fenec-Wait", "100"), 400)
	if got := strings.TrimSpace(string(n.do("GET", "/t/a/c?count", "").Body)); got != `{"count":1}` {
		t.Fatalf("refused batches wrote: %s", got)
	}
}

// TestBatchWithCompactRefusedPartWay: a /batch holding a compact runs its
// statements one by one. Refused to come back (503) after one of them
// landed, it is answered 500 with outcome unknown and the landed
// statement's seq and history, which a read then asks for; a definite
// failure after a landing says what landed; one before any says none did.
func TestBatchWithCompactRefusedPartWay(t *testing.T) {
	n := startNode(t, nil)
	n.mkTenant("a")
	n.q("a", "create collection c (n int @unique)")
	freezeAt := -1
	hook := func(name string, at int) {
		if at == freezeAt {
			if r := n.admin("POST", "tenants/"+name+"/freeze", ""); r.Status != 200 {
				t.Errorf("freeze: %d %s", r.Status, r.Body)
			}
		}
	}
	n.s.reg.beforeEach.Store(&hook)

	freezeAt = 2
	r := n.do("POST", "/t/a/batch", batchBody("put c {n: 1}", "compact", "put c {n: 2}"))
	e := wantJSONError(t, r, 500)
	if e["outcome"] != "unknown" || e["completed"] != json.Number("2") || e["at"] != json.Number("2") || e["seq"] == nil || e["history"] == nil {
		t.Fatalf("refused after a landing: %s", r.Body)
	}
	if r.Header.Get("Retry-After") != "" {
		t.Fatalf("told to come back as if nothing ran: %v", r.Header)
	}
	seq, history := string(e["seq"].(json.Number)), string(e["history"].(json.Number))
	read := n.do("GET", "/t/a/c?select=n", "", "Fenec-After", seq, "Fenec-History", history)
	if read.Status != 200 || strings.TrimSpace(string(read.Body)) != `[{"n":1}]` {
		t.Fatalf("reading back what landed: %d %s", read.Status, read.Body)
	}
	n.admin("POST", "tenants/a/thaw", "")

	// Refused before anything landed: as a block is, come back later.
	freezeAt = 0
	r = n.do("POST", "/t/a/batch", batchBody("compact", "put c {n: 3}"))
	e = wantJSONError(t, r, 503)
	if e["completed"] != json.Number("1") || e["at"] != json.Number("1") || e["outcome"] != nil || r.Header.Get("Retry-After") == "" {
		t.Fatalf("refused with nothing landed: %v %s", r.Header, r.Body)
	}
	n.admin("POST", "tenants/a/thaw", "")

	// A definite failure after a landing: what landed is said.
	freezeAt = -1
	r = n.do("POST", "/t/a/batch", batchBody("put c {n: 4}", "compact", "put c {n: 1}"))
	e = wantJSONError(t, r, 409)
	if e["completed"] != json.Number("2") || e["seq"] == nil || e["outcome"] != nil {
		t.Fatalf("a taken value after a landing: %s", r.Body)
	}
	if got := strings.TrimSpace(string(n.do("GET", "/t/a/c?select=n&order=n.asc", "").Body)); got != `[{"n":1},{"n":4}]` {
		t.Fatalf("rows: %s", got)
	}
}

// TestRefusedSpillLeavesNoBytes: a block past the 16 MB spill size whose
// first piece fits the bytes quota and whose second does not is refused
// 507 and leaves the file as it was: no dead bytes charged to the quota,
// and a write that fits still lands.
func TestRefusedSpillLeavesNoBytes(t *testing.T) {
	n := startNode(t, nil)
	n.mkTenant("a")
	n.q("a", "create collection big (s text)")
	size := fileSize(t, n, "a")
	setQuota(t, n, "a", `{"bytes": `+strconv.FormatInt(size+20<<20, 10)+`}`)
	docs := make([]map[string]string, 24)
	for i := range docs {
		docs[i] = map[string]string{"s": strings.Repeat(string(rune('a'+i)), 1<<20)}
	}
	body, _ := json.Marshal(docs)
	r := n.do("POST", "/t/a/big", string(body))
	wantJSONError(t, r, 507)
	if got := fileSize(t, n, "a"); got != size {
		t.Fatalf("the refused block left %d bytes in the file", got-size)
	}
	usage := n.admin("GET", "tenants/a/usage", "").Obj(t)
	if usage["bytes"] != json.Number(strconv.FormatInt(size, 10)) {
		t.Fatalf("usage after the refused block: %v (file %d)", usage, size)
	}
	body, _ = json.Marshal(docs[:10])
	if r := n.do("POST", "/t/a/big", string(body)); r.Status != 201 {
		t.Fatalf("a block that fits: %d %s", r.Status, r.Body)
	}
}

// TestCloseNeverGrowsASmallFile: a graceful restart leaves a small file as
// it was (a checkpoint would add an image to records it keeps anyway) but
// for the bound a clean close writes under --sync MS, a few bytes saying
// it lost nothing.
func TestCloseNeverGrowsASmallFile(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, func(c *Config) { c.Dir = dir })
	people(t, n)
	n.q("a", "del c where n = 2")
	before := fileSize(t, n, "a")
	if err := n.s.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "a.fenec"))
	const closeBound = 16 // a frame's head, its kind and seqs, and the seq
	if err != nil || fi.Size() > before+closeBound {
		t.Fatalf("a graceful close took the file from %d to %v bytes (%v)", before, fi.Size(), err)
	}
	n = startNode(t, func(c *Config) { c.Dir = dir })
	if got := strings.TrimSpace(string(n.do("GET", "/t/a/c?count", "").Body)); got != `{"count":2}` {
		t.Fatalf("after the restart: %s", got)
	}
}

// TestIdleCloseShrinks: a tenant closed for being idle is checkpointed as
// it closes where that makes its file smaller; one only read is left as
// it was, byte for byte.
func TestIdleCloseShrinks(t *testing.T) {
	n := startNode(t, func(c *Config) { c.IdleClose = 100 * time.Millisecond })
	n.s.reg.engineOpts.RetainBytes = 4 << 10 // records a checkpoint keeps
	n.mkTenant("a")
	n.q("a", "create collection c (n int, body text)")
	for i := range 60 {
		n.q("a", "put c {n: $1, body: $2}", i, strings.Repeat("y", 200))
	}
	n.q("a", "del c where n >= 3")
	full := fileSize(t, n, "a")
	testkit.Eventually(t, 10*time.Second, func() bool { return closedOut(n, "a") }, "a closes idle")
	// Whenever the janitor closed it (a slow machine may have it close
	// between two of the writes too), the last close kept at most the
	// retained records and an image of three rows.
	if shrunk := fileSize(t, n, "a"); shrunk >= 7000 {
		t.Fatalf("idle close left %d bytes of %d", shrunk, full)
	}
	before, err := os.ReadFile(filepath.Join(n.cfg.Dir, "a.fenec"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(n.do("GET", "/t/a/c?count", "").Body)); got != `{"count":3}` {
		t.Fatalf("after the idle close: %s", got)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return closedOut(n, "a") }, "a closes idle again")
	after, err := os.ReadFile(filepath.Join(n.cfg.Dir, "a.fenec"))
	if err != nil || string(after) != string(before) {
		t.Fatalf("a tenant only read was rewritten as it closed (%d bytes, was %d) %v", len(after), len(before), err)
	}
}

// closedOut says whether tenant is closed and gone from the registry (not
// only on its way out).
func closedOut(n *testNode, tenant string) bool {
	n.s.reg.mu.Lock()
	defer n.s.reg.mu.Unlock()
	return n.s.reg.tenants[tenant] == nil
}
