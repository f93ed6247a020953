package node

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/audit"
)

// rawRequest writes raw bytes on a fresh connection and reads the answer.
func rawRequest(t *testing.T, addr, raw string) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// wantJSONError checks an error answer's status and shape.
func wantJSONError(t *testing.T, r *resp, status int) map[string]any {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d %s, want %d", r.Status, r.Body, status)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("content type %q", ct)
	}
	m := r.Obj(t)
	if _, ok := m["error"].(string); !ok {
		t.Fatalf("no error message in %s", r.Body)
	}
	return m
}

func TestHealthAndRequestID(t *testing.T) {
	n := startNode(t, func(c *Config) { c.HTTPToken = "data" })
	r := n.do("GET", "/_health", "", "X-Request-Id", "abc-123")
	if r.Status != 200 || strings.TrimSpace(string(r.Body)) != `{"ok":true}` {
		t.Fatalf("health: %d %s", r.Status, r.Body)
	}
	if got := r.Header.Get("X-Request-Id"); got != "abc-123" {
		t.Fatalf("request id %q, want the client's", got)
	}
	// Under /t/<tenant>/ too, with no token.
	if r := n.do("GET", "/t/any/_health", ""); r.Status != 200 {
		t.Fatalf("tenant health: %d %s", r.Status, r.Body)
	}
	for _, bad := range []string{strings.Repeat("x", 129), "has space", "tab\there"} {
		r := n.do("GET", "/_health", "", "X-Request-Id", bad)
		if got := r.Header.Get("X-Request-Id"); got == bad || got == "" {
			t.Fatalf("request id %q kept for %q", got, bad)
		}
	}
	a, b := n.do("GET", "/_health", ""), n.do("GET", "/_health", "")
	if a.Header.Get("X-Request-Id") == b.Header.Get("X-Request-Id") {
		t.Fatal("two requests got one id")
	}
}

func TestUnknownRoutesAndNames(t *testing.T) {
	n := startNode(t, nil)
	for _, tt := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/", 404},
		{"GET", "/nope", 404},
		{"GET", "/t/", 404},
		{"GET", "/t/a", 404},
		{"GET", "/t/a/x/y/z", 404},
		{"POST", "/t/a/1bad", 404},
		{"GET", "/t/Upper/query", 400},
		{"GET", "/t/" + strings.Repeat("a", 65) + "/c", 400},
		{"GET", "/t/a.b/c", 400},
		{"GET", "/t/a%20b/c", 400},
		{"GET", "/t/../x", 400},
		{"GET", "/t/a/../../etc/passwd", 400},
		{"GET", "/t/%2e%2e/x", 400},
		{"GET", "/t/a%2fb/c", 400},
		{"GET", "/t/a%2F..%2Fb/c", 400},
		{"GET", "/t/a%5cb/c", 400},
		{"GET", "/t/nosuch/c", 404},
		{"POST", "/t/nosuch/query", 404},
		{"GET", "/_admin/stats", 401},
	} {
		res := rawRequest(t, n.s.Addr(), fmt.Sprintf("%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", tt.method, tt.path))
		b, _ := io.ReadAll(res.Body)
		r := &resp{Status: res.StatusCode, Header: res.Header, Body: b}
		wantJSONError(t, r, tt.status)
	}
	// Nothing was created by any of it: the directory holds only the
	// node's id, made as it started.
	ents, err := os.ReadDir(n.cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != IDFileName {
		t.Fatalf("dir holds %v", ents)
	}
	if r := n.do("GET", "/_health", ""); r.Status != 200 {
		t.Fatalf("node not serving after bad input: %d", r.Status)
	}
}

func TestAdminNeedsToken(t *testing.T) {
	n := startNode(t, func(c *Config) { c.AdminToken = "" })
	r := n.do("GET", "/_admin/stats", "", "Authorization", "Bearer "+adminToken)
	wantJSONError(t, r, 404)
	r = n.do("PUT", "/_admin/tenants/a", "")
	wantJSONError(t, r, 404)
}

