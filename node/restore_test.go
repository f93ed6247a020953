package node

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/wire"
)

// TestRestoreInPlace: PUT .../file?replace=true verifies the image beside
// the live tenant before it takes its place. A damaged image is refused
// and the tenant serves on, every row as it was; a good one replaces it;
// one for a tenant not there creates it; nothing is left beside them.
func TestRestoreInPlace(t *testing.T) {
	n := startNode(t, nil)
	people(t, n)
	n.q("a", "create collection notes (body text @text)")
	n.q("a", `put notes {body: "kept in the image"}`)
	img := n.admin("GET", "tenants/a/file", "")
	if img.Status != 200 {
		t.Fatalf("image: %d %s", img.Status, img.Body)
	}
	n.q("a", `put c {name: "after the image", n: 4}`)
	count := func(tenant string) string {
		t.Helper()
		return strings.TrimSpace(string(n.do("GET", "/t/"+tenant+"/c?count", "").Body))
	}

	good := string(img.Body)
	for what, body := range map[string]string{
		"cut short":      good[:len(good)-7],
		"a byte flipped": good[:len(good)/2] + string(good[len(good)/2]^0x55) + good[len(good)/2+1:],
		"not an image":   "hello",
		"empty":          "",
	} {
		r := n.do("PUT", "/_admin/tenants/a/file?replace=true", body, "Authorization", "Bearer "+adminToken)
		e := wantJSONError(t, r, 400)
		if msg := e["error"].(string); strings.Contains(msg, n.cfg.Dir) || strings.Contains(msg, "/") {
			t.Fatalf("an image %s: the refusal shows a path: %s", what, msg)
		}
		if got := count("a"); got != `{"count":4}` {
			t.Fatalf("a after an image %s: %s", what, got)
		}
	}
	ents, err := os.ReadDir(n.cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), restoreMark) || strings.HasSuffix(e.Name(), ".install") {
			t.Fatalf("a refused image left %s beside the tenant", e.Name())
		}
	}

	wantJSONError(t, n.do("PUT", "/_admin/tenants/a/file?replace=true", good), 401)
	wantJSONError(t, n.do("PUT", "/_admin/tenants/a/file?replace=maybe", good, "Authorization", "Bearer "+adminToken), 400)
	wantJSONError(t, n.do("PUT", "/_admin/tenants/a/file", good, "Authorization", "Bearer "+adminToken), 409)
	if got := count("a"); got != `{"count":4}` {
		t.Fatalf("a after refused calls: %s", got)
	}

	r := n.do("PUT", "/_admin/tenants/a/file?replace=true", good, "Authorization", "Bearer "+adminToken)
	if r.Status != 200 || r.Obj(t)["replaced"] != true {
		t.Fatalf("restore a: %d %s", r.Status, r.Body)
	}
	if got := count("a"); got != `{"count":3}` {
		t.Fatalf("a after its restore: %s", got)
	}
	if got := n.q("a", `get notes select id match body "image"`); !strings.Contains(string(got.Body), `"id":1`) {
		t.Fatalf("a's text index after its restore: %s", got.Body)
	}
	n.q("a", `put c {name: "after the restore"}`)

	r = n.do("PUT", "/_admin/tenants/b/file?replace=true", good, "Authorization", "Bearer "+adminToken)
	if r.Status != 201 || r.Obj(t)["replaced"] != false {
		t.Fatalf("restore b, not there: %d %s", r.Status, r.Body)
	}
	if got := count("b"); got != `{"count":3}` {
		t.Fatalf("b from a's image: %s", got)
	}
}

// TestRestoreLeftoversRemoved: the images a node was taking when it
// stopped — one a restore was verifying, an install's side file (a move
// onto the node killed midway, of a tenant it never held), the part of an
// image a copy was receiving — are removed at the next start; the tenants
// and every other file are left alone.
func TestRestoreLeftoversRemoved(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, func(c *Config) { c.Dir = dir })
	people(t, n)
	if err := n.s.Close(); err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, name := range []string{"a" + restoreMark + "0011223344556677", "moved" + fileExt + installExt, "a" + imagePartMark + "12345.part"} {
		left = append(left, dir+"/"+name)
		if err := os.WriteFile(dir+"/"+name, []byte("half an image"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	kept := []string{dir + "/notes.part", dir + "/Upper" + fileExt + installExt, dir + "/a" + fileExt}
	if err := os.WriteFile(kept[0], []byte("not fenec's"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kept[1], []byte("not a tenant's name"), 0o644); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, func(c *Config) { c.Dir = dir })
	for _, f := range left {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Fatalf("leftover %s: %v", f, err)
		}
	}
	for _, f := range kept {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("%s was not the node's to remove: %v", f, err)
		}
	}
	if got := strings.TrimSpace(string(n.do("GET", "/t/a/c?count", "").Body)); got != `{"count":3}` {
		t.Fatalf("a after the start: %s", got)
	}
}

