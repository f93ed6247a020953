package forward

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenec-go/fenec/internal/testkit"
)

// fakePlacements is a Placements a test sets by hand.
type fakePlacements struct {
	mu      sync.Mutex
	ready   bool              // guarded by mu
	targets map[string]Target // guarded by mu
}

func newPlacements(ts map[string]Target) *fakePlacements {
	p := &fakePlacements{ready: true, targets: map[string]Target{}}
	for k, v := range ts {
		p.targets[k] = v
	}
	return p
}

func (p *fakePlacements) Lookup(t string) (Target, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	tg, ok := p.targets[t]
	return tg, ok
}

func (p *fakePlacements) Ready() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ready
}

func (p *fakePlacements) set(t string, tg Target) {
	p.mu.Lock()
	p.targets[t] = tg
	p.mu.Unlock()
}

func (p *fakePlacements) setReady(r bool) {
	p.mu.Lock()
	p.ready = r
	p.mu.Unlock()
}

// fwdOpts changes a test forwarder's configuration or hooks.
type fwdOpts struct {
	cfg  func(*Config)
	dial dialFunc
	now  func() time.Time
}

// testRouter is a forwarder behind an httptest server.
type testRouter struct {
	f   *Forwarder
	reg *prometheus.Registry
	srv *httptest.Server
	url string
}

func newRouter(tb testing.TB, place Placements, o fwdOpts) *testRouter {
	tb.Helper()
	cfg := DefaultConfig()
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	reg := prometheus.NewRegistry()
	f, err := newForwarder(cfg, place, reg, nil, o.dial, o.now)
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(f)
	tb.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		_ = f.Close()
		_ = f.Close()
	})
	return &testRouter{f: f, reg: reg, srv: srv, url: srv.URL}
}

func (tr *testRouter) cuts(tb testing.TB, outcome string) float64 {
	return testkit.CounterValue(tb, tr.f.metrics.cuts.WithLabelValues(outcome))
}

func (tr *testRouter) requests(tb testing.TB, rt, code string) float64 {
	return testkit.CounterValue(tb, tr.f.metrics.requests.WithLabelValues(rt, code))
}

func (tr *testRouter) upstreamErrors(tb testing.TB, node string) float64 {
	return testkit.CounterValue(tb, tr.f.metrics.upstream.WithLabelValues(node))
}

// client returns a keep-alive client that the test cleans up.
func client(tb testing.TB) *http.Client {
	tb.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}
	tb.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// do sends a request and reads the whole answer.
func do(tb testing.TB, c *http.Client, method, url string, body []byte, hdr map[string]string) (*http.Response, []byte) {
	tb.Helper()
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(string(body))
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		tb.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("%s %s: read body: %v", method, url, err)
	}
	return resp, b
}

// rawConn is a client connection a test writes raw HTTP on.
type rawConn struct {
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(tb testing.TB, addr string) *rawConn {
	tb.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(addr, "http://"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return &rawConn{c: c, br: bufio.NewReader(c)}
}

// send writes raw request bytes and reads one answer whole.
func (rc *rawConn) send(tb testing.TB, method, raw string) (*http.Response, []byte) {
	tb.Helper()
	if _, err := io.WriteString(rc.c, raw); err != nil {
		tb.Fatal(err)
	}
	_ = rc.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(rc.br, &http.Request{Method: method})
	if err != nil {
		tb.Fatalf("read answer: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("read answer body: %v", err)
	}
	return resp, b
}

// seen is what an upstream received.
type seen struct {
	Method, URI string
	Header      http.Header
	Body        []byte
}

// recorder is an httptest node that records each request and answers
// with answer (default: 200 {"ok": true} with a length).
type recorder struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []seen           // guarded by mu
	answer http.HandlerFunc // guarded by mu
	conns  atomic.Int64
}

func newRecorder(tb testing.TB, answer http.HandlerFunc) *recorder {
	tb.Helper()
	rec := &recorder{answer: answer}
	rec.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.got = append(rec.got, seen{Method: r.Method, URI: r.RequestURI, Header: r.Header.Clone(), Body: b})
		answer := rec.answer
		rec.mu.Unlock()
		if answer != nil {
			answer(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "13")
		_, _ = io.WriteString(w, `{"ok": true}`+"\n")
	}))
	rec.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			rec.conns.Add(1)
		}
	}
	rec.srv.Start()
	tb.Cleanup(func() {
		rec.srv.CloseClientConnections()
		rec.srv.Close()
	})
	return rec
}