func TestTokensAndBackoff(t *testing.T) {
	auditPath := filepath.Join(t.TempDir(), "audit.log")
	n := startNode(t, func(c *Config) { c.HTTPToken = "data-secret"; c.Audit = auditPath })
	r := n.do("POST", "/t/a/query", `{"query":"get c"}`)
	wantJSONError(t, r, 401)
	if !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("WWW-Authenticate %q", r.Header.Get("WWW-Authenticate"))
	}
	// The data token is not the admin token and the other way round.
	wantJSONError(t, n.do("GET", "/_admin/stats", "", "Authorization", "Bearer data-secret"), 401)
	wantJSONError(t, n.do("GET", "/t/a/c", "", "Authorization", "Bearer "+adminToken), 401)
	// A right token reaches the tenant (unknown: 404).
	wantJSONError(t, n.do("GET", "/t/a/c", "", "Authorization", "Bearer data-secret"), 404)
	// Three more bad data tokens make five on the data surface in the
	// minute (the data token sent to /_admin/ is the admin surface's): the
	// address is held off the data routes, even with the right token.
	wantJSONError(t, n.do("GET", "/t/a/c", "", "Authorization", "Bearer wrong"), 401)
	wantJSONError(t, n.do("GET", "/t/a/c", "", "Authorization", "Bearer wrong"), 401)
	wantJSONError(t, n.do("GET", "/t/a/c", "", "Authorization", "Bearer wrong"), 401)
	r = n.do("GET", "/t/a/c", "", "Authorization", "Bearer data-secret")
	wantJSONError(t, r, 429)
	if ra, _ := strconv.Atoi(r.Header.Get("Retry-After")); ra < 1 || ra > 60 {
		t.Fatalf("429 with Retry-After %q", r.Header.Get("Retry-After"))
	}
	// The admin surface is not held off for data strikes.
	if r := n.admin("GET", "stats", ""); r.Status != 200 {
		t.Fatalf("admin while the data routes are held off: %d %s", r.Status, r.Body)
	}
	if r := n.do("GET", "/_health", ""); r.Status != 200 {
		t.Fatalf("health while blocked: %d", r.Status)
	}
	n.s.Close()
	b, err := os.ReadFile(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	// Seven refusals from one client: the first 401 and the 429 written
	// whole, the other five 401s counted in one line as the log closed.
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 3 {
		t.Fatalf("audit has %d lines, want 3:\n%s", len(lines), b)
	}
	var got [3]audit.Entry
	for i, l := range lines {
		if err := json.Unmarshal([]byte(l), &got[i]); err != nil {
			t.Fatal(err)
		}
	}
	if e := got[1]; e.Status != 429 || e.Who != "127.0.0.1" || e.Tenant != "a" || e.RequestID == "" || e.What != "refused" {
		t.Fatalf("the 429's audit line %+v", e)
	}
	if e := got[2]; e.Status != 401 || e.Who != "127.0.0.1" || e.Repeated != 5 || e.Since == nil {
		t.Fatalf("the count of the 401s %+v", e)
	}
}

func TestBackoffWindow(t *testing.T) {
	now := time_(0)
	g := newGuard(now.get, "")
	req, _ := http.NewRequest("GET", "/", nil)
	req.RemoteAddr = "10.0.0.1:5"
	req.Header.Set("Authorization", "Bearer bad")
	for i := 0; i < 4; i++ {
		if err := g.check(req, surfaceData, "good"); err != ErrUnauthorized {
			t.Fatalf("strike %d: %v", i, err)
		}
		now.add(20) // seconds: the first strikes leave the window
	}
	if err := g.check(req, surfaceData, "good"); err != ErrUnauthorized {
		t.Fatalf("fifth strike spread over 100 s: %v", err)
	}
	for i := 0; i < 3; i++ {
		g.check(req, surfaceData, "good")
	}
	if err := g.check(req, surfaceData, "good"); !errors.Is(err, ErrBackoff) {
		t.Fatalf("five in a minute: %v, want ErrBackoff", err)
	}
	other := req.Clone(req.Context())
	other.RemoteAddr = "10.0.0.2:5"
	other.Header.Set("Authorization", "Bearer good")
	if err := g.check(other, surfaceData, "good"); err != nil {
		t.Fatalf("another address: %v", err)
	}
	now.add(61)
	req.Header.Set("Authorization", "Bearer good")
	if err := g.check(req, surfaceData, "good"); err != nil {
		t.Fatalf("after the penalty: %v", err)
	}
}

