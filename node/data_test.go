package node

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
)

// fileSize is a tenant file's size.
func fileSize(t *testing.T, n *testNode, tenant string) int64 {
	t.Helper()
	fi, err := os.Stat(filepath.Join(n.cfg.Dir, tenant+".fenec"))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// people makes tenant "a" with a collection c of a few rows.
func people(t *testing.T, n *testNode) {
	t.Helper()
	n.mkTenant("a")
	n.q("a", "create collection c (name text, n int @sorted, tags [text], owner text)")
	n.q("a", `put c [{name: "ann", n: 1, tags: ["x"]}, {name: "bob", n: 2}, {name: "cy", n: 3, tags: ["x", "y"]}]`)
}

func TestQueryAndBatch(t *testing.T) {
	n := startNode(t, nil)
	people(t, n)
	r := n.q("a", "get c where n >= $1 order n desc", 2)
	rows := r.JSON(t).([]any)
	if len(rows) != 2 || rows[0].(map[string]any)["name"] != "cy" {
		t.Fatalf("rows %s", r.Body)
	}
	if r := n.q("a", "get c count"); strings.TrimSpace(string(r.Body)) != `{"count":3}` {
		t.Fatalf("count %s", r.Body)
	}
	w := n.q("a", `put c {name: "dee", n: 4}`)
	if w.Header.Get("Fenec-Seq") != "5" || strings.TrimSpace(string(w.Body)) != `{"affected":1,"ids":[4]}` {
		t.Fatalf("put: seq %q body %s", w.Header.Get("Fenec-Seq"), w.Body)
	}
	if r.Header.Get("Fenec-Seq") != "" {
		t.Fatal("a read carries Fenec-Seq")
	}

	// A batch is one block.
	b := n.do("POST", "/t/a/batch", `{"query":"put c {name: $1}","params":["e1"]}`+"\n\n"+`{"query":"get c where name = $1","params":["e1"]}`+"\n")
	if b.Status != 200 || b.Header.Get("Fenec-Seq") != "6" {
		t.Fatalf("batch: %d %s %q", b.Status, b.Body, b.Header.Get("Fenec-Seq"))
	}
	m := b.Obj(t)
	if m["ok"] != json.Number("2") || len(m["results"].([]any)[1].([]any)) != 1 {
		t.Fatalf("batch answer %s", b.Body)
	}
	// A failing statement lands nothing, and says which: its index from 0
	// and its line from 1, a blank line counted; none completed.
	size := fileSize(t, n, "a")
	b = n.do("POST", "/t/a/batch", `{"query":"put c {name: \"f1\"}"}`+"\n\n"+`{"query":"put c {n: \"nope\"}"}`)
	m = wantJSONError(t, b, 400)
	if m["at"] != json.Number("1") || m["line"] != json.Number("3") || m["completed"] != json.Number("0") ||
		!strings.HasPrefix(m["error"].(string), "line 3: ") {
		t.Fatalf("batch failure %s", b.Body)
	}
	if n.seq("a") != "6" || fileSize(t, n, "a") != size {
		t.Fatal("a failed batch wrote")
	}
	for _, tt := range []struct {
		query  string
		status int
	}{
		{"get nothere", 404},
		{"get c wher", 400},
		{`put c {n: "x"}`, 400},
		{`get c where n = $1`, 400},
		{`insert c {id: 1, name: "taken"}`, 409},
		{`set c {n: 9} where name = "nobody" require 1`, 412},
	} {
		wantJSONError(t, n.query("a", tt.query), tt.status)
	}
	wantJSONError(t, n.do("POST", "/t/a/batch", "\n\n"), 400)
	wantJSONError(t, n.do("POST", "/t/a/batch", `{"query":"get c"}`+"\nnot json"), 400)
	wantJSONError(t, n.do("GET", "/t/a/query", ""), 405)
}

func TestREST(t *testing.T) {
	n := startNode(t, nil)
	people(t, n)
	r := n.do("POST", "/t/a/c", `[{"name":"dee","n":4},{"name":"eve","n":5,"tags":["y"]}]`)
	if r.Status != 201 || r.Header.Get("Fenec-Seq") == "" {
		t.Fatalf("insert: %d %s", r.Status, r.Body)
	}
	if got := strings.TrimSpace(string(r.Body)); got != `{"ids":[4,5],"inserted":2}` {
		t.Fatalf("insert answer %s", got)
	}
	if r := n.do("POST", "/t/a/c", `{"name":"fay","n":6}`); r.Status != 201 || !strings.Contains(string(r.Body), `"ids":[6]`) {
		t.Fatalf("insert one: %d %s", r.Status, r.Body)
	}
	names := func(path string) string {
		t.Helper()
		r := n.do("GET", path, "")
		if r.Status != 200 {
			t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
		}
		var rows []map[string]any
		if err := json.Unmarshal(r.Body, &rows); err != nil {
			t.Fatalf("GET %s: %s", path, r.Body)
		}
		var out []string
		for _, row := range rows {
			out = append(out, fmt.Sprint(row["name"]))
		}
		return strings.Join(out, ",")
	}
	for _, tt := range []struct{ path, want string }{
		{"/t/a/c?order=n", "ann,bob,cy,dee,eve,fay"},
		{"/t/a/c?n=gt.2&n=lte.5&order=n.desc", "eve,dee,cy"},
		{"/t/a/c?name=eq.bob", "bob"},
		{"/t/a/c?name=neq.bob&n=lt.3", "ann"},
		{"/t/a/c?n=in.(1,3,9)&order=n", "ann,cy"},
		{"/t/a/c?tags=has.y&order=n", "cy,eve"},
		{"/t/a/c?tags=is.null&order=n", "bob,dee,fay"},
		{"/t/a/c?tags=not.is.null&order=n", "ann,cy,eve"},
		{"/t/a/c?n=not.gt.4&order=n.desc&limit=2&offset=1", "cy,bob"},
		{"/t/a/c?name=eq.bob%20or%201%3D1", ""},
	} {
		if got := names(tt.path); got != tt.want {
			t.Errorf("GET %s = %q, want %q", tt.path, got, tt.want)
		}
	}
	if r := n.do("GET", "/t/a/c?n=gt.1&count", ""); strings.TrimSpace(string(r.Body)) != `{"count":5}` {
		t.Fatalf("count: %s", r.Body)
	}
	if r := n.do("GET", "/t/a/c?select=name&n=eq.1", ""); strings.TrimSpace(string(r.Body)) != `[{"name":"ann"}]` {
		t.Fatalf("select: %s", r.Body)
	}
	if r := n.do("PATCH", "/t/a/c?n=gte.5", `{"owner":"me"}`); r.Status != 200 || strings.TrimSpace(string(r.Body)) != `{"updated":2}` {
		t.Fatalf("patch: %d %s", r.Status, r.Body)
	}
	if got := names("/t/a/c?owner=eq.me&order=n"); got != "eve,fay" {
		t.Fatalf("after patch %q", got)
	}
	if r := n.do("DELETE", "/t/a/c?owner=eq.me", ""); r.Status != 200 || strings.TrimSpace(string(r.Body)) != `{"deleted":2}` {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	seq, size := n.seq("a"), fileSize(t, n, "a")
	wantJSONError(t, n.do("DELETE", "/t/a/c", ""), 400)
	wantJSONError(t, n.do("PATCH", "/t/a/c", `{"owner":"x"}`), 400)
	wantJSONError(t, n.do("PATCH", "/t/a/c?n=eq.1", `{"bad field":"x"}`), 400)
	wantJSONError(t, n.do("PATCH", "/t/a/c?n=eq.1", `[]`), 400)
	wantJSONError(t, n.do("DELETE", "/t/a/c?n=eq.1;x", ""), 400)
	wantJSONError(t, n.do("POST", "/t/a/c", `{"name":`), 400)
	wantJSONError(t, n.do("POST", "/t/a/c", `[1,2]`), 400)
	wantJSONError(t, n.do("POST", "/t/a/c", `{"n":"text"}`), 400)
	wantJSONError(t, n.do("POST", "/t/a/nothere", `{"n":1}`), 404)
	wantJSONError(t, n.do("GET", "/t/a/c?n=like.1", ""), 400)
	wantJSONError(t, n.do("PUT", "/t/a/c", ""), 405)
	// A filter whose value the field can never equal or order against is
	// refused, saying which field and what to send, not answered with no
	// rows; a delete or patch so filtered changes nothing.
	for _, c := range []struct{ method, path, says string }{
		{"GET", "/t/a/c?n=gt.abc", `field n is int and "abc" is text`},
		{"GET", "/t/a/c?n=in.(1,abc)", `field n is int and "abc" is text`},
		{"GET", "/t/a/c?name=eq.5", `quote it: "5"`},
		{"DELETE", "/t/a/c?n=eq.abc", `field n is int`},
		{"PATCH", "/t/a/c?name=lt.5", `field name is text`},
	} {
		if m := wantJSONError(t, n.do(c.method, c.path, `{"owner":"x"}`), 400); !strings.Contains(m["error"].(string), c.says) {
			t.Errorf("%s %s: %q, want it to say %s", c.method, c.path, m["error"], c.says)
		}
	}
	if got := names(`/t/a/c?name=eq."bob"`); got != "bob" {
		t.Errorf(`a quoted value on a text field: %q, want bob`, got)
	}
	if n.seq("a") != seq || fileSize(t, n, "a") != size {
		t.Fatal("a refused request wrote")
	}
}

func TestFenecAfterAndHistory(t *testing.T) {
	n := startNode(t, nil)
	people(t, n)
	seq, _ := strconv.Atoi(n.seq("a"))
	// Reached: answered at once.
	r := n.do("GET", "/t/a/c?count", "", "Fenec-After", strconv.Itoa(seq))
	if r.Status != 200 {
		t.Fatalf("after reached: %d %s", r.Status, r.Body)
	}
	// Not reached within the wait: 504 with the seq this copy has.
	r = n.do("GET", "/t/a/c", "", "Fenec-After", strconv.Itoa(seq+100), "Fenec-Wait", "20")
	m := wantJSONError(t, r, 504)
	if m["seq"] != json.Number(strconv.Itoa(seq)) {
		t.Fatalf("504 body %s", r.Body)
	}
	// Reached while waiting: answered once the write lands.
	done := make(chan *resp, 1)
	go func() {
		done <- n.do("POST", "/t/a/query", `{"query":"get c count"}`, "Fenec-After", strconv.Itoa(seq+1), "Fenec-Wait", "10000")
	}()
	testkit.Eventually(t, 5*time.Second, func() bool { return heldRequests(n) == 1 }, "the read is held")
	n.q("a", `put c {name: "late"}`)
	if r := <-done; r.Status != 200 || strings.TrimSpace(string(r.Body)) != `{"count":4}` {
		t.Fatalf("held read: %d %s", r.Status, r.Body)
	}
	// History: this file's own history holds its writes.
	hist := n.s.history(t, "a")
	r = n.do("GET", "/t/a/c?count", "", "Fenec-After", strconv.Itoa(seq), "Fenec-History", hist)
	if r.Status != 200 {
		t.Fatalf("own history: %d %s", r.Status, r.Body)
	}
	// Another history: this copy does not hold that write.
	r = n.do("GET", "/t/a/c?count", "", "Fenec-After", strconv.Itoa(seq), "Fenec-History", "12345", "Fenec-Wait", "20")
	wantJSONError(t, r, 504)
	wantJSONError(t, n.do("GET", "/t/a/c", "", "Fenec-After", "x"), 400)
	wantJSONError(t, n.do("GET", "/t/a/c", "", "Fenec-After", "1", "Fenec-History", "x"), 400)
	// Past the primary's latest write in its own history: no write has
	// that seq, so 400 at once, naming the seq and history it has; no wait.
	latest, _ := strconv.Atoi(n.seq("a"))
	start := time.Now()
	r = n.do("GET", "/t/a/c?count", "", "Fenec-After", strconv.Itoa(latest+1), "Fenec-History", hist, "Fenec-Wait", "10000")
	m = wantJSONError(t, r, 400)
	if m["seq"] != json.Number(strconv.Itoa(latest)) || m["history"] != json.Number(hist) ||
		!strings.Contains(fmt.Sprint(m["error"]), "past this tenant's latest write") || time.Since(start) > 5*time.Second {
		t.Fatalf("Fenec-After past the primary's latest write answered after %v: %s", time.Since(start), r.Body)
	}
	if n.seq("a") != strconv.Itoa(latest) {
		t.Fatal("a refused read wrote")
	}
}

// history is a tenant's current history id, read from its open file.
func (s *Server) history(tb testing.TB, name string) string {
	tb.Helper()
	t, err := s.reg.acquire(tb.Context(), name)
	if err != nil {
		tb.Fatal(err)
	}
	defer s.reg.release(t)
	return strconv.FormatUint(t.db.History(), 10)
}

// heldRequests reads the held-requests gauge.
func heldRequests(n *testNode) int {
	r := n.do("GET", "/_metrics", "", "Authorization", "Bearer "+adminToken)
	for _, line := range strings.Split(string(r.Body), "\n") {
		if v, ok := strings.CutPrefix(line, "fenec_node_held_requests "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return int(f)
		}
	}
	return -1
}

func TestChangeFeed(t *testing.T) {
	n := startNode(t, nil)
	people(t, n)
	r := n.do("GET", "/t/a/_changes?since=0", "")
	if r.Status != 200 || r.Header.Get("Content-Type") != "application/x-ndjson" || r.Header.Get("Fenec-Next") != "4" {
		t.Fatalf("feed: %d %q %s", r.Status, r.Header.Get("Fenec-Next"), r.Body)
	}
	lines := strings.Split(strings.TrimSpace(string(r.Body)), "\n")
	var last feedLine
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatal(err)
	}
	if last.Seq != 4 || len(last.Puts) != 3 || last.Puts[2].Doc["name"] != "cy" {
		t.Fatalf("last line %s", lines[len(lines)-1])
	}
	r = n.do("GET", "/t/a/_changes?since=0&limit=1", "")
	if strings.Count(string(r.Body), "\n") != 1 || r.Header.Get("Fenec-Next") != "1" {
		t.Fatalf("limit 1: %q %s", r.Header.Get("Fenec-Next"), r.Body)
	}
	// Nothing new: empty, Fenec-Next stays.
	r = n.do("GET", "/t/a/_changes?since=4", "")
	if len(r.Body) != 0 || r.Header.Get("Fenec-Next") != "4" {
		t.Fatalf("caught up: %q %s", r.Header.Get("Fenec-Next"), r.Body)
	}
	// A long poll answers when a write lands.
	var wg sync.WaitGroup
	var got *resp
	wg.Go(func() { got = n.do("GET", "/t/a/_changes?since=4&wait=10000", "") })
	testkit.Eventually(t, 5*time.Second, func() bool { return heldRequests(n) == 1 }, "the feed waits")
	n.q("a", `del c where name = "bob"`)
	wg.Wait()
	if got.Header.Get("Fenec-Next") != "5" || !strings.Contains(string(got.Body), `"dels":[{"coll":"c","id":2}]`) {
		t.Fatalf("long poll: %q %s", got.Header.Get("Fenec-Next"), got.Body)
	}
	wantJSONError(t, n.do("GET", "/t/a/_changes?since=x", ""), 400)
	wantJSONError(t, n.do("GET", "/t/a/_changes?limit=0", ""), 400)
}

func TestUnknownTenantIsNotCreated(t *testing.T) {
	n := startNode(t, nil)
	wantJSONError(t, n.do("POST", "/t/ghost/query", `{"query":"create collection c (n int)"}`), 404)
	wantJSONError(t, n.do("POST", "/t/ghost/c", `{"n":1}`), 404)
	if _, err := os.Stat(filepath.Join(n.cfg.Dir, "ghost.fenec")); !os.IsNotExist(err) {
		t.Fatalf("a request made a tenant file: %v", err)
	}
}

func TestFenecAfterAnsweredAtShutdown(t *testing.T) {
	n := startNode(t, nil)
	people(t, n)
	done := make(chan *resp, 1)
	go func() { done <- n.do("GET", "/t/a/c", "", "Fenec-After", "1000", "Fenec-Wait", "30000") }()
	testkit.Eventually(t, 5*time.Second, func() bool { return heldRequests(n) == 1 }, "the read is held")
	closed := make(chan error, 1)
	go func() { closed <- n.s.Close() }()
	r := <-done
	wantJSONError(t, r, 503)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}
