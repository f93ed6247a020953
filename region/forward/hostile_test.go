package forward

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/forwarded"
	"github.com/fenec-go/fenec/internal/h1"
	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/wire"
)

// The forwarder names the client to the node beside the proof of the
// node's admin token, and drops whatever a client sent under those names
// (and a Fenec-Copy-Wait, which a node takes only beside the proof): a
// client can neither forge them nor see the proof. With no token for the
// node it sends neither.
func TestForwardNamesTheClientWithProof(t *testing.T) {
	node := newRecorder(t, nil)
	place := newPlacements(map[string]Target{
		"acme": {Node: "n1", Addr: node.addr(), Token: "adm"},
		"open": {Node: "n1", Addr: node.addr()},
	})
	r := newRouter(t, place, fwdOpts{})
	rc := dialRaw(t, r.url)
	forged := "Fenec-Client: 198.51.100.7\r\nfenec-router-proof: " + forwarded.Proof("adm") + "\r\nFENEC-CLIENT: 10.9.9.9\r\nfenec-copy-wait: 0\r\n"
	for i, tenant := range []string{"acme", "open"} {
		resp, body := rc.send(t, "GET", "GET /t/"+tenant+"/c HTTP/1.1\r\nHost: x\r\n"+forged+"\r\n")
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", tenant, resp.StatusCode, body)
		}
		for _, h := range []string{forwarded.HeaderClient, forwarded.HeaderProof} {
			if v := resp.Header.Values(h); len(v) != 0 {
				t.Fatalf("%s: the client was shown %s %q", tenant, h, v)
			}
		}
		s := node.requests()[i]
		if v := s.Header.Values(wire.HeaderCopyWait); len(v) != 0 {
			t.Fatalf("%s: the client's Fenec-Copy-Wait %q reached the node", tenant, v)
		}
		client, proof := s.Header.Values(forwarded.HeaderClient), s.Header.Values(forwarded.HeaderProof)
		if tenant == "open" {
			if len(client)+len(proof) != 0 {
				t.Fatalf("no token: the node saw client %q proof %q", client, proof)
			}
			continue
		}
		if len(client) != 1 || client[0] != "127.0.0.1" || len(proof) != 1 || proof[0] != forwarded.Proof("adm") {
			t.Fatalf("the node saw client %q proof %q", client, proof)
		}
	}
}

// The router forwards no tenant's replication feed, however the path is
// spelled; it says the feed is served by nodes to their copies. Paths that
// only look like it are forwarded.
func TestReplicationFeedNotForwardedUnit(t *testing.T) {
	node := newRecorder(t, nil)
	place := newPlacements(map[string]Target{"acme": {Node: "n1", Addr: node.addr(), Token: "adm"}})
	r := newRouter(t, place, fwdOpts{})
	rc := dialRaw(t, r.url)
	for _, target := range []string{
		"/t/acme/_replication", "/t/acme/_replication?since=0&history=1", "/t/acme/_replication/",
		"/t/acme/%5Freplication", "/t/acme/_%72eplication",
	} {
		for _, method := range []string{"GET", "HEAD", "POST"} {
			resp, body := rc.send(t, method, method+" "+target+" HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
			var e map[string]string
			if resp.StatusCode != 404 || method != "HEAD" && (json.Unmarshal(body, &e) != nil || !strings.Contains(e["error"], "replication feed")) {
				t.Fatalf("%s %s: %d %s", method, target, resp.StatusCode, body)
			}
		}
	}
	if n := node.count(); n != 0 {
		t.Fatalf("the node saw %d requests", n)
	}
	for _, target := range []string{"/t/acme/_replicationx", "/t/acme/c/_replication", "/t/acme/_changes"} {
		if resp, body := rc.send(t, "GET", "GET "+target+" HTTP/1.1\r\nHost: x\r\n\r\n"); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", target, resp.StatusCode, body)
		}
	}
}

