package node

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
)

// Answers written as they are read, the node's bound on what answers hold,
// and statements stopped by their time bound and by their client leaving.

// queryRaw is the raw HTTP/1.1 text of a /query of tenant a.
func queryRaw(query string) string {
	body, _ := json.Marshal(map[string]any{"query": query})
	return "POST /t/a/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + string(body)
}

// heapNow is the live heap after a collection.
func heapNow() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// Forty clients asking for a 20 MB collection and reading none of it hold
// a piece of their answers each, not the answers: the node's live heap
// grows by a few MB, where it grew by the answers (40 × 20 MB rendered,
// and the rows they were rendered from) when each was built whole.
func TestUnreadAnswersHoldAPieceEach(t *testing.T) {
	n := startNode(t, func(c *Config) { c.BodyTimeout = 5 * time.Minute })
	people(t, n)
	bulkRows(t, n, 5000) // 20 MB
	before := heapNow()
	const readers = 40
	conns := make([]net.Conn, readers)
	for i := range conns {
		conns[i] = stalledClient(t, n, queryRaw("get c"))
	}
	// Every handler has found its rows and is stuck writing to a client
	// that reads nothing: the budget holds each one's piece and rows.
	testkit.Eventually(t, 30*time.Second, func() bool {
		return n.s.answers.used.Load() >= readers*answerPiece
	})
	time.Sleep(200 * time.Millisecond)
	held, grew := n.s.answers.used.Load(), int64(heapNow())-int64(before)
	t.Logf("%d unread answers of 20 MB: the budget holds %d KiB, the heap grew %d MiB", readers, held>>10, grew>>20)
	if per := held / readers; per > 256<<10 {
		t.Errorf("each unread answer holds %d KiB of the budget, want a piece and 8 bytes a row", per>>10)
	}
	if grew > 64<<20 {
		t.Fatalf("the heap grew %d MiB for %d unread answers of 20 MB", grew>>20, readers)
	}
	// The node still answers everyone else, reads and writes.
	if r := n.q("a", "get c where n = 7"); !strings.Contains(string(r.Body), `"n":7`) {
		t.Fatalf("a read beside the unread answers: %s", r.Body)
	}
	n.q("a", "put c {name: 'beside', n: -1}")
	for _, c := range conns {
		c.Close()
	}
	// Their handlers end with their connections, and give their share back.
	testkit.Eventually(t, 30*time.Second, func() bool { return n.s.answers.used.Load() == 0 })
}

// A client that stops reading a streamed answer holds no lock: writes to
// its tenant land at once, and the answer, once read, is the state its
// read saw, not the one the writes made.
func TestStalledStreamBlocksNoWrite(t *testing.T) {
	n := startNode(t, func(c *Config) { c.BodyTimeout = 5 * time.Minute })
	people(t, n)
	bulkRows(t, n, 6000) // 24 MB: more than loopback's socket buffers hold
	want := n.q("a", "get c order n").Body
	// A client that reads nothing for now, with the buffers a client has
	// (one shrunk to 1 KiB would take loopback's 64 KiB segments only as
	// the kernel's zero-window probes let it, once it read again).
	c, err := net.Dial("tcp", strings.TrimPrefix(n.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, queryRaw("get c order n")); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, func() bool { return n.s.answers.used.Load() > 0 })
	time.Sleep(500 * time.Millisecond) // its handler fills the sockets and waits on them
	start := time.Now()
	n.q("a", "del c where n >= 0")
	n.q("a", "create index on c (name) @hash")
	n.q("a", "put c {name: 'after', n: 1}")
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("three writes beside a stalled reader took %v", took)
	}
	if r := n.q("a", "get c count"); strings.TrimSpace(string(r.Body)) != `{"count":1}` {
		t.Fatalf("after the writes: %s", r.Body)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatalf("read the stalled answer: %v", err)
	}
	if res.StatusCode != http.StatusOK || len(res.TransferEncoding) == 0 || string(got) != string(want) {
		t.Fatalf("the stalled answer: %d %v, %d bytes; want the %d bytes read before the writes",
			res.StatusCode, res.TransferEncoding, len(got), len(want))
	}
	// A short answer still goes out whole, with its length.
	r := n.do("POST", "/t/a/query", `{"query": "get c"}`)
	if r.Header.Get("Content-Length") == "" {
		t.Fatalf("a short answer went out with no length: %v", r.Header)
	}
}

// A streamed answer that cannot be finished — its client stopped reading
// and its tenant is removed — is cut: the client sees a body that ends
// short, never a closed array.
func TestCutStreamIsTruncated(t *testing.T) {
	n := startNode(t, func(c *Config) { c.BodyTimeout = 5 * time.Minute })
	people(t, n)
	bulkRows(t, n, 3000)
	c := stalledClient(t, n, queryRaw("get c"))
	testkit.Eventually(t, 30*time.Second, func() bool { return n.s.answers.used.Load() > 0 })
	removeWithin(t, n, 20*time.Second)
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(res.Body)
	res.Body.Close()
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a cut answer read %d bytes to %v, want an unexpected end", len(got), err)
	}
	if json.Valid(got) {
		t.Fatal("a cut answer is valid JSON")
	}
}

