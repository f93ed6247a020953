package tests

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// leaks are what an error a client caused must never say: a Go type or a
// Go struct's name, encoding/json's own words, a directory key, HTML
// escapes where the message meant < > or &.
var leaks = []struct {
	re   *regexp.Regexp
	what string
}{
	{regexp.MustCompile(`Go (value|struct|type)|interface \{\}|\[\]interface|map\[string\]|\bstruct\b`), "a Go type"},
	{regexp.MustCompile(`queryBody|\b(node|region|global|engine|wire|forward|fql)\.[A-Za-z]|\b(int64|float64|uint32)\b`), "a Go name"},
	{regexp.MustCompile(`json: `), "encoding/json's words"},
	{regexp.MustCompile(`(^|[\s"':(])(nodes|tenants|regions|quotas|meta)/[a-z0-9_-]+`), "a directory key"},
	{regexp.MustCompile(`\\u003[ce]|\\u0026`), "an HTML escape"},
}

// errorCase is one request a client can get wrong, and its answer's
// status. built marks a route whose statement the node builds from the
// path and query string: its errors point at no offset in it.
type errorCase struct {
	name         string
	method, path string
	body         string
	status       int
	built        bool
	says         string // a phrase the message must hold, if any
}

// TestErrorLanguage walks the errors a client can cause through a router
// and its node — bodies that are not JSON or not the JSON a route takes,
// values of the wrong type, unknown names, numbers out of range, methods a
// route does not take — and checks each answer is a JSON error in the
// API's terms: none of the leaks above, no parse offset into a statement
// the client never wrote, Allow on a 405.
func TestErrorLanguage(t *testing.T) {
	r, _ := oneNode(t)
	c := r.Client()
	wantStatus(t, c.Do("PUT", "/_shard/tenants/shop", map[string]any{}), 201, "place")
	c.MustQuery("shop", "create collection items (name text @text, price int @sorted, emb vector<2>)")
	c.MustQuery("shop", `put items {name: "sock", price: 9, emb: [1, 0]}`)

	cases := []errorCase{
		// The query language's routes.
		{name: "not JSON", method: "POST", path: "/t/shop/query", body: `hello`, status: 400, says: "not JSON"},
		{name: "JSON cut short", method: "POST", path: "/t/shop/query", body: `{"query": "get items", "params": [`, status: 400},
		{name: "query a number", method: "POST", path: "/t/shop/query", body: `{"query": 5}`, status: 400, says: `"query" must be a string`},
		{name: "params a string", method: "POST", path: "/t/shop/query", body: `{"query": "get items", "params": "x"}`, status: 400, says: `"params" must be an array`},
		{name: "misspelt key", method: "POST", path: "/t/shop/query", body: `{"query": "get items where price = $1", "parms": [9]}`, status: 400, says: `unknown field "parms"`},
		{name: "an array body", method: "POST", path: "/t/shop/query", body: `[1]`, status: 400},
		{name: "unknown collection", method: "POST", path: "/t/shop/query", body: `{"query": "get nothere"}`, status: 404},
		{name: "unknown field", method: "POST", path: "/t/shop/query", body: `{"query": "get items where nope = 1"}`, status: 400},
		{name: "unknown type", method: "POST", path: "/t/shop/query", body: `{"query": "create collection v (a blob)"}`, status: 400, says: "vector<N>"},
		{name: "wrong type", method: "POST", path: "/t/shop/query", body: `{"query": "put items {price: \"5\"}"}`, status: 400},
		{name: "vector too short", method: "POST", path: "/t/shop/query", body: `{"query": "put items {emb: [1]}"}`, status: 400},
		{name: "param out of range", method: "POST", path: "/t/shop/query", body: `{"query": "get items where price = $1", "params": [1e400]}`, status: 400},
		{name: "limit out of range", method: "POST", path: "/t/shop/query", body: `{"query": "get items limit 999999"}`, status: 400},
		{name: "batch line not JSON", method: "POST", path: "/t/shop/batch", body: "{\"query\": \"get items\"}\n{\"query\": 5}\n", status: 400, says: "line 2"},
		{name: "batch statement fails", method: "POST", path: "/t/shop/batch", body: "{\"query\": \"get items\"}\n{\"query\": \"get nothere\"}\n", status: 404, says: "line 2"},
		{name: "query by GET", method: "GET", path: "/t/shop/query", status: 405},
		// REST: the node builds the statement.
		{name: "rest body not JSON", method: "POST", path: "/t/shop/items", body: `{"name": `, status: 400, built: true},
		{name: "rest body a string", method: "POST", path: "/t/shop/items", body: `"x"`, status: 400, built: true},
		{name: "rest number out of range", method: "POST", path: "/t/shop/items", body: `{"price": 1e400}`, status: 400, built: true},
		{name: "rest wrong type", method: "POST", path: "/t/shop/items", body: `{"price": "5"}`, status: 400, built: true},
		{name: "rest unknown field", method: "POST", path: "/t/shop/items", body: `{"nope": 1}`, status: 400, built: true},
		{name: "rest limit past the bound", method: "GET", path: "/t/shop/items?limit=999999", status: 400, built: true, says: "limit"},
		{name: "rest limit plus offset", method: "GET", path: "/t/shop/items?limit=9000&offset=2000", status: 400, built: true},
		{name: "rest limit negative", method: "GET", path: "/t/shop/items?limit=-1", status: 400, built: true},
		{name: "rest filter with no op", method: "GET", path: "/t/shop/items?price=9", status: 400, built: true, says: "price=eq.9"},
		{name: "rest unknown op", method: "GET", path: "/t/shop/items?price=about.9", status: 400, built: true, says: "eq"},
		{name: "rest select a keyword", method: "GET", path: "/t/shop/items?select=limit", status: 400, built: true},
		{name: "rest order a keyword", method: "GET", path: "/t/shop/items?order=limit.desc", status: 400, built: true},
		{name: "rest filter on an unknown field", method: "GET", path: "/t/shop/items?nope=eq.1", status: 400, built: true},
		{name: "rest filter of the wrong type", method: "GET", path: "/t/shop/items?price=gt.abc", status: 400, built: true},
		{name: "rest patch wrong type", method: "PATCH", path: "/t/shop/items?price=eq.9", body: `{"price": "x"}`, status: 400, built: true},
		{name: "rest delete with no filter", method: "DELETE", path: "/t/shop/items", status: 400, built: true},
		{name: "rest unknown collection", method: "GET", path: "/t/shop/nothere", status: 404, built: true},
		{name: "subscription with select", method: "GET", path: "/t/shop/items/changes?select=name", status: 400, built: true, says: "select"},
		{name: "rest by PUT", method: "PUT", path: "/t/shop/items", status: 405},
		{name: "unknown tenant", method: "POST", path: "/t/nobody/query", body: `{"query": "get items"}`, status: 404},
		// The router's control plane.
		{name: "place: not JSON", method: "PUT", path: "/_shard/tenants/x", body: `not json`, status: 400},
		{name: "place: node a number", method: "PUT", path: "/_shard/tenants/x", body: `{"node": 5}`, status: 400, says: `"node" must be a string`},
		{name: "place: unknown key", method: "PUT", path: "/_shard/tenants/x", body: `{"nod": "n1"}`, status: 400, says: `unknown field "nod"`},
		{name: "place: unknown node", method: "PUT", path: "/_shard/tenants/x", body: `{"node": "nosuch"}`, status: 404, says: `"nosuch"`},
		{name: "place: a bad name", method: "PUT", path: "/_shard/tenants/Bad.Name", body: `{}`, status: 400},
		{name: "failover: unknown node", method: "POST", path: "/_shard/nodes/nosuch/failover", status: 404, says: `unknown node "nosuch"`},
		{name: "failover: force a string", method: "POST", path: "/_shard/nodes/n1/failover", body: `{"force": "yes"}`, status: 400},
		{name: "forget: unknown node", method: "DELETE", path: "/_shard/nodes/nosuch", status: 404},
		{name: "record: addr a number", method: "PUT", path: "/_shard/nodes/n9", body: `{"addr": 5}`, status: 400},
		{name: "move: unknown tenant", method: "POST", path: "/_shard/tenants/nosuch/move", body: `{"to": "n1"}`, status: 404, says: `unknown tenant "nosuch"`},
		{name: "move: unknown target", method: "POST", path: "/_shard/tenants/shop/move", body: `{"to": "nosuch"}`, status: 404},
		{name: "backup: unknown tenant", method: "GET", path: "/_shard/tenants/nosuch/file", status: 404, says: `unknown tenant "nosuch"`},
		{name: "quota: unknown tenant", method: "GET", path: "/_shard/tenants/nosuch/quota", status: 404},
		{name: "quota: negative", method: "PUT", path: "/_shard/tenants/shop/quota", body: `{"rows": -1}`, status: 400},
		{name: "quota: out of range", method: "PUT", path: "/_shard/tenants/shop/quota", body: `{"rows": 1e400}`, status: 400},
		{name: "quota: a string", method: "PUT", path: "/_shard/tenants/shop/quota", body: `{"rows": "many"}`, status: 400},
		{name: "cross read: query a number", method: "POST", path: "/_shard/query", body: `{"query": 5, "tenants": "*"}`, status: 400},
		{name: "handoff: to a number", method: "POST", path: "/_shard/regions/local/handoff", body: `{"to": 5}`, status: 400},
		{name: "promote: again a string", method: "POST", path: "/_shard/promote", body: `{"again": "yes"}`, status: 400},
		{name: "promote by GET", method: "GET", path: "/_shard/promote", status: 405},
		{name: "nodes by POST", method: "POST", path: "/_shard/nodes", status: 405},
		{name: "a node by POST", method: "POST", path: "/_shard/nodes/n1", status: 405},
		{name: "tenants by DELETE", method: "DELETE", path: "/_shard/tenants", status: 405},
		{name: "a tenant by POST", method: "POST", path: "/_shard/tenants/shop", status: 405},
		{name: "move by GET", method: "GET", path: "/_shard/tenants/shop/move", status: 405},
		{name: "failover by GET", method: "GET", path: "/_shard/nodes/n1/failover", status: 405},
		{name: "replicas by GET", method: "GET", path: "/_shard/replicas", status: 405},
		{name: "cross read by GET", method: "GET", path: "/_shard/query", status: 405},
		{name: "quota by POST", method: "POST", path: "/_shard/tenants/shop/quota", status: 405},
		{name: "file by POST", method: "POST", path: "/_shard/tenants/shop/file", status: 405},
		{name: "regions by PUT", method: "PUT", path: "/_shard/regions", status: 405},
		{name: "handoff by GET", method: "GET", path: "/_shard/regions/local/handoff", status: 405},
		{name: "leases by POST", method: "POST", path: "/_shard/leases", status: 405},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body any
			if tc.body != "" {
				body = tc.body
			}
			res := c.Do(tc.method, tc.path, body)
			m := wantError(t, res, tc.status, tc.method+" "+tc.path)
			msg, _ := m["error"].(string)
			for _, l := range leaks {
				if l.re.MatchString(string(res.Body)) {
					t.Errorf("%s %s names %s: %s", tc.method, tc.path, l.what, res.Body)
				}
			}
			if tc.built && strings.Contains(msg, "parse error at") {
				t.Errorf("%s %s points into a statement the client never wrote: %s", tc.method, tc.path, msg)
			}
			if tc.says != "" && !strings.Contains(msg, tc.says) {
				t.Errorf("%s %s: %q does not say %q", tc.method, tc.path, msg, tc.says)
			}
			if tc.status == 405 && res.Header.Get("Allow") == "" {
				t.Errorf("%s %s: 405 with no Allow", tc.method, tc.path)
			}
			var raw map[string]json.RawMessage
			if err := json.Unmarshal(res.Body, &raw); err != nil {
				t.Errorf("%s %s: %v", tc.method, tc.path, err)
			}
		})
	}
}
