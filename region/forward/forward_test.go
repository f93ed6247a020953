package forward

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
)

func randomBytes(n int, seed uint64) []byte {
	var key [32]byte
	key[0] = byte(seed)
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(key).Read(b)
	return b
}

func TestForwardRawTargetsHeadersAndBody(t *testing.T) {
	node := newRecorder(t, nil)
	place := newPlacements(map[string]Target{"acme": {Node: "n1", Addr: node.addr()}})
	r := newRouter(t, place, fwdOpts{})
	rc := dialRaw(t, r.url)

	targets := []string{
		"/t/acme/users?name=eq.a%20b&tag=in.(x,y)&q=%2F%2e%2E",
		"/t/acme/./a/../b//c?x=%2e%2e&y=%41",
		"/t/acme/users%2Fx?select=a,b&order=f.desc",
		"/t/acme",
		"/t/acme?x=1",
	}
	for i, target := range targets {
		body := randomBytes(3000+i, uint64(i))
		raw := "POST " + target + " HTTP/1.1\r\nHost: router.example\r\n" +
			"Content-Type: application/octet-stream\r\n" +
			fmt.Sprintf("Content-Length: %d\r\n", len(body)) +
			"Connection: keep-alive, X-Secret\r\nX-Secret: drop me\r\nKeep-Alive: timeout=5\r\n" +
			"Te: trailers\r\nProxy-Authorization: Basic x\r\nUpgrade: nothing\r\n" +
			"X-Multi: one\r\nX-Multi: two\r\nAuthorization: Bearer tok\r\n" +
			"X-Forwarded-For: 10.1.2.3\r\nX-Request-Id: req-abc.123\r\n\r\n" + string(body)
		resp, got := rc.send(t, "POST", raw)
		if resp.StatusCode != 200 || string(got) != `{"ok": true}`+"\n" {
			t.Fatalf("%s: answer %d %q", target, resp.StatusCode, got)
		}
		s := node.requests()[i]
		if s.Method != "POST" || s.URI != target {
			t.Errorf("node saw %s %q, want POST %q", s.Method, s.URI, target)
		}
		if !bytes.Equal(s.Body, body) {
			t.Errorf("%s: body differs (%d bytes, want %d)", target, len(s.Body), len(body))
		}
		for _, h := range []string{"X-Secret", "Keep-Alive", "Te", "Proxy-Authorization", "Upgrade"} {
			if v, ok := s.Header[h]; ok {
				t.Errorf("hop-by-hop %s passed on: %q", h, v)
			}
		}
		if c := s.Header.Get("Connection"); c != "" {
			t.Errorf("Connection passed on: %q", c)
		}
		if got := s.Header["X-Multi"]; len(got) != 2 || got[0] != "one" || got[1] != "two" {
			t.Errorf("X-Multi = %q", got)
		}
		if got := s.Header.Get("Authorization"); got != "Bearer tok" {
			t.Errorf("Authorization = %q", got)
		}
		if got := s.Header.Get("X-Forwarded-For"); got != "10.1.2.3, 127.0.0.1" {
			t.Errorf("X-Forwarded-For = %q", got)
		}
		if got := s.Header.Get("X-Request-Id"); got != "req-abc.123" {
			t.Errorf("X-Request-Id = %q", got)
		}
	}
}