// Past --max-answer-memory, reads are refused 503 with Retry-After before
// they run, saying which bound; writes are not; an answer built whole
// that alone passes the bound is refused 400 naming limit; and once the
// stalled readers go, reads are answered again.
func TestAnswerBudgetRefusesReadsNotWrites(t *testing.T) {
	n := startNode(t, func(c *Config) {
		c.BodyTimeout = 5 * time.Minute
		c.MaxAnswerMemory = 1 << 20
	})
	people(t, n)
	bulkRows(t, n, 3000)
	// Stalled readers one after another, each taken or refused before the
	// next comes, until one is refused: the budget then holds less than one
	// more such answer needs.
	var conns []net.Conn
	for i := 0; ; i++ {
		if i == 100 {
			t.Fatal("a hundred stalled readers of 12 MB, none refused under a budget of 1 MiB")
		}
		c := stalledClient(t, n, queryRaw("get c"))
		conns = append(conns, c)
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			t.Fatalf("stalled reader %d: no status line: %v", i, err)
		}
		if strings.HasPrefix(line, "HTTP/1.1 503 ") {
			break
		}
		if !strings.HasPrefix(line, "HTTP/1.1 200 ") {
			t.Fatalf("stalled reader %d: %q", i, line)
		}
	}
	refused := func() bool {
		r := n.query("a", "get c")
		return r.Status == http.StatusServiceUnavailable
	}
	r := n.query("a", "get c")
	body := wantJSONError(t, r, http.StatusServiceUnavailable)
	if r.Header.Get("Retry-After") == "" || !strings.Contains(body["error"].(string), "--max-answer-memory") {
		t.Fatalf("a read past the budget: %v %s", r.Header, r.Body)
	}
	for _, path := range []string{"/t/a/c", "/_admin/tenants/a/read"} {
		var r *resp
		if strings.HasPrefix(path, "/_admin") {
			r = n.do("POST", path, `{"query": "get c"}`, "Authorization", "Bearer "+adminToken)
		} else {
			r = n.do("GET", path, "")
		}
		if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
			t.Fatalf("%s past the budget: %d %s", path, r.Status, r.Body)
		}
	}
	// Writes land, returning rows and all.
	n.q("a", "put c {name: 'w', n: -5}")
	n.q("a", "set c {owner: 'x'} where n = -5 returning *")
	if r := n.do("POST", "/t/a/batch", `{"query": "put c {name: 'v', n: -6}"}`); r.Status != http.StatusOK {
		t.Fatalf("a /batch that writes past the budget: %d %s", r.Status, r.Body)
	}
	if v := counterOf(t, n, "fenec_node_answers_refused_total").value(""); v < 4 {
		t.Fatalf("answers refused counted %v", v)
	}
	for _, c := range conns {
		c.Close()
	}
	testkit.Eventually(t, 30*time.Second, func() bool { return !refused() })
	// The budget is given back as each answer's handler ends, which may be
	// just after its client read the last byte: wait for all of it, so
	// that the next read is held to the whole bound, not to what is left.
	held := counterOf(t, n, "fenec_node_answer_bytes")
	testkit.Eventually(t, 30*time.Second, func() bool { return held.value("") == 0 }, "the answer budget given back")
	// One answer built whole past the whole bound: 400 naming limit.
	n.q("a", "create collection k (parent int)")
	n.q("a", "put k [{parent: 1}, {parent: 2}, {parent: 3}]")
	r = n.query("a", "get c select name, count(*) group name, n")
	body = wantJSONError(t, r, http.StatusBadRequest)
	if !strings.Contains(body["error"].(string), "limit") {
		t.Fatalf("an answer past the whole budget: %s", r.Body)
	}
	// Streamed, the same rows are answered: 8 bytes a row and a piece.
	if r := n.query("a", "get c"); r.Status != http.StatusOK || len(r.Body) < 12e6 {
		t.Fatalf("a streamed answer of 12 MB under a budget of 1 MiB: %d, %d bytes", r.Status, len(r.Body))
	}
}

// counterOf finds a counter the node registered, by name.
func counterOf(t *testing.T, n *testNode, name string) counterFunc {
	t.Helper()
	return counterFunc{t: t, n: n, name: name}
}

// counterFunc reads one series of the node's /_metrics as a counter.
type counterFunc struct {
	t    *testing.T
	n    *testNode
	name string
}

func (c counterFunc) value(labels string) float64 {
	c.t.Helper()
	r := c.n.do("GET", "/_metrics", "", "Authorization", "Bearer "+adminToken)
	for _, line := range strings.Split(string(r.Body), "\n") {
		if rest, ok := strings.CutPrefix(line, c.name+labels+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				c.t.Fatalf("%s: %v", line, err)
			}
			return v
		}
	}
	return 0
}

