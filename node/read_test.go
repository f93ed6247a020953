package node

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// adminReadBody is one body of POST /_admin/tenants/<t>/read.
func adminReadBody(query string, params ...any) string {
	if params == nil {
		params = []any{}
	}
	b, _ := json.Marshal(map[string]any{"query": query, "params": params})
	return string(b)
}

// The admin read route runs a get and answers its rows with the seq it
// saw; every statement that would write is refused 400 before it runs,
// saying what to do instead, and the tenant is as it was. A refusal of
// the statement itself says so (statement_refused); one that depends on
// the tenant does not.
func TestAdminReadRunsReadsOnly(t *testing.T) {
	n := startNode(t, func(c *Config) { c.HTTPToken = "data" })
	n.mkTenant("a")
	data := func(q string) *resp {
		b, _ := json.Marshal(map[string]any{"query": q})
		return n.do("POST", "/t/a/query", string(b), "Authorization", "Bearer data")
	}
	for _, q := range []string{"create collection c (n int @sorted, s text)", "put c [{n: 1, s: 'x'}, {n: 2, s: 'y'}]"} {
		if r := data(q); r.Status != 200 {
			t.Fatalf("%s: %d %s", q, r.Status, r.Body)
		}
	}
	seqOf := func() string {
		return fmt.Sprint(n.admin("GET", "tenants/a/replication", "").Obj(t)["seq"])
	}
	seq := seqOf()
	before := string(data("get c order n").Body)

	r := n.admin("POST", "tenants/a/read", adminReadBody("get c where n > $1 select n", 1))
	if r.Status != 200 || strings.TrimSpace(string(r.Body)) != `[{"n":2}]` || r.Header.Get("Fenec-Seq") != seq {
		t.Fatalf("read: %d %s seq %q, want seq %s", r.Status, r.Body, r.Header.Get("Fenec-Seq"), seq)
	}

	writes := map[string]string{
		"del c": "del", "del c where n = 1 returning *": "del", "set c {n: 9}": "set",
		"put c {n: 3}": "put", "insert c {n: 4}": "insert", "drop collection c": "drop collection",
		"create collection d (n int)": "create collection", "create index on c (s) @hash": "create index",
		"  DEL c": "del",
	}
	for q, verb := range writes {
		m := wantJSONError(t, n.admin("POST", "tenants/a/read", adminReadBody(q)), 400)
		msg := fmt.Sprint(m["error"])
		if m["statement_refused"] != true || m["verb"] != verb || !strings.Contains(msg, "reads only") || !strings.Contains(msg, "/t/a/query") {
			t.Fatalf("%q: %v", q, m)
		}
	}
	for _, q := range []string{"get c; del c", "get c\ndel c", `{"query": "del c"}`, "get c where n = $1"} {
		m := wantJSONError(t, n.admin("POST", "tenants/a/read", adminReadBody(q)), 400)
		if m["statement_refused"] != true {
			t.Fatalf("%q: %v", q, m)
		}
	}
	if m := wantJSONError(t, n.admin("POST", "tenants/a/read", "get c"), 400); m["statement_refused"] != true {
		t.Fatalf("a body that is no JSON: %v", m)
	}
	// What depends on the tenant is the tenant's own error.
	if m := wantJSONError(t, n.admin("POST", "tenants/a/read", adminReadBody("get c match s 'x'")), 400); m["statement_refused"] != nil {
		t.Fatalf("a match on a field with no @text index: %v", m)
	}
	wantJSONError(t, n.admin("POST", "tenants/a/read", adminReadBody("get nothere")), 404)
	wantJSONError(t, n.admin("POST", "tenants/zz/read", adminReadBody("get c")), 404)
	wantJSONError(t, n.admin("GET", "tenants/a/read", ""), 405)
	wantJSONError(t, n.do("POST", "/_admin/tenants/a/read", adminReadBody("get c")), 401)
	wantJSONError(t, n.do("POST", "/_admin/tenants/a/read", adminReadBody("get c"), "Authorization", "Bearer data"), 401)

	if got := seqOf(); got != seq {
		t.Fatalf("seq %s after refused writes, was %s", got, seq)
	}
	if after := string(data("get c order n").Body); after != before {
		t.Fatalf("rows after refused writes: %s, were %s", after, before)
	}
}

// Statements are counted by what the engine's parse says they are, not by
// their first word.
func TestStatementsCountedByParse(t *testing.T) {
	n := startNode(t, nil)
	n.mkTenant("a")
	for _, q := range []string{"create collection c (n int)", "  PUT c {n: 1}", "\tget c", "Del c where n = 2", "gets c"} {
		n.query("a", q)
	}
	n.do("GET", "/t/a/c?n=eq.1", "")
	body := string(n.do("GET", "/_metrics", "", "Authorization", "Bearer "+adminToken).Body)
	for _, want := range []string{
		`fenec_node_statements_total{kind="ddl"} 1`, `fenec_node_statements_total{kind="put"} 1`,
		`fenec_node_statements_total{kind="get"} 2`, `fenec_node_statements_total{kind="del"} 1`,
		`fenec_node_statements_total{kind="other"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
