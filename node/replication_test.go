package node

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/wire"
)

const replToken = "repl-secret"

// count is a tenant's row count in c as the node answers it.
func count(n *testNode, tenant string) string {
	r := n.do("GET", "/t/"+tenant+"/c?count", "")
	return strings.TrimSpace(string(r.Body))
}

// replication reads a tenant's replication status.
func replication(t *testing.T, n *testNode, tenant string) map[string]any {
	t.Helper()
	r := n.admin("GET", "tenants/"+tenant+"/replication", "")
	if r.Status != 200 {
		t.Fatalf("replication status: %d %s", r.Status, r.Body)
	}
	return r.Obj(t)
}

func withRepl(c *Config) { c.ReplicationToken = replToken }

func TestReplicationFollowAndPromote(t *testing.T) {
	a := startNode(t, withRepl)
	b := startNode(t, withRepl)
	people(t, a)
	b.mkTenant("a")
	if r := b.admin("POST", "tenants/a/follow", `{"from":"`+a.url+`"}`); r.Status != 200 {
		t.Fatalf("follow: %d %s", r.Status, r.Body)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return count(b, "a") == `{"count":3}` }, "the copy took the primary's image")
	a.q("a", `put c {name: "dee", n: 4}`)
	testkit.Eventually(t, 10*time.Second, func() bool { return count(b, "a") == `{"count":4}` }, "the copy took a new record")
	// A replica refuses writes.
	r := b.query("a", `put c {name: "no"}`)
	wantJSONError(t, r, 503)
	st := replication(t, b, "a")
	ast := replication(t, a, "a")
	if st["role"] != "replica" || st["heard"] != true || st["history"] != ast["history"] || st["seq"] != ast["seq"] {
		t.Fatalf("replica status %v, primary %v", st, ast)
	}
	lineage := ast["lineage"].([]any)[0].(map[string]any)["history"].(json.Number).String()
	// Another lineage is refused, whatever the copy heard.
	r = b.admin("POST", "tenants/a/promote", `{"lineage": 12345}`)
	wantJSONError(t, r, 409)
	r = b.admin("POST", "tenants/a/promote", `{"lineage": `+lineage+`}`)
	if r.Status != 200 {
		t.Fatalf("promote: %d %s", r.Status, r.Body)
	}
	p := r.Obj(t)
	if p["promoted"] != true || p["history"] == ast["history"] || p["seq"] != ast["seq"] {
		t.Fatalf("promoted %v, primary was %v", p, ast)
	}
	b.q("a", `put c {name: "mine"}`)
	if st := replication(t, b, "a"); st["role"] != "primary" {
		t.Fatalf("after promotion %v", st)
	}
	// Promoting a primary changes nothing.
	if p := b.admin("POST", "tenants/a/promote", "").Obj(t); p["promoted"] != false {
		t.Fatalf("second promotion %v", p)
	}
}

func TestReplicaResumesAfterRestart(t *testing.T) {
	a := startNode(t, withRepl)
	dir := t.TempDir()
	b := startNode(t, func(c *Config) { withRepl(c); c.Dir = dir })
	people(t, a)
	b.mkTenant("a")
	b.admin("POST", "tenants/a/follow", `{"from":"`+a.url+`"}`)
	testkit.Eventually(t, 10*time.Second, func() bool { return count(b, "a") == `{"count":3}` }, "the copy caught up")
	if err := b.s.Close(); err != nil {
		t.Fatal(err)
	}
	a.q("a", `put c [{name: "x1"}, {name: "x2"}]`)
	b2 := startNode(t, func(c *Config) { withRepl(c); c.Dir = dir })
	testkit.Eventually(t, 10*time.Second, func() bool { return count(b2, "a") == `{"count":5}` }, "the restarted copy follows again")
	if st := replication(t, b2, "a"); st["role"] != "replica" || st["heard"] != true {
		t.Fatalf("after restart %v", st)
	}
	// A subscription on the replica sees the primary's writes.
	s := b2.subscribe("/t/a/c/changes")
	s.mustNext(t, "seed")
	a.q("a", `put c {name: "live"}`)
	ch := s.mustNext(t, "change")
	if ch["puts"].([]any)[0].(map[string]any)["name"] != "live" {
		t.Fatalf("replica change %v", ch)
	}
}