// TestRestoreClientHangsUp: a client that sends half an image and hangs
// up leaves the tenant as it was and nothing beside it.
func TestRestoreClientHangsUp(t *testing.T) {
	audit := t.TempDir() + "/audit.log"
	n := startNode(t, func(c *Config) { c.Audit = audit })
	people(t, n)
	img := n.admin("GET", "tenants/a/file", "").Body
	n.q("a", `put c {name: "after the image"}`)
	conn, err := net.Dial("tcp", n.s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "PUT /_admin/tenants/a/file?replace=true HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n", adminToken, len(img))
	conn.Write(img[:len(img)/2])
	conn.Close()
	testkit.Eventually(t, 10*time.Second, func() bool {
		b, _ := os.ReadFile(audit)
		return strings.Contains(string(b), `"what":"restore"`)
	}, "the node refuses the half image")
	ents, err := os.ReadDir(n.cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), restoreMark) || strings.HasSuffix(e.Name(), ".install") {
			t.Fatalf("a half image left %s", e.Name())
		}
	}
	if got := strings.TrimSpace(string(n.do("GET", "/t/a/c?count", "").Body)); got != `{"count":4}` {
		t.Fatalf("a after a client hung up on its restore: %s", got)
	}
}

// zeroBody is size zero bytes, made as they are read and counted (the
// count read while the client's transport may still be reading).
type zeroBody struct {
	size int64
	read atomic.Int64
}

func (z *zeroBody) Read(p []byte) (int, error) {
	done := z.read.Load()
	if done >= z.size {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), z.size-done)]
	clear(p)
	z.read.Add(int64(len(p)))
	return len(p), nil
}