func TestForwardRequestIDAndChunkedBody(t *testing.T) {
	node := newRecorder(t, nil)
	place := newPlacements(map[string]Target{"acme": {Node: "n1", Addr: node.addr()}})
	r := newRouter(t, place, fwdOpts{})
	rc := dialRaw(t, r.url)

	body := "hello, chunked world"
	raw := "POST /t/acme/query HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nX-Request-Id: has space\r\n\r\n" +
		"7\r\nhello, \r\n" + fmt.Sprintf("%x\r\n%s\r\n", len(body)-7, body[7:]) + "0\r\n\r\n"
	if resp, _ := rc.send(t, "POST", raw); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	resp, _ := rc.send(t, "GET", "GET /t/acme/users HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	got := node.requests()
	if string(got[0].Body) != body {
		t.Errorf("chunked body arrived as %q", got[0].Body)
	}
	if got[0].Header.Get("Transfer-Encoding") != "" || got[0].Header.Get("Content-Length") != fmt.Sprint(len(body)) {
		t.Errorf("framing: TE %q CL %q", got[0].Header.Get("Transfer-Encoding"), got[0].Header.Get("Content-Length"))
	}
	ids := map[string]bool{}
	for _, s := range got {
		id := s.Header.Get("X-Request-Id")
		if len(id) != 16 || strings.Trim(id, "0123456789abcdef") != "" {
			t.Errorf("generated X-Request-Id %q", id)
		}
		ids[id] = true
	}
	if len(ids) != 2 {
		t.Errorf("request ids not distinct: %v", ids)
	}
	if got[1].Header.Get("Content-Length") != "" || len(got[1].Body) != 0 {
		t.Errorf("GET without a body gained one: CL %q body %q", got[1].Header.Get("Content-Length"), got[1].Body)
	}
}

func TestForwardAnswersPassBack(t *testing.T) {
	big := randomBytes(1<<20, 7)
	node := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Node", "n1")
		h.Set("Connection", "X-Hop")
		h.Set("X-Hop", "1")
		h.Set("Fenec-Seq", "42")
		switch r.URL.Path {
		case "/t/acme/sized":
			h.Set("Content-Length", fmt.Sprint(len(big)))
			w.WriteHeader(201)
			_, _ = w.Write(big)
		case "/t/acme/chunked":
			// No length: the node's server chunks it.
			for i := 0; i < len(big); i += 4096 {
				_, _ = w.Write(big[i : i+4096])
			}
		case "/t/acme/head":
			h.Set("Content-Length", "1234")
		case "/t/acme/empty":
			w.WriteHeader(204)
		}
	})
	place := newPlacements(map[string]Target{"acme": {Node: "n1", Addr: "http://" + node.addr()}})
	r := newRouter(t, place, fwdOpts{})
	rc := dialRaw(t, r.url)

	resp, body := rc.send(t, "GET", "GET /t/acme/sized HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode != 201 || !bytes.Equal(body, big) || resp.ContentLength != int64(len(big)) {
		t.Fatalf("sized: %d, %d bytes, CL %d", resp.StatusCode, len(body), resp.ContentLength)
	}
	if resp.Header.Get("X-Node") != "n1" || resp.Header.Get("Fenec-Seq") != "42" || resp.Header.Get("X-Hop") != "" {
		t.Errorf("answer headers: %v", resp.Header)
	}
	resp, body = rc.send(t, "GET", "GET /t/acme/chunked HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode != 200 || !bytes.Equal(body, big) {
		t.Fatalf("chunked: %d, %d bytes", resp.StatusCode, len(body))
	}
	resp, body = rc.send(t, "HEAD", "HEAD /t/acme/head HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode != 200 || len(body) != 0 || resp.Header.Get("Content-Length") != "1234" {
		t.Fatalf("head: %d, %d bytes, CL %q", resp.StatusCode, len(body), resp.Header.Get("Content-Length"))
	}
	resp, body = rc.send(t, "DELETE", "DELETE /t/acme/empty HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode != 204 || len(body) != 0 {
		t.Fatalf("empty: %d, %d bytes", resp.StatusCode, len(body))
	}
	// The same client connection still works, and every answer came over
	// one pooled connection to the node.
	resp, _ = rc.send(t, "GET", "GET /t/acme/sized HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode != 201 {
		t.Fatalf("again: %d", resp.StatusCode)
	}
	if n := node.conns.Load(); n != 1 {
		t.Errorf("node saw %d connections, want 1 kept alive", n)
	}
	// An answer passed on whole is counted as the request ends, which may
	// be just after the client has it.
	testkit.Eventually(t, 5*time.Second, func() error {
		if v := r.requests(t, "rest", "201"); v != 2 {
			return fmt.Errorf("requests_total{rest,201} = %v, want 2", v)
		}
		return nil
	})
}