// A connection belongs to one request at a time, or to the pool, never
// both: a client that hangs up just after its answer came back — its
// hang-up hook running once the connection went back to the pool — does
// not close that connection under the next request, which took it from
// the pool. Before, the hook closed it, and a plain write that ran was
// answered 502 "may have run".
func TestHangUpAfterAnswerLeavesPooledConnAlone(t *testing.T) {
	release := make(chan struct{})
	node := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Hold") != "" {
			<-release
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"for": "`+r.Header.Get("X-Request-Id")+`"}`)
	})
	tgt := Target{Node: "a", Addr: node.addr()}
	r := newRouter(t, newPlacements(map[string]Target{"acme": tgt}), fwdOpts{})

	// The first request, run by hand so that its hang-up hook can be run
	// late: its connection is in the pool when the hook runs.
	req := httptest.NewRequest("POST", "/t/acme/query", strings.NewReader(`{"query": "put c {n: 1}"}`))
	req.Header.Set("X-Request-Id", "first")
	x := &exchange{body: new(bytes.Buffer), r: req, tenant: "acme", route: routeQuery, start: time.Now()}
	x.deadline = x.start.Add(time.Minute)
	if err := r.f.readBody(httptest.NewRecorder(), x); err != nil {
		t.Fatal(err)
	}
	x.classify()
	if code := r.f.forward(httptest.NewRecorder(), x, tgt); code != 200 {
		t.Fatalf("first request: %d", code)
	}
	if n := r.f.pools.lookup("a").idleCount(); n != 1 {
		t.Fatalf("%d idle connections after the first request, want 1", n)
	}

	// The next write takes that connection and waits at the node.
	type answer struct {
		code int
		body string
	}
	got := make(chan answer, 1)
	hc := client(t)
	go func() {
		req, _ := http.NewRequest("POST", r.url+"/t/acme/query", strings.NewReader(`{"query": "put c {n: 2}"}`))
		req.Header.Set("X-Hold", "1")
		req.Header.Set("X-Request-Id", "second")
		res, err := hc.Do(req)
		if err != nil {
			got <- answer{body: err.Error()}
			return
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		got <- answer{res.StatusCode, string(b)}
	}()
	waitPhase(t, r.f, "a", "acme", phaseSent)
	if n := node.conns.Load(); n != 1 {
		t.Fatalf("the second write went out on a connection of its own (%d connections)", n)
	}
	x.fl.clientGone() // the first client's hang-up, seen late
	close(release)
	a := <-got
	if a.code != 200 || !strings.Contains(a.body, `"second"`) {
		t.Fatalf("the second write was answered %d %s", a.code, a.body)
	}
}

// A client that stops reading a long answer is cut by the router's loop
// once a write waited the gap (h1.Server.WriteGap), and the request counts
// as the client's (499), not as the node failing midway: the node's answer
// came whole and in time.
func TestStalledClientIsCutAndCountedAsTheClients(t *testing.T) {
	const size = 16 << 20
	node := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		_, _ = w.Write(bytes.Repeat([]byte("a"), size))
	})
	tgt := Target{Node: "a", Addr: node.addr()}
	r := newRouter(t, newPlacements(map[string]Target{"acme": tgt}), fwdOpts{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	loop := &h1.Server{Handler: r.f, Fallback: &http.Server{Handler: r.f, ReadHeaderTimeout: 5 * time.Second},
		Prefix: "/t/", WriteGap: 300 * time.Millisecond}
	served := make(chan error, 1)
	go func() { served <- loop.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = loop.Shutdown(ctx)
		<-served
	})
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(1024)
	if _, err := io.WriteString(c, "GET /t/acme/c HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 15*time.Second, func() bool { return r.requests(t, "rest", "499") == 1 },
		"the stalled client's request ended, counted as the client's")
	if n := r.upstreamErrors(t, "a"); n != 0 {
		t.Fatalf("%v upstream errors counted against node a for a client that stopped reading", n)
	}
}
