package node

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
)

func TestAdminTenants(t *testing.T) {
	audit := filepath.Join(t.TempDir(), "audit.log")
	n := startNode(t, func(c *Config) { c.Audit = audit })
	n.mkTenant("b")
	people(t, n)
	wantJSONError(t, n.admin("PUT", "tenants/a", ""), 409)
	wantJSONError(t, n.admin("PUT", "tenants/Bad", ""), 400)
	if r := n.admin("GET", "tenants", ""); strings.TrimSpace(string(r.Body)) != `["a","b"]` {
		t.Fatalf("tenants: %d %s", r.Status, r.Body)
	}
	sizes := n.admin("GET", "sizes", "").Obj(t)
	if len(sizes) != 2 || sizes["a"] != json.Number(itoa(fileSize(t, n, "a"))) {
		t.Fatalf("sizes %v", sizes)
	}
	stats := n.admin("GET", "stats", "").Obj(t)
	if stats["tenants"] != json.Number("2") || stats["open"] != json.Number("2") {
		t.Fatalf("stats %v", stats)
	}
	if r := n.admin("DELETE", "tenants/b", ""); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if _, err := os.Stat(filepath.Join(n.cfg.Dir, "b.fenec")); !os.IsNotExist(err) {
		t.Fatalf("deleted tenant's file: %v", err)
	}
	wantJSONError(t, n.admin("DELETE", "tenants/b", ""), 404)
	wantJSONError(t, n.do("GET", "/t/b/c", ""), 404)
	wantJSONError(t, n.admin("GET", "nothing", ""), 404)
	wantJSONError(t, n.admin("POST", "tenants/a/melt", ""), 404)
	n.s.Close()
	b, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"what":"create","tenant":"b"`, `"what":"delete","tenant":"b"`, `"status":409`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("audit log lacks %s:\n%s", want, b)
		}
	}
}

func itoa(n int64) string { return strings.TrimSpace(string(must(json.Marshal(n)))) }

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestFreeze(t *testing.T) {
	n := startNode(t, nil)
	people(t, n)
	if r := n.admin("POST", "tenants/a/freeze", ""); r.Status != 200 {
		t.Fatalf("freeze: %d %s", r.Status, r.Body)
	}
	seq, size := n.seq("a"), fileSize(t, n, "a")
	r := n.query("a", `put c {name: "no"}`)
	wantJSONError(t, r, 503)
	if r.Header.Get("Retry-After") != "1" {
		t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
	}
	wantJSONError(t, n.do("POST", "/t/a/c", `{"name":"no"}`), 503)
	if r := n.do("GET", "/t/a/c?count", ""); r.Status != 200 || strings.TrimSpace(string(r.Body)) != `{"count":3}` {
		t.Fatalf("read while frozen: %d %s", r.Status, r.Body)
	}
	if n.seq("a") != seq || fileSize(t, n, "a") != size {
		t.Fatal("a frozen tenant took a write")
	}
	// A frozen tenant stays open, however idle.
	if r := n.admin("POST", "tenants/a/freeze", ""); r.Status != 200 {
		t.Fatalf("freeze twice: %d", r.Status)
	}
	if r := n.admin("POST", "tenants/a/thaw", ""); r.Status != 200 {
		t.Fatalf("thaw: %d %s", r.Status, r.Body)
	}
	n.q("a", `put c {name: "yes"}`)
	if r := n.admin("POST", "tenants/a/thaw", ""); r.Status != 200 {
		t.Fatalf("thaw twice: %d", r.Status)
	}
	wantJSONError(t, n.admin("POST", "tenants/nope/freeze", ""), 404)
}

func TestFreezeWaitsForWritesInFlight(t *testing.T) {
	n := startNode(t, nil)
	people(t, n)
	tn, err := n.s.reg.acquire(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	defer n.s.reg.release(tn)
	tn.writes.add() // a write in flight
	froze := make(chan *resp, 1)
	go func() { froze <- n.admin("POST", "tenants/a/freeze", "") }()
	testkit.Eventually(t, 5*time.Second, func() bool { return tn.isFrozen() }, "the freeze took effect")
	select {
	case r := <-froze:
		t.Fatalf("freeze answered %d before the write in flight finished", r.Status)
	default:
	}
	tn.writes.done()
	if r := <-froze; r.Status != 200 {
		t.Fatalf("freeze: %d %s", r.Status, r.Body)
	}
}

func TestImageOutAndIn(t *testing.T) {
	n := startNode(t, nil)
	people(t, n)
	res, err := n.client.Do(must(http.NewRequest("GET", n.url+"/_admin/tenants/a/file", nil)))
	if err != nil {
		t.Fatal(err)
	}
	wantJSONError(t, &resp{Status: res.StatusCode, Header: res.Header, Body: must(io.ReadAll(res.Body))}, 401)
	res.Body.Close()
	r := n.admin("GET", "tenants/a/file", "")
	if r.Status != 200 || r.Header.Get("Content-Type") != "application/octet-stream" || len(r.Body) == 0 {
		t.Fatalf("image out: %d %q %d bytes", r.Status, r.Header.Get("Content-Type"), len(r.Body))
	}
	image := r.Body
	put := func(name string, body []byte) *resp {
		req := must(http.NewRequest("PUT", n.url+"/_admin/tenants/"+name+"/file", bytes.NewReader(body)))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		res, err := n.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		return &resp{Status: res.StatusCode, Header: res.Header, Body: must(io.ReadAll(res.Body))}
	}
	if r := put("copy", image); r.Status != 201 {
		t.Fatalf("install: %d %s", r.Status, r.Body)
	}
	if a, b := n.do("GET", "/t/a/c?order=id", "").Body, n.do("GET", "/t/copy/c?order=id", "").Body; string(a) != string(b) {
		t.Fatalf("copy answers %s, source %s", b, a)
	}
	if a, b := seqOf(t, n, "a"), seqOf(t, n, "copy"); a != b {
		t.Fatalf("copy seq %d, source %d", b, a)
	}
	wantJSONError(t, put("copy", image), 409)
	wantJSONError(t, put("cut", image[:len(image)/2]), 400)
	wantJSONError(t, put("junk", []byte("not an image at all")), 400)
	for _, name := range []string{"cut", "junk"} {
		if _, err := os.Stat(filepath.Join(n.cfg.Dir, name+".fenec")); !os.IsNotExist(err) {
			t.Fatalf("a refused image left %s: %v", name, err)
		}
	}
	wantJSONError(t, n.admin("GET", "tenants/nope/file", ""), 404)
}

func TestIdleClose(t *testing.T) {
	n := startNode(t, func(c *Config) { c.IdleClose = 50 * time.Millisecond })
	people(t, n)
	testkit.Eventually(t, 5*time.Second, func() bool { return n.s.reg.openCount() == 0 }, "idle tenant closed")
	// A subscription holds it open.
	s := n.subscribe("/t/a/c/changes")
	s.mustNext(t, "seed")
	testkit.Eventually(t, 5*time.Second, func() bool { return n.s.reg.openCount() == 1 }, "opened again")
	tn, err := n.s.reg.acquire(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	n.s.reg.release(tn)
	testkit.Eventually(t, 5*time.Second, func() bool {
		n.s.reg.mu.Lock()
		defer n.s.reg.mu.Unlock()
		return time.Since(tn.lastUsed) > 2*n.cfg.IdleClose
	}, "the tenant is untouched for idle-close")
	n.s.reg.closeIdle()
	if n.s.reg.openCount() != 1 {
		t.Fatal("a tenant with a subscription was closed")
	}
	if r := n.do("GET", "/t/a/c?count", ""); r.Status != 200 {
		t.Fatalf("read: %d", r.Status)
	}
}

func TestMemoryCeiling(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, func(c *Config) { c.Dir = dir })
	for _, name := range []string{"a", "b"} {
		n.mkTenant(name)
		n.q(name, "create collection c (s text)")
		n.q(name, "put c $1", bigDocs(200))
	}
	memA, memB := tenantMemory(t, n, "a"), tenantMemory(t, n, "b")
	if err := n.s.Close(); err != nil {
		t.Fatal(err)
	}
	// Room for either tenant alone, not both.
	ceiling := max(memA, memB) + min(memA, memB)/2
	n2 := startNode(t, func(c *Config) { c.Dir = dir; c.MaxMemory = ceiling })
	if r := n2.do("GET", "/t/a/c?count", ""); r.Status != 200 {
		t.Fatalf("read a: %d %s", r.Status, r.Body)
	}
	if r := n2.do("GET", "/t/b/c?count", ""); r.Status != 200 {
		t.Fatalf("read b: %d %s", r.Status, r.Body)
	}
	testkit.Eventually(t, 5*time.Second, func() bool {
		return n2.s.reg.openCount() == 1 && n2.s.reg.isOpen("b")
	}, "least recently used tenant closed")
	// Past the ceiling alone: writes are refused 507, reads go on.
	if err := n2.s.Close(); err != nil {
		t.Fatal(err)
	}
	n3 := startNode(t, func(c *Config) { c.Dir = dir; c.MaxMemory = 1 })
	seq := seqOf(t, n3, "a")
	r := n3.query("a", `put c {s: "more"}`)
	wantJSONError(t, r, 507)
	if r := n3.query("a", "get c count"); r.Status != 200 || seqOf(t, n3, "a") != seq {
		t.Fatalf("past the ceiling: read %d %s, seq %d then %d", r.Status, r.Body, seq, seqOf(t, n3, "a"))
	}
}

// seqOf is a tenant's seq read from its open file.
func seqOf(t *testing.T, n *testNode, name string) uint64 {
	t.Helper()
	tn, err := n.s.reg.acquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer n.s.reg.release(tn)
	return tn.db.Seq()
}

// bigDocs is n documents of a kilobyte each.
func bigDocs(n int) []any {
	docs := make([]any, n)
	for i := range docs {
		docs[i] = map[string]any{"s": strings.Repeat("x", 1024)}
	}
	return docs
}

// tenantMemory is what the node counts a tenant's memory as.
func tenantMemory(t *testing.T, n *testNode, name string) int64 {
	t.Helper()
	tn, err := n.s.reg.acquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer n.s.reg.release(tn)
	return tn.db.MemoryBytes()
}

// isOpen says whether name is open now.
func (r *registry) isOpen(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.tenants[name]
	return t != nil && !t.closing && isClosed(t.ready) && t.openErr == nil
}