func TestRouterOwnStatuses(t *testing.T) {
	node := newRecorder(t, nil)
	place := newPlacements(map[string]Target{"acme": {Node: "n1", Addr: node.addr()}})
	r := newRouter(t, place, fwdOpts{})
	rc := dialRaw(t, r.url)
	for _, target := range []string{"/t/Acme/x", "/t/%61cme/x", "/t//x", "/t/" + strings.Repeat("a", 65) + "/x", "/t/a.b/x"} {
		resp, body := rc.send(t, "GET", "GET "+target+" HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp.StatusCode != 400 || !json.Valid(body) {
			t.Errorf("%s: %d %s", target, resp.StatusCode, body)
		}
	}
	resp, body := rc.send(t, "GET", "GET /t/nobody/x HTTP/1.1\r\nHost: x\r\n\r\n")
	var e map[string]string
	if resp.StatusCode != 404 || json.Unmarshal(body, &e) != nil || e["error"] == "" {
		t.Errorf("unknown tenant: %d %s", resp.StatusCode, body)
	}
	place.setReady(false)
	resp, _ = rc.send(t, "GET", "GET /t/nobody/x HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("not ready: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if node.count() != 0 {
		t.Errorf("node saw %d requests", node.count())
	}
}

func TestBodyTooLarge(t *testing.T) {
	node := newRecorder(t, nil)
	place := newPlacements(map[string]Target{"acme": {Node: "n1", Addr: node.addr()}})
	r := newRouter(t, place, fwdOpts{cfg: func(c *Config) { c.MaxBodyBytes = 100 }})
	resp, _ := do(t, client(t), "POST", r.url+"/t/acme/query", make([]byte, 101), nil)
	if resp.StatusCode != 413 {
		t.Fatalf("status %d, want 413", resp.StatusCode)
	}
}

// sseNode streams events; after the first it waits for next, then either
// ends the stream or waits for its client to leave (reported on gone).
func sseNode(t *testing.T, next <-chan struct{}, end bool, gone chan<- struct{}) *recorder {
	return newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		_, _ = io.WriteString(w, "event: seed\ndata: {\"seq\": 1}\n\n")
		fl.Flush()
		select {
		case <-next:
		case <-r.Context().Done():
			close(gone)
			return
		}
		_, _ = io.WriteString(w, "event: change\ndata: {\"seq\": 2}\n\n")
		fl.Flush()
		if end {
			return
		}
		<-r.Context().Done()
		close(gone)
	})
}

func TestStreamNodeEnds(t *testing.T) {
	next := make(chan struct{})
	node := sseNode(t, next, true, nil)
	place := newPlacements(map[string]Target{"acme": {Node: "n1", Addr: node.addr()}})
	r := newRouter(t, place, fwdOpts{})
	resp, err := client(t).Get(r.url + "/t/acme/orders/changes?since=0")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
	}
	br := bufio.NewReader(resp.Body)
	readEvent(t, br, "seed") // arrives before the node sends more
	close(next)
	readEvent(t, br, "change")
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Fatalf("end of stream: %q, %v", rest, err)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return r.requests(t, "changes", "200") == 1 })
}

func TestStreamClientLeaves(t *testing.T) {
	next := make(chan struct{})
	gone := make(chan struct{})
	node := sseNode(t, next, false, gone)
	place := newPlacements(map[string]Target{"acme": {Node: "n1", Addr: node.addr()}})
	r := newRouter(t, place, fwdOpts{})
	c := client(t)
	resp, err := c.Get(r.url + "/t/acme/orders/changes")
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	readEvent(t, br, "seed")
	close(next)
	readEvent(t, br, "change")
	resp.Body.Close() // the client goes away mid-stream
	select {
	case <-gone:
	case <-time.After(20 * time.Second):
		t.Fatal("the node's stream did not end when the client left")
	}
}

func readEvent(tb testing.TB, br *bufio.Reader, name string) {
	tb.Helper()
	line, err := br.ReadString('\n')
	if err != nil || line != "event: "+name+"\n" {
		tb.Fatalf("read %q, %v; want event %s", line, err, name)
	}
	if _, err := br.ReadString('\n'); err != nil {
		tb.Fatal(err)
	}
	if blank, err := br.ReadString('\n'); err != nil || blank != "\n" {
		tb.Fatalf("event end %q, %v", blank, err)
	}
}