func TestPromoteRefusesUnheardOldPrimary(t *testing.T) {
	b := startNode(t, withRepl)
	people(t, b)
	// b's copy is told to follow a node it never hears from.
	if r := b.admin("POST", "tenants/a/follow", `{"from":"http://127.0.0.1:1"}`); r.Status != 200 {
		t.Fatalf("follow: %d %s", r.Status, r.Body)
	}
	st := replication(t, b, "a")
	lineage := st["lineage"].([]any)[0].(map[string]any)["history"].(json.Number).String()
	r := b.admin("POST", "tenants/a/promote", `{"lineage": `+lineage+`, "forked_history": 999}`)
	m := wantJSONError(t, r, 409)
	if !strings.Contains(m["error"].(string), "not heard") {
		t.Fatalf("refusal %s", r.Body)
	}
	// An operator who knows better forces it.
	r = b.admin("POST", "tenants/a/promote", `{"lineage": `+lineage+`, "forked_history": 999, "force": true}`)
	if r.Status != 200 || r.Obj(t)["promoted"] != true {
		t.Fatalf("forced promotion: %d %s", r.Status, r.Body)
	}
	b.q("a", `put c {name: "after"}`)
}

func TestReplicationFeedAccess(t *testing.T) {
	a := startNode(t, withRepl)
	people(t, a)
	wantJSONError(t, a.do("GET", "/t/a/_replication?since=0&history=0", ""), 401)
	wantJSONError(t, a.do("GET", "/t/a/_replication?since=0&history=0", "", "Authorization", "Bearer "+adminToken), 401)
	wantJSONError(t, a.do("GET", "/t/a/_replication?since=x&history=0", "", "Authorization", "Bearer "+replToken), 400)
	plain := startNode(t, nil)
	people(t, plain)
	wantJSONError(t, plain.do("GET", "/t/a/_replication?since=0&history=0", "", "Authorization", "Bearer "+replToken), 404)
	for _, body := range []string{`{"from":"ftp://x"}`, `{"from":"http://h:1/path"}`} {
		if m := wantJSONError(t, a.admin("POST", "tenants/a/follow", body), 400); m["code"] != nil {
			t.Fatalf("follow %s refused with code %v: only a node that cannot follow says so", body, m["code"])
		}
	}
}

// A node with no replication token refuses to follow with the code
// cannot_follow (wire.ErrCannotFollow), which a router decides by: a move
// to it copies the image instead. Its file is left as it was.
func TestFollowRefusedWithoutAReplicationToken(t *testing.T) {
	a := startNode(t, withRepl)
	people(t, a)
	plain := startNode(t, nil)
	people(t, plain)
	before := replication(t, plain, "a")
	m := wantJSONError(t, plain.admin("POST", "tenants/a/follow", `{"from":"`+a.url+`"}`), 400)
	if m["code"] != wire.CodeCannotFollow || !strings.Contains(m["error"].(string), "--replication-token") {
		t.Fatalf("follow without a replication token: %v", m)
	}
	if after := replication(t, plain, "a"); after["role"] != "primary" || after["role"] != before["role"] || after["seq"] != before["seq"] {
		t.Fatalf("the refused node's file moved: %v, was %v", after, before)
	}
}

func TestReplicaOf(t *testing.T) {
	a := startNode(t, withRepl)
	people(t, a)
	c := startNode(t, func(c *Config) { withRepl(c); c.ReplicaOf = a.url })
	c.mkTenant("a")
	testkit.Eventually(t, 10*time.Second, func() bool { return count(c, "a") == `{"count":3}` }, "the new tenant follows its primary")
	seq := replication(t, a, "a")["seq"].(json.Number)
	n, _ := strconv.Atoi(seq.String())
	a.q("a", `del c where n = 1`)
	testkit.Eventually(t, 10*time.Second, func() bool {
		st := replication(t, c, "a")
		s, _ := strconv.Atoi(st["seq"].(json.Number).String())
		return s > n && count(c, "a") == `{"count":2}`
	}, "the delete arrives")
}

