package tests

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenec-go/fenec/tests/cluster"
)

// routerSeries is the value of one series of the router's /_metrics (the
// line that starts with series, labels included), 0 when it is absent.
func routerSeries(t *testing.T, r *cluster.Router, series string) float64 {
	t.Helper()
	res := r.Client().Do("GET", "/_metrics", nil)
	wantStatus(t, res, 200, "router metrics")
	sc := bufio.NewScanner(strings.NewReader(string(res.Body)))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("series %s: %q", series, rest)
			}
			return v
		}
	}
	return 0
}

// hangUp sends one request to the router on a connection of its own and
// closes it early, at the point kind says: partway through the body, while
// the node holds the request, as the answer starts, or right after the
// request went out.
func hangUp(addr string, kind int, seq string) error {
	c, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(wait))
	switch kind % 4 {
	case 0: // the body stops partway, and the client goes
		_, err = io.WriteString(c, "POST /t/a/query HTTP/1.1\r\nHost: fenec\r\nContent-Length: 4000\r\n\r\n{\"query\": \"get kv")
	case 1: // a long poll the node holds: gone while the router waits for its answer
		_, err = fmt.Fprintf(c, "GET /t/a/_changes?since=%s&wait=5000 HTTP/1.1\r\nHost: fenec\r\n\r\n", seq)
		time.Sleep(30 * time.Millisecond)
	case 2: // a large answer: gone once its first bytes came
		if _, err = io.WriteString(c, "GET /t/a/kv HTTP/1.1\r\nHost: fenec\r\n\r\n"); err == nil {
			_, err = c.Read(make([]byte, 64))
		}
	case 3: // gone as soon as the request went out
		_, err = io.WriteString(c, "POST /t/a/query HTTP/1.1\r\nHost: fenec\r\nContent-Length: 26\r\n\r\n{\"query\": \"get kv count\"}")
	}
	if tc, ok := c.(*net.TCPConn); ok && kind%8 >= 4 {
		_ = tc.SetLinger(0) // half of them reset rather than closed
	}
	return err
}

// Thousands of clients hanging up early — partway through their bodies,
// while the node holds their long polls, as large answers start, right
// after sending — beside writers and readers served as usual, are counted
// as the clients' (fenec_router_requests_total{code="499"}) and never as
// the node's failures: fenec_router_upstream_errors_total, which pages
// (FenecNodeUnreachable), stays 0 for the healthy node, and every request
// of the real traffic is answered 200. The hang-ups while connecting to a
// node, which loopback cannot produce, are region/forward's
// TestHangUpsAreTheClients.
func TestEarlyHangUpsAreTheClients(t *testing.T) {
	r, n := oneNode(t)
	r.Place("a", n)
	c := r.Client()
	c.MustQuery("a", "create collection kv (k text, v text)")
	var docs []string
	for i := range 2000 {
		docs = append(docs, fmt.Sprintf(`{"k": "k%d", "v": "%s"}`, i, strings.Repeat("v", 100)))
	}
	wantStatus(t, c.Do("POST", "/t/a/kv", "["+strings.Join(docs, ",")+"]"), 201, "rows for a large answer")

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var served, refused atomic.Int64
	var lastSeq atomic.Value
	lastSeq.Store("0")
	for w := range 2 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				res := c.Query("a", "put kv {k: $1, v: 'traffic'}", fmt.Sprintf("w%d-%d", w, i))
				if res.Status != 200 {
					refused.Add(1)
					t.Errorf("a write beside the hang-ups: %s", res)
					return
				}
				lastSeq.Store(res.Header.Get("Fenec-Seq"))
				if res := c.Query("a", "get kv count"); res.Status != 200 {
					refused.Add(1)
					t.Errorf("a read beside the hang-ups: %s", res)
					return
				}
				served.Add(2)
			}
		})
	}
	const total, workers = 4000, 8
	var errs atomic.Int64
	var hw sync.WaitGroup
	for w := range workers {
		hw.Go(func() {
			for i := w; i < total; i += workers {
				if err := hangUp(r.Addr(), i, lastSeq.Load().(string)); err != nil {
					errs.Add(1)
				}
			}
		})
	}
	hw.Wait()
	close(stop)
	wg.Wait()
	if errs.Load() > 0 {
		t.Logf("%d hang-ups met an error on the client's side (answered and closed first)", errs.Load())
	}
	// The long polls end as the router notices their clients left.
	var gone float64
	prev := -1.0
	deadline := time.Now().Add(wait)
	for {
		gone = 0
		for _, route := range []string{"query", "changes", "rest"} {
			gone += routerSeries(t, r, fmt.Sprintf(`fenec_router_requests_total{code="499",route="%s"}`, route))
		}
		if gone == prev || time.Now().After(deadline) {
			break
		}
		prev = gone
		time.Sleep(time.Second)
	}
	upstream := routerSeries(t, r, `fenec_router_upstream_errors_total{node="n1"}`)
	t.Logf("%d hang-ups: %v counted as the clients' (499); %d requests of real traffic served; upstream errors of n1: %v",
		total, gone, served.Load(), upstream)
	if upstream != 0 {
		t.Fatalf("%v upstream errors counted against a healthy node for clients that hung up", upstream)
	}
	if refused.Load() > 0 || served.Load() == 0 {
		t.Fatalf("real traffic: %d served, %d refused", served.Load(), refused.Load())
	}
	if gone < total/8 {
		t.Fatalf("only %v of %d hang-ups reached the node and were counted as the clients'", gone, total)
	}
}