// putImage puts body as tenant t's image (?query), size bytes declared,
// and returns the answer.
func (n *testNode) putImage(t *testing.T, tenant, query string, body io.Reader, size int64) *resp {
	t.Helper()
	req, err := http.NewRequest("PUT", n.url+"/_admin/tenants/"+tenant+"/file?"+query, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = size
	req.Header.Set("Authorization", "Bearer "+adminToken)
	hc := &http.Client{Transport: &http.Transport{}} // a connection of its own: the node may close it
	defer hc.CloseIdleConnections()
	res, err := hc.Do(req)
	if err != nil {
		t.Fatalf("put image: %v", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return &resp{Status: res.StatusCode, Header: res.Header, Body: b}
}

// nothingStaged fails t if the node's directory holds anything an image
// put left: a restore's staged image, an install's side file.
func nothingStaged(t *testing.T, n *testNode) {
	t.Helper()
	ents, err := os.ReadDir(n.cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), restoreMark) || strings.HasSuffix(e.Name(), installExt) {
			t.Fatalf("an image put left %s in the node's directory", e.Name())
		}
	}
}

// 1.5 GB of zeros put as a tenant's image, in place of a live tenant or
// as a new one, is refused at its first bytes — "not a fenec tenant file"
// — having written nothing: the client is cut off after what the
// connection's buffers took, a few MB at most, not the 1.5 GB.
func TestImageOfZerosRefusedAtItsHead(t *testing.T) {
	n := startNode(t, nil)
	people(t, n)
	for _, query := range []string{"replace=true", ""} {
		tenant := "a"
		if query == "" {
			tenant = "fresh"
		}
		z := &zeroBody{size: 1536 << 20}
		r := n.putImage(t, tenant, query, z, z.size)
		e := wantJSONError(t, r, http.StatusBadRequest)
		if !strings.Contains(e["error"].(string), "not a fenec tenant file") {
			t.Fatalf("zeros as %s's image: %s", tenant, r.Body)
		}
		if z.read.Load() > 64<<20 {
			t.Fatalf("zeros as %s's image: the node took %d MB before refusing", tenant, z.read.Load()>>20)
		}
		t.Logf("1.5 GB of zeros as %s's image: refused after the client sent %d KB", tenant, z.read.Load()>>10)
		nothingStaged(t, n)
	}
	if got := strings.TrimSpace(string(n.do("GET", "/t/a/c?count", "").Body)); got != `{"count":3}` {
		t.Fatalf("a after the zeros: %s", got)
	}
	wantJSONError(t, n.do("GET", "/t/fresh/c", ""), http.StatusNotFound)
}

// An image past its bound — the tenant's bytes quota, or --max-image for
// a tenant with none — is refused 413 as those bytes arrive, saying what
// to do, and leaves the tenant as it was; within it, it is taken.
func TestImagePastItsBound(t *testing.T) {
	n := startNode(t, func(c *Config) { c.MaxImage = 4 << 20 })
	people(t, n)
	n.q("a", "create collection blob (b text)")
	for range 6 {
		n.q("a", "put blob {b: $1}", strings.Repeat("x", 1<<20))
	}
	img := n.admin("GET", "tenants/a/file", "").Body
	if len(img) < 6<<20 {
		t.Fatalf("image of %d bytes", len(img))
	}
	n.q("a", "del blob")
	small := n.admin("GET", "tenants/a/file", "").Body
	for _, c := range []struct{ tenant, query string }{{"a", "replace=true"}, {"b", ""}, {"c", "replace=true"}} {
		r := n.putImage(t, c.tenant, c.query, bytes.NewReader(img), int64(len(img)))
		e := wantJSONError(t, r, http.StatusRequestEntityTooLarge)
		if msg := e["error"].(string); !strings.Contains(msg, "more than 4194304 bytes") || !strings.Contains(msg, "--max-image") {
			t.Fatalf("an image past --max-image as %s's: %s", c.tenant, msg)
		}
		nothingStaged(t, n)
	}
	if got := strings.TrimSpace(string(n.do("GET", "/t/a/blob?count", "").Body)); got != `{"count":0}` {
		t.Fatalf("a after refused images: %s", got)
	}
	// A bytes quota is a's bound: above --max-image here, so the image is
	// taken; below the image, refused.
	if r := n.admin("PUT", "tenants/a/quota", `{"bytes": 67108864}`); r.Status != 200 {
		t.Fatalf("quota: %d %s", r.Status, r.Body)
	}
	if r := n.putImage(t, "a", "replace=true", bytes.NewReader(img), int64(len(img))); r.Status != http.StatusOK {
		t.Fatalf("an image within a's quota: %d %s", r.Status, r.Body)
	}
	if r := n.admin("PUT", "tenants/a/quota", fmt.Sprintf(`{"bytes": %d}`, len(small)+4096)); r.Status != 200 {
		t.Fatalf("quota: %d %s", r.Status, r.Body)
	}
	r := n.putImage(t, "a", "replace=true", bytes.NewReader(img), int64(len(img)))
	if e := wantJSONError(t, r, http.StatusRequestEntityTooLarge); !strings.Contains(e["error"].(string), "raise the quota") {
		t.Fatalf("an image past a's quota: %s", r.Body)
	}
	if r := n.putImage(t, "a", "replace=true", bytes.NewReader(small), int64(len(small))); r.Status != http.StatusOK {
		t.Fatalf("an image within a's quota: %d %s", r.Status, r.Body)
	}
	nothingStaged(t, n)
}

// A restore in place starts a new history: the answer names it and a
// seq past the replaced file's; a change cursor of the replaced file is
// 410, a read after one of its writes with its history 504, new rows get
// ids past every id it gave; and the image of another tenant is refused
// (409, naming both lineages and force) unless forced.
func TestRestoreStartsANewHistory(t *testing.T) {
	n := startNode(t, nil)
	people(t, n)
	img := n.admin("GET", "tenants/a/file", "").Body
	for i := range 5 {
		n.q("a", "put c {name: $1, n: $2}", fmt.Sprint("after the image ", i), 10+i)
	}
	st := n.admin("GET", "tenants/a/replication", "").Obj(t)
	oldHistory, _ := st["history"].(json.Number).Int64()
	cursor := n.seq("a")
	r := n.putImage(t, "a", "replace=true", bytes.NewReader(img), int64(len(img)))
	if r.Status != http.StatusOK {
		t.Fatalf("restore: %d %s", r.Status, r.Body)
	}
	var ans wire.Restored
	if err := json.Unmarshal(r.Body, &ans); err != nil {
		t.Fatal(err)
	}
	if was, _ := strconv.ParseUint(cursor, 10, 64); ans.Seq <= was || ans.History == uint64(oldHistory) || !ans.Replaced || ans.Lineage == 0 {
		t.Fatalf("restored %+v over a file at %s of history %d", ans, cursor, oldHistory)
	}
	n.q("a", "put c {name: 'after the restore', n: 20}")
	r = n.do("GET", "/t/a/_changes?since="+cursor, "")
	if e := wantJSONError(t, r, http.StatusGone); e["seq"] == nil {
		t.Fatalf("a cursor of the replaced file: %s", r.Body)
	}
	r = n.do("GET", "/t/a/c?count", "", wire.HeaderAfter, cursor, wire.HeaderHistory, fmt.Sprint(oldHistory))
	wantJSONError(t, r, http.StatusGatewayTimeout)
	ids := n.q("a", "get c select id order id desc limit 1").JSON(t).([]any)
	if id, _ := ids[0].(map[string]any)["id"].(json.Number).Int64(); id != 9 {
		t.Fatalf("the first row after the restore has id %d; the replaced file gave ids up to 8", id)
	}

	// Another tenant's image: refused, naming both lineages and force.
	n.mkTenant("other")
	n.q("other", "create collection c (name text)")
	otherImg := n.admin("GET", "tenants/other/file", "").Body
	r = n.putImage(t, "a", "replace=true", bytes.NewReader(otherImg), int64(len(otherImg)))
	e := wantJSONError(t, r, http.StatusConflict)
	if e["lineage"] == nil || e["tenant_lineage"] == nil || !strings.Contains(e["error"].(string), "force") {
		t.Fatalf("another tenant's image: %s", r.Body)
	}
	// The lineage the router names is the one checked.
	r = n.putImage(t, "a", "replace=true&lineage="+fmt.Sprint(e["lineage"]), bytes.NewReader(otherImg), int64(len(otherImg)))
	if r.Status != http.StatusOK {
		t.Fatalf("an image of the lineage named: %d %s", r.Status, r.Body)
	}
	r = n.putImage(t, "a", "replace=true", bytes.NewReader(img), int64(len(img)))
	wantJSONError(t, r, http.StatusConflict)
	for _, q := range []string{"replace=true&force=maybe", "replace=true&lineage=x"} {
		wantJSONError(t, n.putImage(t, "a", q, bytes.NewReader(img), int64(len(img))), http.StatusBadRequest)
	}
	r = n.putImage(t, "a", "replace=true&force=true", bytes.NewReader(img), int64(len(img)))
	if r.Status != http.StatusOK {
		t.Fatalf("forced: %d %s", r.Status, r.Body)
	}
	if got := strings.TrimSpace(string(n.do("GET", "/t/a/c?count", "").Body)); got != `{"count":3}` {
		t.Fatalf("a after the forced restore: %s", got)
	}
	nothingStaged(t, n)
}

// A restore waits for nothing frozen: a tenant frozen for a move is
// refused 503 with Retry-After and left frozen; thawed, it is restored.
func TestRestoreOfAFrozenTenant(t *testing.T) {
	n := startNode(t, nil)
	people(t, n)
	img := n.admin("GET", "tenants/a/file", "").Body
	if r := n.admin("POST", "tenants/a/freeze", ""); r.Status != 200 {
		t.Fatalf("freeze: %d %s", r.Status, r.Body)
	}
	r := n.putImage(t, "a", "replace=true", bytes.NewReader(img), int64(len(img)))
	wantJSONError(t, r, http.StatusServiceUnavailable)
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	wantJSONError(t, n.query("a", "put c {name: 'frozen'}"), http.StatusServiceUnavailable)
	if r := n.admin("POST", "tenants/a/thaw", ""); r.Status != 200 {
		t.Fatalf("thaw: %d %s", r.Status, r.Body)
	}
	if r := n.putImage(t, "a", "replace=true", bytes.NewReader(img), int64(len(img))); r.Status != http.StatusOK {
		t.Fatalf("restore once thawed: %d %s", r.Status, r.Body)
	}
	n.q("a", "put c {name: 'after'}")
	nothingStaged(t, n)
}