func (rec *recorder) setAnswer(h http.HandlerFunc) {
	rec.mu.Lock()
	rec.answer = h
	rec.mu.Unlock()
}

func (rec *recorder) addr() string { return rec.srv.Listener.Addr().String() }

func (rec *recorder) requests() []seen {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]seen(nil), rec.got...)
}

func (rec *recorder) count() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return len(rec.got)
}

// scripted is a raw TCP node whose n-th connection is served by the n-th
// script (the last one serves the rest).
type scripted struct {
	ln      net.Listener
	scripts []func(c net.Conn, br *bufio.Reader)
	accepts atomic.Int64
	wg      sync.WaitGroup
	mu      sync.Mutex
	open    []net.Conn // guarded by mu
}

func newScripted(tb testing.TB, scripts ...func(c net.Conn, br *bufio.Reader)) *scripted {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &scripted{ln: ln, scripts: scripts}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := int(s.accepts.Add(1)) - 1
			s.mu.Lock()
			s.open = append(s.open, c)
			s.mu.Unlock()
			script := s.scripts[min(n, len(s.scripts)-1)]
			s.wg.Go(func() { script(c, bufio.NewReader(c)) })
		}
	})
	tb.Cleanup(func() {
		_ = ln.Close()
		s.mu.Lock()
		for _, c := range s.open {
			_ = c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *scripted) addr() string { return s.ln.Addr().String() }

// serveOK answers every request on the connection 200 with its body's
// length, recording the bodies it read.
func serveOK(bodies chan<- []byte) func(c net.Conn, br *bufio.Reader) {
	return func(c net.Conn, br *bufio.Reader) {
		defer c.Close()
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			b, err := io.ReadAll(req.Body)
			if err != nil {
				return
			}
			if bodies != nil {
				bodies <- b
			}
			ans := `{"ok": true}`
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n"+ans); err != nil {
				return
			}
		}
	}
}

// waitPhase waits until a request for tenant is in flight to node in ph.
func waitPhase(tb testing.TB, f *Forwarder, node, tenant string, ph phase) {
	tb.Helper()
	testkit.Eventually(tb, 20*time.Second, func() bool {
		for _, p := range f.inFlight(node, tenant) {
			if p == ph {
				return true
			}
		}
		return false
	})
}

// async runs a request in the background; wait returns its answer.
type async struct {
	done chan struct{}
	resp *http.Response
	body []byte
	err  error
}

func goDo(c *http.Client, req *http.Request) *async {
	a := &async{done: make(chan struct{})}
	go func() {
		defer close(a.done)
		resp, err := c.Do(req)
		if err != nil {
			a.err = err
			return
		}
		defer resp.Body.Close()
		a.resp = resp
		a.body, a.err = io.ReadAll(resp.Body)
	}()
	return a
}

func (a *async) wait(tb testing.TB) (*http.Response, []byte, error) {
	tb.Helper()
	select {
	case <-a.done:
	case <-time.After(30 * time.Second):
		tb.Fatal("request did not end")
	}
	return a.resp, a.body, a.err
}

func newReq(tb testing.TB, ctx context.Context, method, url string, body []byte, hdr map[string]string) *http.Request {
	tb.Helper()
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(string(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		tb.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return req
}

// newRecorderRaw is an httptest node that runs h without reading the body
// first; it returns the node's address.
func newRecorderRaw(tb testing.TB, h http.HandlerFunc) string {
	tb.Helper()
	srv := httptest.NewServer(h)
	tb.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv.Listener.Addr().String()
}