// TestResendUnsentOnFreshConn: a node that closes before reading the whole
// body gets the request again on a fresh connection, even a plain write.
func TestResendUnsentOnFreshConn(t *testing.T) {
	bodies := make(chan []byte, 4)
	node := newScripted(t,
		func(c net.Conn, br *bufio.Reader) {
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			_ = c.(*net.TCPConn).SetLinger(0) // close with the body unread
			_ = c.Close()
		},
		serveOK(bodies),
	)
	place := newPlacements(map[string]Target{"acme": {Node: "n1", Addr: node.addr()}})
	r := newRouter(t, place, fwdOpts{})
	body := randomBytes(16<<20, 3)
	resp, got := do(t, client(t), "POST", r.url+"/t/acme/query", body, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d %s", resp.StatusCode, got)
	}
	if b := <-bodies; !bytes.Equal(b, body) {
		t.Fatalf("resent body differs: %d bytes", len(b))
	}
	if n := node.accepts.Load(); n != 2 {
		t.Fatalf("node accepted %d connections, want 2", n)
	}
}

// TestResendAfterSentWhole: the connection ends after the whole request was
// read: reads and keyed writes go again, a plain write is 502 "may have run".
func TestResendAfterSentWhole(t *testing.T) {
	cases := []struct {
		name     string
		method   string
		hdr      map[string]string
		want     int
		requests int
	}{
		{"get", "GET", nil, 200, 2},
		{"keyed post", "POST", map[string]string{"Idempotency-Key": "k1"}, 200, 2},
		{"options", "OPTIONS", nil, 200, 2},
		{"plain post", "POST", nil, 502, 1},
		{"plain patch", "PATCH", nil, 502, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bodies := make(chan []byte, 4)
			node := newScripted(t,
				func(c net.Conn, br *bufio.Reader) {
					req, err := http.ReadRequest(br)
					if err == nil {
						b, _ := io.ReadAll(req.Body)
						bodies <- b
					}
					_ = c.Close() // no answer
				},
				serveOK(bodies),
			)
			place := newPlacements(map[string]Target{"acme": {Node: "n1", Addr: node.addr()}})
			r := newRouter(t, place, fwdOpts{})
			var body []byte
			if tc.method != "GET" && tc.method != "OPTIONS" {
				body = []byte(`{"query": "put orders {\"a\": 1}"}`)
			}
			resp, got := do(t, client(t), tc.method, r.url+"/t/acme/orders", body, tc.hdr)
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d %s, want %d", resp.StatusCode, got, tc.want)
			}
			if tc.want == 502 {
				var e map[string]string
				if err := json.Unmarshal(got, &e); err != nil || e["outcome"] != "unknown" || e["error"] == "" {
					t.Fatalf("502 body %s", got)
				}
				if r.upstreamErrors(t, "n1") != 1 {
					t.Errorf("upstream errors not counted")
				}
			}
			if len(bodies) != tc.requests {
				t.Fatalf("node read %d requests, want %d", len(bodies), tc.requests)
			}
			for range tc.requests {
				if b := <-bodies; !bytes.Equal(b, body) {
					t.Fatalf("body %q, want %q", b, body)
				}
			}
		})
	}
}

// TestPooledConnClosedByNodeIsDropped: a kept-alive connection the node
// closed while it sat idle is let go of before use, so even a plain write
// goes out on a fresh one and is answered.
func TestPooledConnClosedByNodeIsDropped(t *testing.T) {
	node := newScripted(t,
		func(c net.Conn, br *bufio.Reader) {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			_ = c.Close() // closed for its silence, as the node's idle timeout does
		},
		serveOK(nil),
	)
	place := newPlacements(map[string]Target{"acme": {Node: "n1", Addr: node.addr()}})
	r := newRouter(t, place, fwdOpts{})
	c := client(t)
	if resp, _ := do(t, c, "GET", r.url+"/t/acme/x", nil, nil); resp.StatusCode != 200 {
		t.Fatalf("first: %d", resp.StatusCode)
	}
	p := r.f.pools.lookup("n1")
	testkit.Eventually(t, 10*time.Second, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.idle) == 1 && !p.idle[0].usable()
	})
	resp, body := do(t, c, "POST", r.url+"/t/acme/query", []byte(`{"query": "x"}`), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("plain write on a dropped pooled conn: %d %s", resp.StatusCode, body)
	}
	if n := node.accepts.Load(); n != 2 {
		t.Fatalf("node accepted %d, want 2", n)
	}
}

