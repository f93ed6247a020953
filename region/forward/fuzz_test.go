package forward

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/fenec-go/fenec/internal/forwarded"
	"github.com/fenec-go/fenec/internal/httptoken"
)

// framingClient is the address every fuzzed request comes from.
const framingClient = "192.0.2.1"

// nodeSaw is one request as a node parsed it with net/http.
type nodeSaw struct {
	method, uri, host string
	header            http.Header
	length            int64
	body              []byte
}

// pipeNode is a node reached over in-memory pipes: it parses each request
// it receives with net/http, as fenec-node does, notes it, and answers 200
// "ok". A request it cannot parse is noted as a framing fault.
type pipeNode struct {
	wg sync.WaitGroup // one goroutine per connection

	mu     sync.Mutex
	saw    []nodeSaw  // guarded by mu
	faults []string   // guarded by mu
	conns  []net.Conn // guarded by mu: the node's ends, closed at cleanup
}

func (n *pipeNode) dial(context.Context, string, string) (net.Conn, error) {
	router, node := net.Pipe()
	n.mu.Lock()
	n.conns = append(n.conns, node)
	n.mu.Unlock()
	n.wg.Go(func() { n.serve(node) })
	return router, nil
}

func (n *pipeNode) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
				n.fault(fmt.Sprintf("the node could not parse a request: %v", err))
			}
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			n.fault(fmt.Sprintf("the node could not read a body: %v", err))
			return
		}
		n.mu.Lock()
		n.saw = append(n.saw, nodeSaw{method: req.Method, uri: req.RequestURI, host: req.Host,
			header: req.Header, length: req.ContentLength, body: body})
		n.mu.Unlock()
		answer := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
		if req.Method == http.MethodHead {
			answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n"
		}
		if _, err := io.WriteString(c, answer); err != nil {
			return
		}
	}
}

func (n *pipeNode) fault(s string) {
	n.mu.Lock()
	n.faults = append(n.faults, s)
	n.mu.Unlock()
}

// state is what the node saw so far and its faults.
func (n *pipeNode) state() (int, []nodeSaw, []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.saw), slices.Clone(n.saw), slices.Clone(n.faults)
}

func (n *pipeNode) close() {
	n.mu.Lock()
	for _, c := range n.conns {
		c.Close()
	}
	n.mu.Unlock()
	n.wg.Wait()
}

// serverTakes reports whether net/http's server would hand req to its
// handler (http.ReadRequest checks less than the server does): HTTP/1, a
// valid Host where 1.1 needs one (ReadRequest has moved it to req.Host),
// header names that are tokens, no Expect but 100-continue.
func serverTakes(req *http.Request) bool {
	if req.ProtoMajor != 1 || req.ProtoAtLeast(1, 1) && req.Host == "" || !validHost(req.Host) {
		return false
	}
	for k := range req.Header {
		if k == "" || strings.IndexFunc(k, func(r rune) bool { return r > 0x7f || !httptoken.IsTokenByte(byte(r)) }) >= 0 {
			return false
		}
	}
	if e := req.Header.Get("Expect"); e != "" && !strings.EqualFold(e, "100-continue") {
		return false
	}
	return true
}

// validHost is the server's rule for a Host header's bytes.
func validHost(h string) bool {
	for i := 0; i < len(h); i++ {
		c := h[i]
		if httptoken.IsTokenByte(c) || strings.IndexByte("[]:;,=()@/", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// serveOnce runs the forwarder on req into a recorder; aborted is true
// when it ended the answer mid-way.
func serveOnce(f *Forwarder, req *http.Request) (rec *httptest.ResponseRecorder, aborted bool) {
	rec = httptest.NewRecorder()
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				panic(p)
			}
			aborted = true
		}
	}()
	f.ServeHTTP(rec, req)
	return rec, false
}

