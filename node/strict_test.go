package node

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
)

// strictRequest sends one request exactly as written (its target not
// cleaned or escaped by a client) with the admin token, and reads the
// answer's status and JSON error.
func strictRequest(t *testing.T, n *testNode, method, target, body string) (int, string) {
	t.Helper()
	res := rawRequest(t, n.s.Addr(), fmt.Sprintf(
		"%s %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		method, target, adminToken, len(body), body))
	b, _ := io.ReadAll(res.Body)
	var out struct{ Error string }
	_ = json.Unmarshal(b, &out)
	if out.Error == "" {
		out.Error = string(b)
	}
	return res.StatusCode, out.Error
}

func wantStrict(t *testing.T, what string, st int, msg, want string) {
	t.Helper()
	if st != 400 || !strings.Contains(msg, want) {
		t.Errorf("%s: %d %q, want 400 saying %q", what, st, msg, want)
	}
}

// The node's JSON bodies, on /t/ and /_admin/ alike, refuse a body that
// goes on after its value, a key twice (by case too, where a field is
// meant), and a key twice in a nested object; and write nothing.
func TestBodiesStrict(t *testing.T) {
	n := startNode(t, nil)
	people(t, n)
	leased := startNode(t, func(c *Config) { c.Lease = true }) // takes grants
	seq, size := seqOf(t, n, "a"), fileSize(t, n, "a")
	for _, tc := range []struct {
		method, path string
		good         string
		dup          string
		nested       string
	}{
		{"POST", "/t/a/query", `{"query":"get c"}`, `{"query":"get c","query":"del c where n > 0"}`,
			`{"query":"put c $1","params":[{"name":"x","name":"y"}]}`},
		{"POST", "/t/a/batch", `{"query":"get c"}`, `{"query":"get c","QUERY":"del c where n > 0"}`,
			`{"query":"put c $1","params":[{"name":"x","o":{"a":1,"a":2}}]}`},
		{"POST", "/t/a/c", `{"name":"dee"}`, `{"name":"dee","name":"eve"}`, `[{"name":"dee"},{"name":"eve","o":{"a":1,"a":2}}]`},
		{"PATCH", "/t/a/c?name=eq.ann", `{"n":5}`, `{"n":5,"n":6}`, `{"owner":"x","o":{"a":1,"a":2}}`},
		{"PUT", "/_admin/tenants/a/quota", `{"rows":100}`, `{"rows":100,"rows":0}`, ""},
		{"POST", "/_admin/tenants/a/follow", `{"from":"http://127.0.0.1:1"}`, `{"from":"http://127.0.0.1:1","From":"http://127.0.0.1:2"}`, ""},
		{"POST", "/_admin/tenants/a/promote", `{"force":false}`, `{"force":false,"force":true}`, ""},
		{"POST", "/_admin/promote", `{"tenants":[{"tenant":"a"}]}`, `{"tenants":[{"tenant":"a"}],"force":false,"force":true}`,
			`{"tenants":[{"tenant":"a","lineage":1,"lineage":2}]}`},
		{"POST", "/_admin/lease", `{"term":1,"router":"r","n":1,"ms":1000}`, `{"term":1,"router":"r","n":1,"n":2,"ms":1000}`, ""},
	} {
		what := tc.method + " " + tc.path
		n := n
		if tc.path == "/_admin/lease" {
			n = leased
		}
		st, msg := strictRequest(t, n, tc.method, tc.path, tc.good+tc.good)
		if tc.path == "/t/a/batch" { // lines: two values on one line
			st, msg = strictRequest(t, n, tc.method, tc.path, tc.good+" "+tc.good+"\n")
		}
		wantStrict(t, what+" with two values", st, msg, "goes on after its JSON value")
		st, msg = strictRequest(t, n, tc.method, tc.path, tc.good+"}")
		wantStrict(t, what+" with a brace after", st, msg, "goes on after its JSON value")
		st, msg = strictRequest(t, n, tc.method, tc.path, tc.dup)
		wantStrict(t, what+" with a key twice", st, msg, "appears twice in the body")
		if tc.nested != "" {
			st, msg = strictRequest(t, n, tc.method, tc.path, tc.nested)
			wantStrict(t, what+" with a nested key twice", st, msg, "appears twice in \"")
		}
	}
	if seqOf(t, n, "a") != seq || fileSize(t, n, "a") != size {
		t.Error("a refused body wrote")
	}
	if r := n.admin("GET", "/_admin/tenants/a/quota", ""); strings.Contains(string(r.Body), "100") {
		t.Errorf("a refused quota was kept: %s", r.Body)
	}
}

// The node refuses, on /t/ and /_admin/ alike, a path with an encoded
// separator or dot, an empty segment, a dot segment, or a percent-encoded
// route or control name (400, saying which).
func TestPathsStrict(t *testing.T) {
	n := startNode(t, nil)
	people(t, n)
	for path, want := range map[string]string{
		"/t/a//c":                       "empty segment",
		"/t/a/c//":                      "empty segment",
		"/t/a/./c":                      `a "." segment`,
		"/t/a/x/../c":                   `a ".." segment`,
		"/t/a%2fc":                      "%2f encodes",
		"/t/a/c%5Cx":                    "%5c encodes",
		"/%74/a/c":                      "first segment is percent-encoded",
		"/_admin//stats":                "empty segment",
		"/_admin/tenants//a/quota":      "empty segment",
		"/_admin/./stats":               `a "." segment`,
		"/_admin/x/../stats":            `a ".." segment`,
		"/_admin/tenants/a%2fquota":     "%2f encodes",
		"/_admin/tenants/a/quota%2f..":  "%2f encodes",
		"/%5fadmin/stats":               "first segment is percent-encoded",
		"/_admin/tenants/%61/quota":     "below /_admin is percent-encoded",
		"/_admin/tenants/a/%2e%2e/file": "%2e encodes",
	} {
		st, msg := strictRequest(t, n, "GET", path, "")
		wantStrict(t, "GET "+path, st, msg, want)
	}
	for _, path := range []string{"/t/a/c", "/t/a/c/", "/_admin/stats", "/_admin/tenants/"} {
		if st, msg := strictRequest(t, n, "GET", path, ""); st != 200 {
			t.Errorf("GET %s: %d %s", path, st, msg)
		}
	}
}
