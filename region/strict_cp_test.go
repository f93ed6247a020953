package region

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// cpRaw sends one request to addr exactly as written — its target is
// not cleaned or escaped again by a client — with the router token, and
// reads the answer.
func cpRaw(tb testing.TB, addr, method, target string, body string) (int, map[string]any) {
	tb.Helper()
	conn, err := net.DialTimeout("tcp", addr, cpWait)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(cpWait)) // a bound on a hang, not a timed assertion
	req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		method, target, cpRouterToken, len(body), body)
	if _, err := conn.Write([]byte(req)); err != nil {
		tb.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, target, err)
	}
	defer res.Body.Close()
	var out any
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		tb.Errorf("%s %s: %d, the answer is no JSON: %v", method, target, res.StatusCode, err)
	}
	obj, _ := out.(map[string]any) // a list's answer is no refusal
	return res.StatusCode, obj
}

// wantRefused wants a 400 whose JSON error says want.
func wantRefused(tb testing.TB, what string, st int, ans map[string]any, want string) {
	tb.Helper()
	msg, _ := ans["error"].(string)
	if st != http.StatusBadRequest || !strings.Contains(msg, want) {
		tb.Errorf("%s: %d %q, want 400 saying %q", what, st, msg, want)
	}
}

// Every /_shard/ route that takes a JSON body refuses one that goes on
// after its value, one naming a key twice (by case too), and one naming
// a key twice in a nested object — and nothing it asked for is done.
func TestShardBodiesStrictCP(t *testing.T) {
	r := startCPRouter(t, nil)
	n := startCPNode(t)
	r.addNode(t, "n1", n)
	r.place(t, "acme", "n1")
	addr := r.rt.Addr()
	node := fmt.Sprintf(`"addr":%q,"token":%q,"region":"eu"`, n.Addr(), cpAdminToken)
	for _, tc := range []struct {
		method, path string
		good         string // a body the route takes
		dup          string // the same, a key twice
		nested       string // a key twice in a nested object ("" where none nests)
	}{
		{"PUT", "nodes/n2", "{" + node + "}", "{" + node + `,"region":"us"}`, "{" + node + `,"standby":{"n":"n1","n":"n3"}}`},
		{"PUT", "tenants/t2", `{"node":"n1"}`, `{"node":"n1","NODE":"n9"}`, ""},
		{"POST", "tenants/acme/move", `{"to":"n1"}`, `{"to":"n1","to":"n9"}`, ""},
		{"POST", "promote", `{"again":false}`, `{"again":false,"again":true}`, ""},
		{"POST", "nodes/n1/failover", `{"if_down":true}`, `{"if_down":true,"if_down":false}`, ""},
		{"POST", "query", `{"tenants":["acme"],"query":"get c","merge":{"concat":true}}`,
			`{"tenants":["acme"],"query":"get c","query":"delete c","merge":{"concat":true}}`,
			`{"tenants":["acme"],"query":"get c","merge":{"concat":true,"concat":false}}`},
		{"POST", "query", `{"tenants":["acme"],"query":"get c where a = $1","params":[{"a":1}],"merge":{"concat":true}}`, "",
			`{"tenants":["acme"],"query":"get c where a = $1","params":[{"a":1,"a":2}],"merge":{"concat":true}}`},
		{"PUT", "tenants/acme/quota", `{"rows":10}`, `{"rows":10,"rows":0}`, ""},
		{"POST", "regions/eu/handoff", `{"to":"region"}`, `{"to":"region","TO":"global"}`, ""},
	} {
		what := tc.method + " /_shard/" + tc.path
		st, ans := cpRaw(t, addr, tc.method, "/_shard/"+tc.path, tc.good+tc.good)
		wantRefused(t, what+" with two values", st, ans, "goes on after its JSON value")
		st, ans = cpRaw(t, addr, tc.method, "/_shard/"+tc.path, tc.good+"}")
		wantRefused(t, what+" with a brace after", st, ans, "goes on after its JSON value")
		if tc.dup != "" {
			st, ans = cpRaw(t, addr, tc.method, "/_shard/"+tc.path, tc.dup)
			wantRefused(t, what+" with a key twice", st, ans, "appears twice in the body")
		}
		if tc.nested != "" {
			st, ans = cpRaw(t, addr, tc.method, "/_shard/"+tc.path, tc.nested)
			wantRefused(t, what+" with a nested key twice", st, ans, "appears twice in \"")
		}
	}
	// The walk-around the issue named: a handoff begun by a second value.
	st, ans := cpRaw(t, addr, "POST", "/_shard/regions/eu/handoff", `{"to":"region"}{"to":"global"}`)
	wantRefused(t, "handoff with two values", st, ans, "at byte 15: send one JSON value")
	var regions []regionEntry
	if st, b := r.shard(t, http.MethodGet, "regions", nil, &regions); st != http.StatusOK {
		t.Fatalf("regions: %d %s", st, b)
	}
	for _, re := range regions {
		if re.Handoff != nil {
			t.Errorf("region %s has a handoff after refused bodies: %+v", re.Name, re.Handoff)
		}
	}
	if st, b := r.shard(t, http.MethodGet, "tenants/t2/quota", nil, nil); st != http.StatusNotFound {
		t.Errorf("tenant t2 after refused bodies: %d %s", st, b)
	}
	var nodes []map[string]any
	r.shard(t, http.MethodGet, "nodes", nil, &nodes)
	if len(nodes) != 1 {
		t.Errorf("nodes after refused bodies: %v", nodes)
	}
}