// FuzzRequestFraming feeds raw bytes, as a client's connection carries
// them (requests one after another), through the forwarder to a node that
// parses what it receives with net/http. Every request the node gets is
// well framed and is the client's own: its method, raw target and body
// byte for byte, its length declared once, no hop-by-hop header and no
// client-sent Fenec-Client or Fenec-Router-Proof but the router's own,
// one per request; a request the router answers itself reaches no node,
// the replication feed never does, and every refusal is a JSON error.
func FuzzRequestFraming(f *testing.F) {
	seeds := []string{
		"GET /t/acme/c?x=1 HTTP/1.1\r\nHost: r\r\n\r\n",
		"POST /t/acme/query HTTP/1.1\r\nHost: r\r\nContent-Length: 5\r\n\r\nhello" +
			"POST /t/acme/batch HTTP/1.1\r\nHost: r\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n",
		"POST /t/acme/c HTTP/1.1\r\nHost: r\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"GET /t/acme/_replication?since=0 HTTP/1.1\r\nHost: r\r\n\r\nGET /t/acme/%5Freplication HTTP/1.1\r\nHost: r\r\n\r\n",
		"PATCH /t/acme/c?n=eq.1 HTTP/1.1\r\nHost: r\r\nConnection: keep-alive, X-Drop\r\nX-Drop: 1\r\nKeep-Alive: 5\r\n" +
			"Fenec-Client: 10.0.0.1\r\nFenec-Router-Proof: forged\r\nContent-Length: 2\r\n\r\n{}",
		"HEAD /t/acme/c HTTP/1.0\r\n\r\n",
		"POST /t/other/query HTTP/1.1\r\nHost: r\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx",
		"GET /t/acme/../x HTTP/1.1\r\nHost: r\r\n\r\nGET /x HTTP/1.1\r\nHost: r\r\n\r\nGET /t/ACME/c HTTP/1.1\r\nHost: r\r\n\r\n",
		"DELETE /t/acme/c HTTP/1.1\r\nHost: r\r\nContent-Length: 300\r\n\r\n" + strings.Repeat("z", 300),
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	node := &pipeNode{}
	cfg := DefaultConfig()
	cfg.MaxBodyBytes = 256 // small, so that inputs past it stay small
	fwd, err := newForwarder(cfg, newPlacements(map[string]Target{
		"acme":  {Node: "n1", Addr: "n1:7070", Token: "adm"},
		"other": {Node: "n1", Addr: "n1:7070", Token: "adm"},
	}), nil, nil, node.dial, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		_ = fwd.Close()
		node.close()
	})
	f.Fuzz(func(t *testing.T, raw []byte) {
		br := bufio.NewReader(bytes.NewReader(raw))
		for range 8 {
			req, err := http.ReadRequest(br)
			if err != nil || !serverTakes(req) {
				return
			}
			if !checkFramed(t, fwd, node, req) {
				return
			}
		}
	})
}

// checkFramed forwards one request and checks what the node saw of it;
// false when the connection would not carry another request.
func checkFramed(t *testing.T, fwd *Forwarder, node *pipeNode, req *http.Request) bool {
	req.RemoteAddr = framingClient + ":4242"
	var sent bytes.Buffer // the body as the forwarder read it
	if req.Body != http.NoBody {
		req.Body = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(req.Body, &sent), req.Body}
	}
	before, _, _ := node.state()
	rec, aborted := serveOnce(fwd, req)
	n, saw, faults := node.state()
	if len(faults) > 0 {
		t.Fatalf("%s %q: %v", req.Method, req.RequestURI, faults)
	}
	if aborted {
		t.Fatalf("%s %q: the answer was cut short", req.Method, req.RequestURI)
	}
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Length") != "2" {
		// The router's own answer: nothing reached the node.
		var e map[string]any
		if n != before || rec.Code < 400 || rec.Code == http.StatusBadGateway || json.Unmarshal(rec.Body.Bytes(), &e) != nil || e["error"] == nil {
			t.Fatalf("%s %q: router answered %d %q, the node saw %d new requests", req.Method, req.RequestURI, rec.Code, rec.Body.Bytes(), n-before)
		}
	} else {
		if n != before+1 {
			t.Fatalf("%s %q: one request, the node saw %d", req.Method, req.RequestURI, n-before)
		}
		checkSaw(t, req, saw[n-1], sent.Bytes())
	}
	if replicationFeed(req.URL.Path) && n != before {
		t.Fatalf("%q: the replication feed reached the node", req.RequestURI)
	}
	// As the server would: what is left of the body is read before the
	// next request, unless too much is left, and Connection: close ends it.
	left, err := io.Copy(io.Discard, io.LimitReader(req.Body, 256<<10))
	return err == nil && left < 256<<10 && !req.Close
}

// checkSaw checks the node's request against the client's.
func checkSaw(t *testing.T, req *http.Request, s nodeSaw, body []byte) {
	t.Helper()
	what := req.Method + " " + req.RequestURI
	if s.method != req.Method || s.uri != req.RequestURI || s.host != req.Host {
		t.Fatalf("%s: the node saw %s %q host %q", what, s.method, s.uri, s.host)
	}
	if !bytes.Equal(s.body, body) {
		t.Fatalf("%s: the node's body %q, the client's %q", what, s.body, body)
	}
	if len(body) > 0 && s.length != int64(len(body)) || len(s.header["Content-Length"]) > 1 {
		t.Fatalf("%s: the node saw length %d (%q) for %d bytes", what, s.length, s.header["Content-Length"], len(body))
	}
	for k := range s.header {
		switch k {
		case "Content-Length", "X-Request-Id", "X-Forwarded-For", forwarded.HeaderClient, forwarded.HeaderProof:
			continue // the router's own
		}
		if hopByHop(k) || namedByConnection(k, req.Header["Connection"]) {
			t.Fatalf("%s: %s passed on", what, k)
		}
	}
	if c, p := s.header[forwarded.HeaderClient], s.header[forwarded.HeaderProof]; len(c) != 1 || c[0] != framingClient ||
		len(p) != 1 || p[0] != forwarded.Proof("adm") {
		t.Fatalf("%s: the node saw client %q proof %q", what, c, p)
	}
	if len(s.header["X-Request-Id"]) != 1 {
		t.Fatalf("%s: X-Request-Id %q", what, s.header["X-Request-Id"])
	}
}