// TestRecentPooledConnTakenWithoutALook: a connection back in the pool
// less than recentUse ago is taken for a replayable request without the
// look at its socket; for a plain write, or once it sat longer, it is
// looked at, and one the node closed is let go of.
func TestRecentPooledConnTakenWithoutALook(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	closed := func() *pconn { // a connection the node has closed
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		peer, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		_ = peer.Close()
		pc := newPconn(c, c)
		testkit.Eventually(t, 10*time.Second, func() bool { return !pc.usable() })
		return pc
	}
	now := time.Now()
	deadline := now.Add(time.Minute)
	cases := []struct {
		name  string
		idle  time.Duration
		trust bool
		taken bool
	}{
		{"replayable, recent", 0, true, true},
		{"replayable, just under recentUse", recentUse - time.Millisecond, true, true},
		{"replayable, idle recentUse", recentUse, true, false},
		{"plain write, recent", 0, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &pool{node: "n1", addr: ln.Addr().String()}
			pc := closed()
			defer pc.close()
			p.put(pc, p.addr, now.Add(-tc.idle), 4)
			got := p.takeIdle(now, time.Minute, deadline, tc.trust)
			if (got != nil) != tc.taken {
				t.Fatalf("taken %v, want %v", got != nil, tc.taken)
			}
			if n := p.idleCount(); n != 0 {
				t.Fatalf("%d left idle", n)
			}
		})
	}
}

// TestReadOnRecentPooledConnClosedByNode: a read that took, without a
// look, a pooled connection the node had closed meets no answer and is
// sent again on a fresh connection: answered 200, the node reached twice.
func TestReadOnRecentPooledConnClosedByNode(t *testing.T) {
	node := newScripted(t,
		func(c net.Conn, br *bufio.Reader) {
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			_ = c.Close() // as a node that stops does
		},
		serveOK(nil),
	)
	place := newPlacements(map[string]Target{"acme": {Node: "n1", Addr: node.addr()}})
	clock := newOffsetClock()
	r := newRouter(t, place, fwdOpts{now: clock.now})
	c := client(t)
	if resp, _ := do(t, c, "GET", r.url+"/t/acme/x", nil, nil); resp.StatusCode != 200 {
		t.Fatalf("first: %d", resp.StatusCode)
	}
	p := r.f.pools.lookup("n1")
	testkit.Eventually(t, 10*time.Second, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.idle) == 1 && !p.idle[0].usable()
	})
	p.mu.Lock()
	back := p.idle[0].idleSince
	p.mu.Unlock()
	clock.advance(back.Sub(clock.now())) // taken as just back in the pool
	resp, body := do(t, c, "GET", r.url+"/t/acme/x", nil, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("read on a closed recent pooled conn: %d %s", resp.StatusCode, body)
	}
	if n := node.accepts.Load(); n != 2 {
		t.Fatalf("node accepted %d, want 2", n)
	}
}

// TestIdleTimeoutDropsConn: a pooled connection idle past --idle-timeout is
// not used.
func TestIdleTimeoutDropsConn(t *testing.T) {
	node := newRecorder(t, nil)
	place := newPlacements(map[string]Target{"acme": {Node: "n1", Addr: node.addr()}})
	clock := newOffsetClock()
	r := newRouter(t, place, fwdOpts{now: clock.now})
	c := client(t)
	do(t, c, "GET", r.url+"/t/acme/x", nil, nil)
	do(t, c, "GET", r.url+"/t/acme/x", nil, nil)
	if n := node.conns.Load(); n != 1 {
		t.Fatalf("conns %d before idling, want 1", n)
	}
	clock.advance(51 * time.Second)
	do(t, c, "GET", r.url+"/t/acme/x", nil, nil)
	if n := node.conns.Load(); n != 2 {
		t.Fatalf("conns %d after idling past the timeout, want 2", n)
	}
}

// TestDeadNodeFast502: a node that refuses connections, or whose dial hangs,
// is answered 502 within a loose bound of the dial timeout.
func TestDeadNodeFast502(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	_ = ln.Close()
	hang := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == "blackhole:1" {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	place := newPlacements(map[string]Target{
		"dead": {Node: "n1", Addr: refused},
		"lost": {Node: "n2", Addr: "blackhole:1"},
	})
	r := newRouter(t, place, fwdOpts{dial: hang, cfg: func(c *Config) { c.DialTimeout = 200 * time.Millisecond }})
	c := client(t)
	for _, tenant := range []string{"dead", "lost"} {
		start := time.Now()
		resp, body := do(t, c, "POST", r.url+"/t/"+tenant+"/query", []byte(`{}`), nil)
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%s: 502 took %v", tenant, took)
		}
		var e map[string]string
		if resp.StatusCode != 502 || json.Unmarshal(body, &e) != nil || e["outcome"] != "" {
			t.Errorf("%s: %d %s", tenant, resp.StatusCode, body)
		}
	}
	if r.upstreamErrors(t, "n1") != 1 || r.upstreamErrors(t, "n2") != 1 {
		t.Errorf("upstream errors %v %v", r.upstreamErrors(t, "n1"), r.upstreamErrors(t, "n2"))
	}
}