func TestFollowerDropsASilentFeed(t *testing.T) {
	// A "primary" that answers the feed's head and then says nothing.
	hung := make(chan struct{})
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-hung:
		}
	}))
	t.Cleanup(func() { close(hung); srv.Close() })
	b := startNode(t, func(c *Config) { withRepl(c); c.KeepAlive = 20 * time.Millisecond })
	people(t, b)
	b.admin("POST", "tenants/a/follow", `{"from":"`+srv.URL+`"}`)
	testkit.Eventually(t, 10*time.Second, func() bool { return calls.Load() >= 2 }, "the follower asked again after a silence")
}

// A copy off the lineage is sent the image before any hello: a file that
// has not taken its primary's image has not heard from it.
func TestFeedOffTheLineageStartsWithTheImage(t *testing.T) {
	a := startNode(t, withRepl)
	people(t, a)
	first := func(query string) byte {
		t.Helper()
		kind, _, err := firstFrame(t, a.url+"/t/a/_replication?"+query)
		if err != nil {
			t.Fatalf("first frame: %v", err)
		}
		return kind
	}
	if k := first("since=0&history=12345"); k != frameImage {
		t.Fatalf("off the lineage the feed began with frame %q, want the image", k)
	}
	h := replication(t, a, "a")["history"].(json.Number).String()
	if k := first("since=0&history=" + h); k != frameHello {
		t.Fatalf("on the lineage the feed began with frame %q, want a hello", k)
	}
}

// A feed's connection is not used again once the feed ended: the deadline
// that ends the reading of the copy's acks would have the server start
// the next request on it already cancelled (500 "context canceled").
func TestRequestAfterAFeedOnOneConnection(t *testing.T) {
	a := startNode(t, withRepl)
	people(t, a)
	tr := &http.Transport{MaxConnsPerHost: 1}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	for i := range 20 {
		req, err := http.NewRequest("GET", a.url+"/t/a/_replication?since=0&history=12345", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+replToken)
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, res.Body); err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 || !res.Close {
			t.Fatalf("feed %d: %d, the connection kept (close: %v)", i, res.StatusCode, res.Close)
		}
		res, err = hc.Get(a.url + "/t/a/c?count")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("the request after feed %d: %d %s", i, res.StatusCode, body)
		}
	}
}

// A primary's hello says whether its copies may acknowledge records
// unsynced: only when it answers no write on their acks (no --sync always).
func TestFeedHelloSaysWhetherAcksMayBeUnsynced(t *testing.T) {
	for _, c := range []struct {
		sync string
		want bool
	}{{"always", false}, {"off", true}, {"100", true}} {
		a := startNode(t, func(cfg *Config) { withRepl(cfg); cfg.Sync = c.sync })
		people(t, a)
		h := replication(t, a, "a")["history"].(json.Number).String()
		kind, payload, err := firstFrame(t, a.url+"/t/a/_replication?since=0&history="+h)
		if err != nil || kind != frameHello {
			t.Fatalf("--sync %s: first frame %q (%v), want a hello", c.sync, kind, err)
		}
		var hello replHello
		if err := json.Unmarshal(payload, &hello); err != nil {
			t.Fatal(err)
		}
		if hello.Applied != c.want {
			t.Errorf("--sync %s: hello says applied %v, want %v", c.sync, hello.Applied, c.want)
		}
	}
}

// firstFrame opens the replication feed at url with the replication token
// and reads its first frame.
func firstFrame(t *testing.T, url string) (kind byte, payload []byte, err error) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+replToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("feed: %d", res.StatusCode)
	}
	return readFrame(bufio.NewReader(res.Body))
}
