package node

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// TestWriteIDs: every write that makes rows answers their ids, in the
// order given — a put and an insert through /query, each statement of a
// /batch, the REST insert — and a replay of the same Idempotency-Key
// answers the same ids without writing again.
func TestWriteIDs(t *testing.T) {
	n := startNode(t, nil)
	n.mkTenant("a")
	n.q("a", "create collection c (name text @unique)")

	for _, tc := range []struct {
		name, method, path, body, key string
		status                        int
		want                          string
	}{
		{name: "put", method: "POST", path: "/t/a/query", body: `{"query": "put c [{name: \"a\"}, {name: \"b\"}]"}`, status: 200,
			want: `{"affected":2,"ids":[1,2]}`},
		{name: "insert", method: "POST", path: "/t/a/query", body: `{"query": "insert c {name: \"c\"}"}`, status: 200,
			want: `{"affected":1,"ids":[3]}`},
		{name: "put of a given id", method: "POST", path: "/t/a/query", body: `{"query": "put c {id: 2, name: \"b2\"}"}`, status: 200,
			want: `{"affected":1,"ids":[2]}`},
		{name: "put if absent, one left alone", method: "POST", path: "/t/a/query", body: `{"query": "put c [{id: 1, name: \"x\"}, {name: \"d\"}] if absent"}`, status: 200,
			want: `{"affected":1,"ids":[4]}`},
		{name: "put of none", method: "POST", path: "/t/a/query", body: `{"query": "put c []"}`, status: 200,
			want: `{"affected":0,"ids":[]}`},
		{name: "a set makes no rows", method: "POST", path: "/t/a/query", body: `{"query": "set c {name: \"a1\"} where name = \"a\""}`, status: 200,
			want: `{"affected":1}`},
		{name: "batch", method: "POST", path: "/t/a/batch", body: batchBody(`put c {name: "e"}`, `get c count`, `insert c [{name: "f"}, {name: "g"}]`), status: 200,
			want: `{"ok":3,"results":[{"affected":1,"ids":[5]},{"count":5},{"affected":2,"ids":[6,7]}]}`},
		{name: "rest insert", method: "POST", path: "/t/a/c", body: `[{"name": "h"}, {"name": "i"}]`, status: 201,
			want: `{"ids":[8,9],"inserted":2}`},
		{name: "keyed put", method: "POST", path: "/t/a/query", body: `{"query": "put c {name: \"k1\"}"}`, key: "k-put", status: 200,
			want: `{"affected":1,"ids":[10]}`},
		{name: "keyed batch", method: "POST", path: "/t/a/batch", body: batchBody(`insert c {name: "k2"}`), key: "k-batch", status: 200,
			want: `{"ok":1,"results":[{"affected":1,"ids":[11]}]}`},
		{name: "keyed rest insert", method: "POST", path: "/t/a/c", body: `{"name": "k3"}`, key: "k-rest", status: 201,
			want: `{"ids":[12],"inserted":1}`},
	} {
		var hdr []string
		if tc.key != "" {
			hdr = []string{"Idempotency-Key", tc.key}
		}
		r := n.do(tc.method, tc.path, tc.body, hdr...)
		if r.Status != tc.status || strings.TrimSpace(string(r.Body)) != tc.want {
			t.Fatalf("%s: %d %s, want %d %s", tc.name, r.Status, r.Body, tc.status, tc.want)
		}
		if tc.key == "" {
			continue
		}
		seq := n.seq("a")
		again := n.do(tc.method, tc.path, tc.body, hdr...)
		if again.Status != tc.status || strings.TrimSpace(string(again.Body)) != tc.want || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("%s replayed: %d %s %v, want the first answer %s", tc.name, again.Status, again.Body, again.Header, tc.want)
		}
		if n.seq("a") != seq {
			t.Fatalf("%s replayed: wrote again", tc.name)
		}
	}
	if got := strings.TrimSpace(string(n.q("a", "get c count").Body)); got != `{"count":12}` {
		t.Fatalf("rows: %s", got)
	}
}

// TestBatchRefusalOutcome: a refused /batch says exactly which statement
// and what landed. Run as one block, a batch refused at its k-th statement
// names its index from 0 (at), its line from 1 as the body's lines count
// (blank ones too), and completed 0: nothing landed. A line that is not a
// /query body is refused the same way before anything runs. A batch
// holding a compact, run one by one, refused after some statements landed
// says completed: those before it, which did land.
func TestBatchRefusalOutcome(t *testing.T) {
	n := startNode(t, nil)
	n.mkTenant("a")
	n.q("a", "create collection c (n int @unique)")
	rows := func() string {
		t.Helper()
		return strings.TrimSpace(string(n.do("GET", "/t/a/c?select=n&order=n", "").Body))
	}
	line := func(q string) string {
		b, _ := json.Marshal(map[string]any{"query": q})
		return string(b)
	}
	for _, tc := range []struct {
		name             string
		body             string
		status           int
		at, ln, complete int
		rows             string
	}{
		{name: "block refused at its first statement", body: line("put c {n: \"x\"}") + "\n" + line("put c {n: 1}") + "\n",
			status: 400, at: 0, ln: 1, complete: 0, rows: `[]`},
		{name: "block refused at its third, a blank line before it", body: line("put c {n: 1}") + "\n" + line("put c {n: 2}") + "\n\n" + line("put c {n: 1}") + "\n",
			status: 409, at: 2, ln: 4, complete: 0, rows: `[]`},
		{name: "a line that is no /query body", body: line("put c {n: 1}") + "\n\n\n" + `{"query": "put c {n: 2}", "params": "x"}` + "\n",
			status: 400, at: 1, ln: 4, complete: 0, rows: `[]`},
		{name: "one by one, refused after two landed", body: line("put c {n: 1}") + "\n" + line("compact") + "\n" + line("put c {n: 2}") + "\n" + line("put c {n: 1}") + "\n",
			status: 409, at: 3, ln: 4, complete: 3, rows: `[{"n":1},{"n":2}]`},
	} {
		r := n.do("POST", "/t/a/batch", tc.body)
		e := wantJSONError(t, r, tc.status)
		if e["at"] != json.Number(strconv.Itoa(tc.at)) || e["line"] != json.Number(strconv.Itoa(tc.ln)) || e["completed"] != json.Number(strconv.Itoa(tc.complete)) {
			t.Fatalf("%s: %s, want at %d line %d completed %d", tc.name, r.Body, tc.at, tc.ln, tc.complete)
		}
		if msg, _ := e["error"].(string); !strings.HasPrefix(msg, "line "+strconv.Itoa(tc.ln)+": ") || strings.Contains(msg, "statement ") {
			t.Fatalf("%s: %q does not name line %d", tc.name, msg, tc.ln)
		}
		if got := rows(); got != tc.rows {
			t.Fatalf("%s: rows %s, want %s", tc.name, got, tc.rows)
		}
	}
}
