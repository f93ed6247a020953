package node

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/fenec-go/fenec/wire"
)

// Clients that stop reading what the node sends them: a subscriber, a
// reader of a tenant's image, a reader of a long answer. None may hold the
// tenant, and the operator's removal of it, past the body timeout, and a
// stream none past its grace once the tenant goes; a client that reads
// slowly but steadily is never cut.

// stalledClient sends raw on a connection whose receive buffer is as
// small as the kernel allows, and never reads: what the node writes backs
// up into its own socket. Closed at cleanup.
func stalledClient(t *testing.T, n *testNode, raw string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(n.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.(*net.TCPConn).SetReadBuffer(1024); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	return c
}

// bulkRows puts rows × 4 KB into collection c of tenant a: more than
// loopback's socket buffers hold, in events or in an answer.
func bulkRows(t *testing.T, n *testNode, rows int) {
	t.Helper()
	pad := strings.Repeat("p", 4000)
	for i := 0; i < rows; i += 100 {
		var b strings.Builder
		b.WriteString("[")
		for j := i; j < i+100; j++ {
			if j > i {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"name":%q,"n":%d}`, pad, j)
		}
		b.WriteString("]")
		if r := n.do("POST", "/t/a/c", b.String()); r.Status != http.StatusCreated {
			t.Fatalf("put rows: %d %s", r.Status, r.Body)
		}
	}
}

// removeWithin deletes tenant a and fails the test if that takes longer
// than within (the removal waits for every request holding the tenant).
func removeWithin(t *testing.T, n *testNode, within time.Duration) {
	t.Helper()
	done := make(chan *resp, 1)
	start := time.Now()
	go func() { done <- n.admin("DELETE", "tenants/a", "") }()
	select {
	case r := <-done:
		if r.Status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		t.Logf("removed in %v", time.Since(start).Round(time.Millisecond))
	case <-time.After(within):
		t.Fatalf("the tenant's removal still waits after %v on a client that stopped reading", within)
	}
}

func TestStalledSubscriberLetsItsTenantGo(t *testing.T) {
	// A body timeout longer than the test waits: only the cut as the
	// tenant goes can end the stalled stream in time.
	n := startNode(t, func(c *Config) { c.BodyTimeout = 5 * time.Minute })
	people(t, n)
	stalledClient(t, n, "GET /t/a/c/changes HTTP/1.1\r\nHost: x\r\n\r\n")
	// A second subscriber that reads: it is told why its stream ends.
	s := n.subscribe("/t/a/c/changes")
	s.mustNext(t, "seed")
	bulkRows(t, n, 3000) // 12 MB of events, which the stalled one never takes
	for range 30 {
		s.mustNext(t, "change")
	}
	removeWithin(t, n, 20*time.Second)
	for {
		ev, err := s.next()
		if err != nil {
			t.Fatalf("the reading subscriber's stream ended without its error event: %v", err)
		}
		if ev.Name == "error" {
			break
		}
	}
	wantJSONError(t, n.do("GET", "/t/a/c", ""), http.StatusNotFound)
}

func TestStalledReadersAreCutAfterTheBodyTimeout(t *testing.T) {
	n := startNode(t, func(c *Config) { c.BodyTimeout = 500 * time.Millisecond })
	people(t, n)
	bulkRows(t, n, 3000)
	for _, raw := range []string{
		"GET /_admin/tenants/a/file HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + adminToken + "\r\n\r\n",
		"GET /t/a/c HTTP/1.1\r\nHost: x\r\n\r\n", // a 12 MB answer
	} {
		stalledClient(t, n, raw)
	}
	time.Sleep(200 * time.Millisecond) // both handlers are writing
	removeWithin(t, n, 20*time.Second)
}

func TestSlowReaderOfALongAnswerIsNotCut(t *testing.T) {
	// The reader pauses a fortieth of the gap, and keeps its receive
	// buffer small so the node's send buffer stays so too (the kernel
	// wakes a writer once a third of that buffer drained, however steady
	// the reader): the answer takes over three gaps, and no write waits
	// near one.
	const gap = time.Second
	n := startNode(t, func(c *Config) { c.BodyTimeout = gap })
	people(t, n)
	bulkRows(t, n, 1200) // 4.8 MB
	whole := n.do("GET", "/t/a/c", "")
	if whole.Status != http.StatusOK {
		t.Fatalf("get: %d", whole.Status)
	}
	c, err := net.Dial("tcp", strings.TrimPrefix(n.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(64 << 10)
	if _, err := io.WriteString(c, "GET /t/a/c HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	start := time.Now()
	var got strings.Builder
	buf := make([]byte, 32<<10)
	for {
		k, err := io.ReadFull(res.Body, buf)
		got.Write(buf[:k])
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			t.Fatalf("cut after %d bytes, %v in: %v", got.Len(), time.Since(start), err)
		}
		time.Sleep(gap / 40)
	}
	if got.String() != string(whole.Body) {
		t.Fatalf("read %d bytes slowly, %d at once", got.Len(), len(whole.Body))
	}
	if took := time.Since(start); took < 3*gap {
		t.Fatalf("the slow read took %v: no longer than the gap it tests", took)
	}
}

func TestLongAnswerLeavesItsConnectionUsable(t *testing.T) {
	// A long answer sets a write deadline on its connection; the next
	// request on the same connection, sent after that deadline passed,
	// must not inherit it.
	const gap = 500 * time.Millisecond
	n := startNode(t, func(c *Config) { c.BodyTimeout = gap })
	people(t, n)
	bulkRows(t, n, 100)
	tr := &http.Transport{MaxIdleConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	get := func(path string) (int, int, bool) {
		reused := false
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", n.url+path, nil)
		res, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatalf("GET %s: read: %v", path, err)
		}
		return res.StatusCode, len(b), reused
	}
	if st, size, _ := get("/t/a/c"); st != http.StatusOK || size < 300<<10 {
		t.Fatalf("long answer: %d, %d bytes", st, size)
	}
	time.Sleep(3 * gap)
	st, size, reused := get("/t/a/c")
	if st != http.StatusOK || size < 300<<10 || !reused {
		t.Fatalf("the next answer on the connection: %d, %d bytes, reused %v", st, size, reused)
	}
}

func TestIdleSubscriberOutlivesTheBodyTimeout(t *testing.T) {
	// A stream's write deadline moves on before each write: a subscriber
	// that waited longer than the gap for an event still gets it.
	n := startNode(t, func(c *Config) { c.BodyTimeout = 200 * time.Millisecond })
	people(t, n)
	s := n.subscribe("/t/a/c/changes")
	s.mustNext(t, "seed")
	for range 2 {
		time.Sleep(600 * time.Millisecond)
		n.q("a", `put c {name: "late", n: 9}`)
		s.mustNext(t, "change")
	}
}

func TestPipelinedUnreadAnswersLetTheTenantGo(t *testing.T) {
	// Answers just under 4 KB to a client that pipelines requests and
	// reads none: once its socket is full, the next answer's write waits.
	// No such wait may hold the tenant past the gap: an answer past
	// net/http's 2 KB buffer whose head and body overflow its 4 KB one is
	// flushed from inside the handler (with the deadline taken only past
	// 4 KB, this removal waited for good).
	n := startNode(t, func(c *Config) { c.BodyTimeout = 500 * time.Millisecond })
	people(t, n)
	n.q("a", "put c {name: $1, n: 10}", strings.Repeat("q", 3950))
	var pipe strings.Builder
	for range 3000 {
		pipe.WriteString("GET /t/a/c?n=eq.10 HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	stalledClient(t, n, pipe.String()) // 3000 answers of 4 KB: 12 MB unread
	time.Sleep(time.Second)
	removeWithin(t, n, 20*time.Second)
}

func TestPipelinedSmallUnreadAnswersEndTheConnection(t *testing.T) {
	// Answers under 2 KB, which the server writes itself after the handler
	// returns, to a client that pipelines requests and reads none: once
	// its socket is full, that write waits. It is bounded by the gap too:
	// the node closes the connection rather than keep it, and a goroutine
	// on it, for good.
	n := startNode(t, func(c *Config) { c.BodyTimeout = 300 * time.Millisecond })
	people(t, n)
	n.q("a", "put c {name: $1, n: 10}", strings.Repeat("q", 1200))
	open := func() float64 {
		var m dto.Metric
		if err := n.s.metrics.conns.Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetGauge().GetValue()
	}
	waitOpen := func(want float64, within time.Duration, what string) {
		t.Helper()
		for end := time.Now().Add(within); open() != want; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%v open connections after %v, want %v: %s", open(), within, want, what)
			}
		}
	}
	n.client.CloseIdleConnections()
	waitOpen(0, 5*time.Second, "the test client's connections closed")

	c, err := net.Dial("tcp", strings.TrimPrefix(n.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).SetReadBuffer(1024); err != nil {
		t.Fatal(err)
	}
	sent := make(chan struct{})
	t.Cleanup(func() { c.Close(); <-sent })
	go func() { // 10 000 answers of 1.3 KB: more than both sockets hold
		defer close(sent)
		for range 10000 {
			if _, err := io.WriteString(c, "GET /t/a/c?n=eq.10 HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				return // the node closed it
			}
		}
	}()
	waitOpen(1, 5*time.Second, "the pipelining client connected")
	waitOpen(0, 20*time.Second, "a client that reads no answer keeps its connection")
}

func TestHandlerLongerThanTheGapStillAnswers(t *testing.T) {
	// Every request starts with its write deadline one gap ahead, but a
	// handler may run longer than that before it answers — here a read
	// held 700 ms for a write that never comes, with a gap of 200 ms. Its
	// answer, written by the server after the handler, must still go out;
	// twice, the second on the connection the first kept.
	n := startNode(t, func(c *Config) { c.BodyTimeout = 200 * time.Millisecond })
	people(t, n)
	for _, path := range []string{"/t/a/c?n=eq.1", "/t/a/c?limit=1"} {
		req, err := http.NewRequest("GET", n.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(wire.HeaderAfter, "1000000")
		req.Header.Set(wire.HeaderWait, "700")
		start := time.Now()
		resp, err := n.client.Do(req)
		if err != nil {
			t.Fatalf("%s held past the gap: %v", path, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode < 400 || !strings.Contains(string(body), "seq") {
			t.Fatalf("%s held past the gap: %d %q, %v", path, resp.StatusCode, body, err)
		}
		if held := time.Since(start); held < 600*time.Millisecond {
			t.Fatalf("%s answered after %v: it was not held", path, held)
		}
	}
}

func TestUnreadStalledBodyStillAnswered(t *testing.T) {
	// A body the handler refuses unread (an unknown tenant) and that then
	// stops arriving: the server reads what is left of a small body before
	// it answers, which waits out the gap, and only then writes. The
	// answer must still go out, and the connection then close.
	n := startNode(t, func(c *Config) { c.BodyTimeout = 300 * time.Millisecond })
	c, err := net.Dial("tcp", strings.TrimPrefix(n.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "POST /t/nothere/query HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"query\"")
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to a refused body that stalled: %v", err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("%d, want 404", res.StatusCode)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("the connection stayed open after the stalled body (%v)", err)
	}
}
