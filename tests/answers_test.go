package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/tests/cluster"
)

// unreadQuery sends a /query of tenant a to addr on a connection whose
// receive buffer is as small as the kernel allows, and never reads: what
// the server writes backs up into its own socket. Closed at cleanup.
func unreadQuery(t *testing.T, addr, query string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.(*net.TCPConn).SetReadBuffer(1024); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"query": query})
	head := "POST /t/a/query HTTP/1.1\r\nHost: fenec\r\nContent-Type: application/json\r\nAuthorization: Bearer " +
		cluster.RouterToken + "\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	if _, err := io.WriteString(c, head+string(body)); err != nil {
		t.Fatal(err)
	}
}

// metric reads one series of a server's /_metrics (0 when absent).
func metric(t *testing.T, c *cluster.Client, series string) float64 {
	t.Helper()
	res := c.Do("GET", "/_metrics", nil)
	for _, line := range strings.Split(string(res.Body), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return v
		}
	}
	return 0
}

// Forty clients asking a node for a 20 MB collection straight and forty
// through the router, none reading a byte of it: the node's resident peak
// grows by a few tens of MB (each answer holds a piece and 8 bytes a
// row), where it grew by 2 GB for forty when each answer was built whole.
// Reads and writes beside them are answered as ever. The bound is several
// times what it takes here, a guard against whole answers coming back,
// not a measure.
func TestUnreadAnswersKeepTheNodeSmall(t *testing.T) {
	c := cluster.New(t)
	r := c.StartRouter("router", cluster.RouterOptions{Args: []string{"--body-timeout", "120"}})
	n := c.StartNode("n1", cluster.NodeOptions{Args: []string{"--body-timeout", "120"}})
	r.Register(n)
	r.Place("a", n)
	cl := r.Client()
	wantStatus(t, cl.Query("a", "create collection c (body text, n int)"), 200, "create")
	pad := strings.Repeat("p", 4000)
	for i := 0; i < 5000; i += 250 {
		docs := make([]any, 0, 250)
		for j := i; j < i+250; j++ {
			docs = append(docs, map[string]any{"body": pad, "n": j})
		}
		wantStatus(t, cl.Query("a", "insert c $1", docs), 200, "insert")
	}
	admin := n.Admin()
	rss, _, err := n.Memory()
	if err != nil {
		t.Skipf("no memory figures here: %v", err)
	}
	const readers = 40
	for range readers {
		unreadQuery(t, n.Direct(), "get c")
		unreadQuery(t, r.Addr(), "get c")
	}
	// Every handler has found its rows and waits on its client.
	cluster.Eventually(t, 60*time.Second, func() error {
		if held := metric(t, admin, "fenec_node_answer_bytes"); held < 2*readers*32<<10 {
			return fmt.Errorf("the node's answers hold %v bytes", held)
		}
		return nil
	})
	time.Sleep(time.Second)
	_, peak, err := n.Memory()
	if err != nil {
		t.Fatal(err)
	}
	held := metric(t, admin, "fenec_node_answer_bytes")
	t.Logf("node RSS %d MiB before, peak %d MiB with %d unread answers of 20 MB (they hold %.0f KiB)",
		rss>>20, peak>>20, 2*readers, held/1024)
	if grew := peak - rss; grew > 256<<20 {
		t.Fatalf("the node's resident peak grew %d MiB for %d unread answers", grew>>20, 2*readers)
	}
	wantStatus(t, cl.Query("a", "get c where n = 7 select n"), 200, "a read beside the unread answers")
	wantStatus(t, cl.Query("a", "put c {body: 'beside', n: -1}"), 200, "a write beside the unread answers")
}