func TestMetrics(t *testing.T) {
	n := startNode(t, nil)
	n.mkTenant("secretname")
	n.do("GET", "/t/secretname/nope/x/y", "")
	r := n.do("GET", "/_metrics", "", "Authorization", "Bearer "+adminToken)
	if r.Status != 200 {
		t.Fatalf("metrics: %d %s", r.Status, r.Body)
	}
	body := string(r.Body)
	for _, want := range []string{"fenec_node_request_duration_seconds", "fenec_node_errors_total",
		"fenec_node_open_connections", "fenec_node_tenants_on_disk 1", "fenec_node_tenants_open",
		"fenec_node_memory_bytes", "fenec_node_held_requests"} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(body, "secretname") {
		t.Error("a metric names a tenant")
	}
	wantJSONError(t, n.do("GET", "/_metrics", ""), 401)
}

// A frozen tenant is counted, and how long the longest-frozen one has
// been is told, until it thaws: what the alert on a move's source left
// frozen reads.
func TestMetricsFrozen(t *testing.T) {
	n := startNode(t, nil)
	n.mkTenant("a")
	n.mkTenant("b")
	series := func() (frozen, oldest float64) {
		t.Helper()
		r := n.do("GET", "/_metrics", "", "Authorization", "Bearer "+adminToken)
		for _, line := range strings.Split(string(r.Body), "\n") {
			var v float64
			if _, err := fmt.Sscanf(line, "fenec_node_tenants_frozen %g", &v); err == nil {
				frozen = v
			}
			if _, err := fmt.Sscanf(line, "fenec_node_frozen_oldest_seconds %g", &v); err == nil {
				oldest = v
			}
		}
		return frozen, oldest
	}
	if f, o := series(); f != 0 || o != 0 {
		t.Fatalf("nothing frozen: frozen %v, oldest %v s", f, o)
	}
	if r := n.admin("POST", "tenants/a/freeze", ""); r.Status != 200 {
		t.Fatalf("freeze: %d %s", r.Status, r.Body)
	}
	time.Sleep(50 * time.Millisecond)
	if f, o := series(); f != 1 || o < 0.05 || o > 60 {
		t.Fatalf("one frozen 50 ms ago: frozen %v, oldest %v s", f, o)
	}
	if r := n.admin("POST", "tenants/a/thaw", ""); r.Status != 200 {
		t.Fatalf("thaw: %d %s", r.Status, r.Body)
	}
	if f, o := series(); f != 0 || o != 0 {
		t.Fatalf("thawed: frozen %v, oldest %v s", f, o)
	}
}

// TestBearerSchemeAnyCase: the scheme of an Authorization header is
// matched case-insensitively (RFC 7235), on the data and admin surfaces
// alike; the token itself is not.
func TestBearerSchemeAnyCase(t *testing.T) {
	n := startNode(t, func(c *Config) { c.HTTPToken = "data-secret" })
	n.mkTenant("a")
	for _, scheme := range []string{"Bearer", "bearer", "BEARER", "bEaReR"} {
		if r := n.do("GET", "/t/a/_changes?since=0", "", "Authorization", scheme+" data-secret"); r.Status != 200 {
			t.Fatalf("data with %q: %d %s", scheme, r.Status, r.Body)
		}
		if r := n.do("GET", "/_admin/stats", "", "Authorization", scheme+"  "+adminToken); r.Status != 200 {
			t.Fatalf("admin with %q and two spaces: %d %s", scheme, r.Status, r.Body)
		}
	}
	for _, h := range []string{"Bearer DATA-SECRET", "Basic data-secret", "Bearerdata-secret", "Bearer ", "data-secret"} {
		wantJSONError(t, n.do("GET", "/t/a/_changes?since=0", "", "Authorization", h), 401)
	}
}