// hostilePaths are a route's path walked around: an encoded separator,
// an empty segment, a "." and a ".." segment, each with what the refusal
// says.
func hostilePaths(prefix string, segs []string) map[string]string {
	last := len(segs) - 1
	head := prefix + strings.Join(segs[:last], "/")
	if last > 0 {
		head += "/"
	}
	out := map[string]string{
		head + "/" + segs[last]:     "empty segment", // head ends with a "/"
		head + "./" + segs[last]:    `a "." segment`,
		head + "x/../" + segs[last]: `a ".." segment`,
	}
	if last > 0 {
		out[prefix+strings.Join(segs[:last], "/")+"%2f"+segs[last]] = "%2f encodes"
		out[prefix+strings.Join(segs[:last], "/")+"%5C"+segs[last]] = "%5c encodes"
	} else {
		out[strings.TrimSuffix(prefix, "/")+"%2F"+segs[0]] = "%2f encodes"
	}
	return out
}

// Every /_shard/ route refuses a path with an encoded separator, an
// empty segment, or a dot segment (400, saying which), as a node's /t/
// does: /_shard/regions/eu%2fhandoff is no handoff.
func TestShardPathsStrictCP(t *testing.T) {
	r := startCPRouter(t, nil)
	n := startCPNode(t)
	r.addNode(t, "n1", n)
	r.place(t, "acme", "n1")
	addr := r.rt.Addr()
	for _, route := range []struct {
		method string
		segs   []string
	}{
		{"GET", []string{"nodes"}},
		{"PUT", []string{"nodes", "n1"}},
		{"POST", []string{"nodes", "n1", "failover"}},
		{"GET", []string{"tenants"}},
		{"PUT", []string{"tenants", "acme"}},
		{"POST", []string{"tenants", "acme", "move"}},
		{"GET", []string{"tenants", "acme", "quota"}},
		{"GET", []string{"tenants", "acme", "file"}},
		{"POST", []string{"promote"}},
		{"POST", []string{"replicas"}},
		{"POST", []string{"query"}},
		{"GET", []string{"regions"}},
		{"POST", []string{"regions", "eu", "handoff"}},
		{"GET", []string{"leases"}},
	} {
		for path, want := range hostilePaths("/_shard/", route.segs) {
			st, ans := cpRaw(t, addr, route.method, path, "")
			wantRefused(t, route.method+" "+path, st, ans, want)
		}
	}
	for path, want := range map[string]string{
		"/%5fshard/nodes":   "first segment is percent-encoded",
		"/_shard/n%6fdes":   "below /_shard is percent-encoded",
		"/_metrics/":        "", // a slash at the end is no walk-around: answered as before
		"/%5Fmetrics":       "first segment is percent-encoded",
		"/_shard/nodes/n1/": "",
	} {
		st, ans := cpRaw(t, addr, "GET", path, "")
		if want == "" {
			if st == http.StatusBadRequest {
				t.Errorf("GET %s: refused: %v", path, ans)
			}
			continue
		}
		wantRefused(t, "GET "+path, st, ans, want)
	}
	var regions []regionEntry
	r.shard(t, http.MethodGet, "regions", nil, &regions)
	for _, re := range regions {
		if re.Handoff != nil {
			t.Errorf("region %s has a handoff after refused paths: %+v", re.Name, re.Handoff)
		}
	}
}

// Through the router, /t/ is read as the node reads it: the router passes
// the path and the body as they came, and the node refuses the same
// walk-arounds the control surface does.
func TestDataStrictThroughRouterCP(t *testing.T) {
	r := startCPRouter(t, nil)
	n := startCPNode(t)
	r.addNode(t, "n1", n)
	r.place(t, "acme", "n1")
	r.mustQuery(t, "acme", "create collection c (name text)")
	addr := r.rt.Addr()
	for path, want := range hostilePaths("/t/acme/", []string{"c"}) {
		if strings.Contains(path, "/t/acme%2F") {
			continue // the tenant's own segment: the router's to refuse (below)
		}
		st, ans := cpRaw(t, addr, "GET", path, "")
		wantRefused(t, "GET "+path, st, ans, want)
	}
	if st, ans := cpRaw(t, addr, "GET", "/t/acme%2Fc", ""); st != http.StatusBadRequest || ans["error"] == nil {
		t.Errorf("GET /t/acme%%2Fc: %d %v, want 400", st, ans)
	}
	for body, want := range map[string]string{
		`{"query":"get c"}}`:                                      "goes on after its JSON value",
		`{"query":"get c"}{"query":"del c"}`:                      "goes on after its JSON value",
		`{"query":"get c","query":"del c"}`:                       "appears twice in the body",
		`{"query":"put c $1","params":[{"name":"a","name":"b"}]}`: `appears twice in "params[0]"`,
	} {
		st, ans := cpRaw(t, addr, "POST", "/t/acme/query", body)
		wantRefused(t, "POST /t/acme/query "+body, st, ans, want)
	}
	st, ans := cpRaw(t, addr, "POST", "/t/acme/c", `{"name":"a","name":"b"}`)
	wantRefused(t, "POST /t/acme/c with a key twice", st, ans, "appears twice in the body")
	if b := r.mustQuery(t, "acme", "get c"); strings.TrimSpace(string(b)) != "[]" {
		t.Errorf("refused bodies wrote: %s", b)
	}
}