// A streamed answer read through the router is whole, byte for byte the
// answer read straight from the node; and one the node cuts (its tenant
// deleted while its client reads nothing) reaches the client through the
// router short, never as an array that looks whole.
func TestStreamedAnswerThroughTheRouter(t *testing.T) {
	c := cluster.New(t)
	r := c.StartRouter("router", cluster.RouterOptions{})
	n := c.StartNode("n1", cluster.NodeOptions{})
	r.Register(n)
	r.Place("a", n)
	cl := r.Client()
	wantStatus(t, cl.Query("a", "create collection c (body text, n int)"), 200, "create")
	pad := strings.Repeat("q", 4000)
	for i := 0; i < 6000; i += 250 {
		docs := make([]any, 0, 250)
		for j := i; j < i+250; j++ {
			docs = append(docs, map[string]any{"body": pad, "n": j})
		}
		wantStatus(t, cl.Query("a", "insert c $1", docs), 200, "insert")
	}
	admin := n.Admin()
	whole := admin.Do("POST", "/_admin/tenants/a/read", map[string]any{"query": "get c order n desc"})
	wantStatus(t, whole, 200, "the admin read")
	through := cl.Query("a", "get c order n desc")
	wantStatus(t, through, 200, "a streamed read through the router")
	if string(through.Body) != string(whole.Body) || len(through.Body) < 24e6 {
		t.Fatalf("through the router %d bytes, straight %d", len(through.Body), len(whole.Body))
	}
	var rows []map[string]any
	if err := json.Unmarshal(through.Body, &rows); err != nil || len(rows) != 6000 {
		t.Fatalf("%d rows: %v", len(rows), err)
	}
	// Cut: the client reads nothing of 24 MB, more than the sockets on
	// its way hold, while the tenant goes.
	conn, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body, _ := json.Marshal(map[string]any{"query": "get c"})
	fmt.Fprintf(conn, "POST /t/a/query HTTP/1.1\r\nHost: fenec\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s", cluster.RouterToken, len(body), body)
	cluster.Eventually(t, 30*time.Second, func() error {
		if metric(t, admin, "fenec_node_answer_bytes") == 0 {
			return errors.New("the answer has not started")
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond) // it fills the sockets on its way and waits
	wantStatus(t, admin.Do("DELETE", "/_admin/tenants/a", nil), 204, "delete the tenant under its answer")
	_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !errors.Is(err, io.ErrUnexpectedEOF) || json.Valid(got) {
		t.Fatalf("a cut answer through the router: %d, %d bytes, ending %v; want it short", res.StatusCode, len(got), err)
	}
}

// A client that gives up on a statement through the router stops it on
// the node: the router's connection to the node ends with its client's,
// and the node counts the statement stopped as its client's (499), not
// run on for minutes holding the tenant's read lock (a write behind it
// lands at once).
func TestHangUpThroughTheRouterStopsTheStatement(t *testing.T) {
	c := cluster.New(t)
	r := c.StartRouter("router", cluster.RouterOptions{})
	n := c.StartNode("n1", cluster.NodeOptions{Args: []string{"--max-statement-time", "0"}})
	r.Register(n)
	r.Place("a", n)
	cl := r.Client()
	wantStatus(t, cl.Query("a", "create collection c (body text, n int)"), 200, "create")
	pad := strings.Repeat("p", 4000)
	for i := 0; i < 2000; i += 250 {
		docs := make([]any, 0, 250)
		for j := i; j < i+250; j++ {
			docs = append(docs, map[string]any{"body": pad, "n": j})
		}
		wantStatus(t, cl.Query("a", "insert c $1", docs), 200, "insert")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if res := cl.DoCtx(ctx, "POST", "/t/a/query", map[string]any{"query": `get c where body ~ "p{1,900}z" count`}); res.Err == nil {
		t.Fatalf("a scan of minutes answered within half a second: %s", res)
	}
	start := time.Now()
	wantStatus(t, cl.Query("a", "put c {body: 'behind', n: -1}"), 200, "a write behind the abandoned scan")
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("a write behind a statement whose client left waited %v", took)
	}
	admin := n.Admin()
	cluster.Eventually(t, 30*time.Second, func() error {
		if v := metric(t, admin, `fenec_node_statements_cancelled_total{reason="client"}`); v != 1 {
			return fmt.Errorf("statements stopped with their client: %v", v)
		}
		return nil
	})
}
