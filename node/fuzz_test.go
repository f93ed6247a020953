package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/lease"
)

// adminRoutes are the admin routes whose bodies FuzzAdminBody sends
// anything to: a method, a path below /_admin/, and the statuses the route
// may answer (anything else, a panic, a non-JSON refusal, or the tenant
// harmed is a finding).
var adminRoutes = []struct {
	method, path string
	statuses     []int
}{
	{"PUT", "tenants/a/quota", []int{200, 400, 413}},
	{"POST", "tenants/a/follow", []int{200, 400, 413}},
	{"POST", "tenants/a/promote", []int{200, 400, 409, 413}},
	{"POST", "promote", []int{200, 400, 409, 413}},
	{"POST", "lease", []int{200, 400, 409, 412}},
	{"POST", "tenants/a/compact", []int{200}},
	{"PUT", "tenants/b/file", []int{201, 400, 409}},
	{"PUT", "tenants/a/file?replace=true", []int{200, 400, 409}}, // 409: an image of another lineage than a's
}

// fuzzNode is a node served in process, without a listener: requests go
// straight to its handler. Its copies dial nothing.
type fuzzNode struct {
	s    *Server
	good []byte // tenant a's image as seeded
}

func newFuzzNode(f *testing.F) *fuzzNode {
	cfg := DefaultConfig()
	cfg.Dir = fuzzDir(f)
	cfg.HTTP = "127.0.0.1:0"
	cfg.AdminToken = adminToken
	cfg.ReplicationToken = "repl-secret"
	cfg.Sync = "off"
	cfg.Lease = true
	cfg.LeaseClock = lease.NewManualClock(time.Hour)
	cfg.Logger = slog.New(slog.DiscardHandler)
	s, err := New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	// A copy told to follow anything dials nothing.
	s.reg.replClient = &http.Client{Transport: &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("the fuzzer dials nothing")
		},
	}}
	n := &fuzzNode{s: s}
	n.must(f, "PUT", "/_admin/tenants/a", nil, 201)
	// Writes need a lease: two grants, the second acknowledging the first.
	list := lease.ListID([]string{"a"})
	n.must(f, "POST", "/_admin/lease", []byte(`{"term": 1, "router": "r", "n": 1, "ms": 3600000, "tenants": ["a"], "list": "`+list+`"}`), 200)
	n.must(f, "POST", "/_admin/lease", []byte(`{"term": 1, "router": "r", "n": 2, "ack": 1, "ms": 3600000, "tenants": ["a"], "list": "`+list+`"}`), 200)
	n.must(f, "POST", "/t/a/query", []byte(`{"query": "create collection c (n int @unique, body text @text)"}`), 200)
	n.must(f, "POST", "/t/a/query", []byte(`{"query": "put c [{n: 1, body: \"one\"}, {n: 2}, {n: 3}]"}`), 200)
	n.good = n.must(f, "GET", "/_admin/tenants/a/file", nil, 200)
	return n
}

// fuzzDir is a directory for the fuzzed node's files: in memory where the
// machine has a tmpfs (an fsync there costs nothing, and installs sync
// their directory), else the test's temp dir.
func fuzzDir(f *testing.F) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "fenec-fuzz-"); err == nil {
			f.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return f.TempDir()
}

// do sends one request to the node's handler, with the admin token on
// /_admin/.
func (n *fuzzNode) do(method, path string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	if strings.HasPrefix(path, "/_admin/") {
		req.Header.Set("Authorization", "Bearer "+adminToken)
	}
	w := httptest.NewRecorder()
	n.s.ServeHTTP(w, req)
	return w
}

func (n *fuzzNode) must(tb testing.TB, method, path string, body []byte, status int) []byte {
	tb.Helper()
	w := n.do(method, path, body)
	if w.Code != status {
		tb.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body)
	}
	return w.Body.Bytes()
}

// FuzzAdminBody sends any body to the node's admin routes that take one:
// a quota, a follow, a promotion, a lease grant, a compact, an image to
// install as a new tenant or in a tenant's place. Each is answered with a
// status the route may give, a refusal as {"error": ...}, never a panic;
// afterwards the node serves on and the tenant still holds its rows,
// unless an image was taken in its place, which is then put back.
func FuzzAdminBody(f *testing.F) {
	n := newFuzzNode(f)
	list := lease.ListID([]string{"a"})
	for _, seed := range []struct {
		route uint8
		body  string
	}{
		{0, `{"bytes": 1000000, "rows": 100}`},
		{0, `{"rows": -1}`},
		{0, `{"bytes": 1, "extra": true}`},
		{1, `{"from": "http://127.0.0.1:1", "as": "n2"}`},
		{1, `{"from": "ftp://x"}`},
		{2, `{"lineage": 1, "forked_history": 2, "force": false}`},
		{2, `{"force": true}`},
		{3, `{"term": 1, "router": "r", "n": 3, "ack": 2, "ms": 3600000, "tenants": ["a"], "list": "` + list + `"}`},
		{3, `{"term": 1, "router": "r", "n": 4, "ack": 3, "ms": 3600000, "list": "` + list + `"}`},
		{3, `{"term": 0, "n": 0}`},
		{4, ``},
		{5, `not an image`},
	} {
		f.Add(seed.route, []byte(seed.body))
	}
	f.Add(uint8(5), n.good)
	f.Add(uint8(6), n.good)
	f.Add(uint8(6), n.good[:len(n.good)/2])
	f.Add(uint8(6), append(bytes.Clone(n.good), 0))
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		r := adminRoutes[int(which)%len(adminRoutes)]
		method, path := r.method, "/_admin/"+r.path
		w := n.do(method, path, body)
		ok := false
		for _, s := range r.statuses {
			ok = ok || w.Code == s
		}
		if !ok {
			t.Fatalf("%s %s answered %d %s", method, path, w.Code, w.Body)
		}
		if w.Code >= 400 {
			var e struct {
				Error string `json:"error"`
			}
			if json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Error == "" {
				t.Fatalf("%s %s refused %d without a JSON error: %q", method, path, w.Code, w.Body)
			}
		}
		n.reset(t, r.path, w.Code)
	})
}

// reset puts what an input changed back: a copy that follows is promoted,
// a tenant made is deleted, an image taken in a's place gives way to a's
// own, the quota is lifted; then a must answer its rows.
func (n *fuzzNode) reset(t *testing.T, path string, status int) {
	t.Helper()
	switch {
	case path == "tenants/b/file" && status == 201:
		n.must(t, "DELETE", "/_admin/tenants/b", nil, 204)
	case path == "tenants/a/file?replace=true" && status < 300:
		n.must(t, "PUT", "/_admin/tenants/a/file?replace=true", n.good, 200)
	case path == "tenants/a/follow" && status == 200:
		n.must(t, "POST", "/_admin/tenants/a/promote", []byte(`{"force": true}`), 200)
	case path == "tenants/a/quota" && status == 200:
		n.must(t, "PUT", "/_admin/tenants/a/quota", []byte(`{}`), 200)
	}
	w := n.do("POST", "/t/a/query", []byte(`{"query": "get c select n order n"}`))
	if w.Code != 200 || strings.TrimSpace(w.Body.String()) != `[{"n":1},{"n":2},{"n":3}]` {
		t.Fatalf("after %s (%d), a answers %d %s", path, status, w.Code, w.Body)
	}
	if b, _ := io.ReadAll(n.do("GET", "/_health", nil).Body); !bytes.Contains(b, []byte(`"ok":true`)) {
		t.Fatalf("after %s, /_health answers %s", path, b)
	}
}
