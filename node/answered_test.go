package node

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/fenec-go/fenec/wire"
)

// Every answer below /t/ names the node that gave it (its id), and a
// write's answer names the history its seq belongs to, the fresh one and
// the one replayed from its key alike; a refusal names no history, and
// nothing outside /t/ names the node.
func TestAnswersNameNodeAndHistory(t *testing.T) {
	n := startNode(t, nil)
	people(t, n)
	id := n.s.ID()
	if id == "" {
		t.Fatal("the node has no id")
	}
	hist := func() string {
		r := n.admin("GET", "tenants/a/replication", "")
		if r.Status != http.StatusOK {
			t.Fatalf("replication status: %d %s", r.Status, r.Body)
		}
		return r.Obj(t)["history"].(interface{ String() string }).String()
	}
	for _, tc := range []struct {
		name    string
		r       *resp
		status  int
		history bool
	}{
		{"insert", n.do("POST", "/t/a/c", `{"name":"lu","n":1}`), 201, true},
		{"query write", n.query("a", "set c {n: 2} where name = 'lu'"), 200, true},
		{"keyed write", n.do("POST", "/t/a/c", `{"name":"mo"}`, "Idempotency-Key", "w1"), 201, true},
		{"keyed replay", n.do("POST", "/t/a/c", `{"name":"mo"}`, "Idempotency-Key", "w1"), 201, true},
		{"read", n.query("a", "get c"), 200, false},
		{"refused write", n.query("a", "put nosuch {x: 1}"), 404, false},
		{"unknown tenant", n.query("nobody", "get c"), 404, false},
	} {
		if tc.r.Status != tc.status {
			t.Fatalf("%s: %d %s, want %d", tc.name, tc.r.Status, tc.r.Body, tc.status)
		}
		if got := tc.r.Header.Get(wire.HeaderNode); got != id {
			t.Errorf("%s: %s %q, want the node's id %q", tc.name, wire.HeaderNode, got, id)
		}
		got := tc.r.Header.Get(wire.HeaderHistory)
		switch {
		case tc.history && got != hist():
			t.Errorf("%s: %s %q, want the file's %q", tc.name, wire.HeaderHistory, got, hist())
		case tc.history:
			if _, err := strconv.ParseUint(tc.r.Header.Get(wire.HeaderSeq), 10, 64); err != nil {
				t.Errorf("%s: no seq beside the history: %v", tc.name, tc.r.Header)
			}
		case got != "":
			t.Errorf("%s: %s %q on an answer that wrote nothing", tc.name, wire.HeaderHistory, got)
		}
	}
	if h := n.do("GET", "/_health", "").Header.Get(wire.HeaderNode); h != "" {
		t.Errorf("/_health names the node: %q", h)
	}
}