// slowStatement takes seconds on bulkRows' rows: every row's 4 000 bytes
// against a pattern of 900 repetitions, which each start may run.
const slowStatement = `get c where name ~ "p{1,900}z" order n`

// A statement past --max-statement-time is stopped and answered 503 with
// what to do, and a write stopped lands nothing; both are counted.
func TestStatementTimeStops(t *testing.T) {
	n := startNode(t, func(c *Config) { c.MaxStatementTime = 300 * time.Millisecond })
	people(t, n)
	bulkRows(t, n, 2000)
	sum := n.q("a", "get c select sum(n), count(*)").Body
	start := time.Now()
	r := n.query("a", slowStatement)
	took := time.Since(start)
	body := wantJSONError(t, r, http.StatusServiceUnavailable)
	msg := body["error"].(string)
	t.Logf("answered: %s", msg)
	if !strings.Contains(msg, "--max-statement-time") || !strings.Contains(msg, "limit") || r.Header.Get("Retry-After") != "" {
		t.Fatalf("a statement past its time: %v %s", r.Header, r.Body)
	}
	if took > 10*time.Second {
		t.Fatalf("a statement bounded to 300 ms answered after %v", took)
	}
	w := n.query("a", `set c {n: n + 1} where name ~ "p{1,900}z" or n >= 0`)
	wantJSONError(t, w, http.StatusServiceUnavailable)
	if got := n.q("a", "get c select sum(n), count(*)").Body; string(got) != string(sum) {
		t.Fatalf("a write stopped at its time landed: %s, was %s", got, sum)
	}
	// In a /batch, the refusal names the statement stopped, and the block
	// before it lands nothing either.
	slow, _ := json.Marshal(map[string]any{"query": `set c {n: n + 1} where name ~ "p{1,900}z" or n >= 0`})
	b := n.do("POST", "/t/a/batch", `{"query": "put c {name: 'first', n: -7}"}`+"\n"+string(slow))
	body = wantJSONError(t, b, http.StatusServiceUnavailable)
	if msg := body["error"].(string); !strings.Contains(msg, "line 2") || !strings.Contains(msg, "--max-statement-time") || fmt.Sprint(body["at"]) != "1" {
		t.Fatalf("a /batch stopped at its second statement: %s", b.Body)
	}
	if got := n.q("a", "get c select sum(n), count(*)").Body; string(got) != string(sum) {
		t.Fatalf("a /batch stopped at its time landed: %s, was %s", got, sum)
	}
	if v := counterOf(t, n, "fenec_node_statements_cancelled_total").value(`{reason="time"}`); v != 3 {
		t.Fatalf("statements stopped at their time counted %v, want 3", v)
	}
}

// A request whose client hangs up stops its statement: the read lock it
// held is given back at once (a write behind it lands), and it is counted
// as the client's. Before, the statement ran to its end, seconds, holding
// the lock the write waits on.
func TestClientHangUpStopsItsStatement(t *testing.T) {
	n := startNode(t, func(c *Config) { c.MaxStatementTime = 0 })
	people(t, n)
	bulkRows(t, n, 2000)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", n.url+"/t/a/query", strings.NewReader(`{"query": `+strconv.Quote(slowStatement)+`}`))
	if res, err := n.client.Do(req); err == nil {
		res.Body.Close()
		t.Fatalf("the slow statement answered %d within 300 ms", res.StatusCode)
	}
	start := time.Now()
	n.q("a", "put c {name: 'behind', n: -1}")
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("a write behind a statement whose client left waited %v", took)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		return counterOf(t, n, "fenec_node_statements_cancelled_total").value(`{reason="client"}`) == 1
	})
	if v := counterOf(t, n, "fenec_node_errors_total").value(`{status="499"}`); v != 1 {
		t.Fatalf("the hang-up counted as %v 499s", v)
	}
}

// A subscription's seed is written as it is encoded too, the same rows a
// get answers, and what it held of the budget is given back once it is
// sent: the open stream holds none.
func TestSeedIsStreamedAndGivesItsShareBack(t *testing.T) {
	n := startNode(t, nil)
	people(t, n)
	bulkRows(t, n, 1000) // 4 MB: many pieces
	want := n.q("a", "get c where n >= 2").JSON(t).([]any)
	s := n.subscribe("/t/a/c/changes?n=gte.2")
	seed := s.mustNext(t, "seed")
	if rows := seed["rows"].([]any); len(rows) != len(want) {
		t.Fatalf("seed of %d rows, the get answers %d", len(rows), len(want))
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return n.s.answers.used.Load() == 0 })
	n.q("a", "put c {name: 'later', n: 5000}")
	if ch := s.mustNext(t, "change"); !strings.Contains(fmt.Sprint(ch), "later") {
		t.Fatalf("the change after the seed: %v", ch)
	}
}