// TestUpstreamTimeout: a node that never answers is 502 after
// --upstream-timeout; a plain write says it may have run.
func TestUpstreamTimeout(t *testing.T) {
	release := make(chan struct{})
	node := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) })
	place := newPlacements(map[string]Target{"acme": {Node: "n1", Addr: node.addr()}})
	r := newRouter(t, place, fwdOpts{cfg: func(c *Config) {
		c.UpstreamTimeout = 300 * time.Millisecond
		c.DialTimeout = 100 * time.Millisecond
	}})
	resp, body := do(t, client(t), "POST", r.url+"/t/acme/query", []byte(`{}`), nil)
	var e map[string]string
	if resp.StatusCode != 502 || json.Unmarshal(body, &e) != nil || e["outcome"] != "unknown" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

// offsetClock is the real clock moved on by hand.
type offsetClock struct{ off atomic.Int64 }

func newOffsetClock() *offsetClock             { return &offsetClock{} }
func (c *offsetClock) now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *offsetClock) advance(d time.Duration) { c.off.Add(int64(d)) }

// TestAnswerFraming: answers the node frames in other ways — interim 1xx,
// close-delimited, HTTP/1.0, chunked with trailers, headers named by
// Connection — pass back whole; a malformed one is 502.
func TestAnswerFraming(t *testing.T) {
	answers := map[string]string{
		"/t/acme/interim":  "HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody",
		"/t/acme/closing":  "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\ndata: 1\n\ndata: 2\n\n",
		"/t/acme/http10":   "HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nold",
		"/t/acme/trailers": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\nX-Sum: 5\r\n\r\n",
		"/t/acme/named":    "HTTP/1.1 200 OK\r\nConnection: X-Hop, keep-alive\r\nX-Hop: 1\r\nX-End: 2\r\ncontent-length: 2\r\nx-lower: v\r\nX-Dup: a\r\nX-Dup: b\r\n\r\nok",
		"/t/acme/garbage":  "HTTP/1.1 OK\r\n\r\n",
	}
	node := newScripted(t, func(c net.Conn, br *bufio.Reader) {
		defer c.Close()
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			ans := answers[req.URL.Path]
			if _, err := io.WriteString(c, ans); err != nil {
				return
			}
			if strings.Contains(ans, "close") || strings.HasPrefix(ans, "HTTP/1.0") || strings.Contains(ans, "HTTP/1.1 OK") {
				return
			}
		}
	})
	place := newPlacements(map[string]Target{"acme": {Node: "n1", Addr: node.addr()}})
	r := newRouter(t, place, fwdOpts{})
	rc := dialRaw(t, r.url)
	get := func(path string) (*http.Response, string) {
		resp, body := rc.send(t, "GET", "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
		return resp, string(body)
	}
	if resp, body := get("/t/acme/interim"); resp.StatusCode != 200 || body != "body" {
		t.Errorf("interim: %d %q", resp.StatusCode, body)
	}
	if resp, body := get("/t/acme/closing"); resp.StatusCode != 200 || body != "data: 1\n\ndata: 2\n\n" {
		t.Errorf("close-delimited: %d %q", resp.StatusCode, body)
	}
	if resp, body := get("/t/acme/http10"); resp.StatusCode != 200 || body != "old" {
		t.Errorf("http/1.0: %d %q", resp.StatusCode, body)
	}
	if resp, body := get("/t/acme/trailers"); resp.StatusCode != 200 || body != "abcde" {
		t.Errorf("trailers: %d %q", resp.StatusCode, body)
	}
	resp, body := get("/t/acme/named")
	if resp.StatusCode != 200 || body != "ok" || resp.Header.Get("X-Hop") != "" || resp.Header.Get("X-End") != "2" ||
		resp.Header.Get("X-Lower") != "v" || len(resp.Header["X-Dup"]) != 2 {
		t.Errorf("named: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	if resp, body := get("/t/acme/garbage"); resp.StatusCode != 502 {
		t.Errorf("garbage: %d %q", resp.StatusCode, body)
	}
	// Connections: interim and closing on one (the node closed it), http10
	// on one, trailers, named and garbage on one (kept after the chunked
	// answer's trailer), and garbage again on a fresh one (a read is asked
	// again once).
	if n := node.accepts.Load(); n != 4 {
		t.Errorf("node accepted %d connections, want 4", n)
	}
}

// TestConcurrentForwarding: many clients at once, reads and writes, over
// pooled connections; every answer is the node's.
func TestConcurrentForwarding(t *testing.T) {
	node := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Uri", r.RequestURI)
		w.WriteHeader(200)
		_, _ = w.Write([]byte(r.RequestURI))
	})
	place := newPlacements(map[string]Target{"acme": {Node: "n1", Addr: node.addr()}, "beta": {Node: "n1", Addr: node.addr()}})
	r := newRouter(t, place, fwdOpts{})
	c := client(t)
	var wg sync.WaitGroup
	errs := make(chan string, 400)
	for g := range 20 {
		wg.Go(func() {
			for i := range 20 {
				tenant := []string{"acme", "beta"}[(g+i)%2]
				uri := fmt.Sprintf("/t/%s/orders?g=%d&i=%d", tenant, g, i)
				method := []string{"GET", "POST", "PATCH"}[i%3]
				req, _ := http.NewRequest(method, r.url+uri, strings.NewReader(uri))
				resp, err := c.Do(req)
				if err != nil {
					errs <- err.Error()
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(b) != uri || resp.Header.Get("X-Uri") != uri {
					errs <- fmt.Sprintf("%s: %d %q", uri, resp.StatusCode, b)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if n := node.count(); n != 400 {
		t.Fatalf("node saw %d requests", n)
	}
	for _, s := range node.requests() {
		if string(s.Body) != s.URI {
			t.Fatalf("body %q for %q", s.Body, s.URI)
		}
	}
}

// TestForwardOwnAnswersCarryRequestID: mounted alone, the forwarder gives
// its own answers — a refusal before anything is sent, a node that cannot
// be reached — the client's sane id, or one it makes, and the unknown
// tenant on a region's router is the region's refusal.
func TestForwardOwnAnswersCarryRequestID(t *testing.T) {
	place := newPlacements(map[string]Target{"gone": {Node: "n1", Addr: "127.0.0.1:1"}})
	r := newRouter(t, place, fwdOpts{})
	regional := newRouter(t, place, fwdOpts{cfg: func(c *Config) { c.Region = "us" }})
	c := client(t)
	for _, tc := range []struct {
		name, url, id string
		status        int
		says          string
	}{
		{"unknown, the client's id", r.url + "/t/nobody/query", "req-7", 404, "create it"},
		{"unknown, an insane id", r.url + "/t/nobody/query", "has space", 404, "create it"},
		{"unknown, no id", r.url + "/t/nobody/query", "", 404, "create it"},
		{"unknown on a region's router", regional.url + "/t/nobody/query", "req-8", 404, "another region"},
		{"a bad tenant name", r.url + "/t/No/query", "req-9", 400, "tenant name"},
		{"a node that cannot be reached", r.url + "/t/gone/query", "req-10", 502, "unreachable"},
	} {
		hdr := map[string]string{}
		if tc.id != "" {
			hdr["X-Request-Id"] = tc.id
		}
		res, body := do(t, c, "GET", tc.url, nil, hdr)
		got := res.Header.Get("X-Request-Id")
		switch {
		case res.StatusCode != tc.status || !strings.Contains(string(body), tc.says):
			t.Errorf("%s: %d %s", tc.name, res.StatusCode, body)
		case SaneRequestID(tc.id) && got != tc.id:
			t.Errorf("%s: X-Request-Id %q, want the client's %q", tc.name, got, tc.id)
		case !SaneRequestID(tc.id) && (len(got) != 16 || strings.Trim(got, "0123456789abcdef") != ""):
			t.Errorf("%s: X-Request-Id %q, want one made", tc.name, got)
		case len(res.Header["X-Request-Id"]) != 1:
			t.Errorf("%s: X-Request-Id %q", tc.name, res.Header["X-Request-Id"])
		}
	}
}
