package forward

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
)

func (tr *testRouter) answersCut(tb testing.TB, by string) float64 {
	return testkit.CounterValue(tb, tr.f.metrics.answers.WithLabelValues(by))
}

// A node that ends an answer short after its head (its bound on a slow
// reader, its answer budget, its tenant going, or a failure midway) has
// answered: the router passes the cut on to the client (its connection
// closed short, never an answer that looks whole) and counts it as a cut
// answer under the status it began with, not as an upstream error, which
// pages about the node (FenecNodeUnreachable). The node serves the next
// request as usual.
func TestAnswersTheNodeCutsAreNotUpstreamErrors(t *testing.T) {
	cases := []struct{ name, head, part string }{
		{"chunked", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n", "2\r\n[{\r\n"},
		{"chunked mid-chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "40\r\n[{\"k\": 1}"},
		{"with a length", "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", "[{\"k\": 1}"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bodies := make(chan []byte, 4)
			node := newScripted(t,
				func(c net.Conn, br *bufio.Reader) {
					defer c.Close()
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					_, _ = io.WriteString(c, tc.head+tc.part) // then the node cuts it
				},
				serveOK(bodies),
			)
			r := newRouter(t, newPlacements(map[string]Target{"acme": {Node: "n1", Addr: node.addr()}}), fwdOpts{})
			c := client(t)
			// The head may or may not have reached the client before the
			// cut (one with a length is sent with its first bytes); either
			// way the answer ends short.
			res, err := c.Post(r.url+"/t/acme/query", "application/json", strings.NewReader(`{"query": "get c"}`))
			if err == nil {
				got, rerr := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != 200 || rerr == nil {
					t.Fatalf("the cut answer reached the client as %d %q, ending %v; want 200 cut short", res.StatusCode, got, rerr)
				}
			}
			testkit.Eventually(t, 10*time.Second, func() bool {
				return r.requests(t, "query", "200")+r.requests(t, "query", "502") == 1
			}, "the request counted")
			if n := r.upstreamErrors(t, "n1"); n != 0 {
				t.Fatalf("%v upstream errors counted against n1 for an answer it began and cut", n)
			}
			if n := r.answersCut(t, cutByNode); n != 1 {
				t.Errorf("%v answers counted as cut by the node, want 1", n)
			}
			if n := r.requests(t, "query", "200"); n != 1 {
				t.Errorf("%v requests counted 200, want the cut one", n)
			}
			if n := r.requests(t, "query", "502"); n != 0 {
				t.Errorf("%v requests counted 502 for an answer the node began 200", n)
			}
			if n := r.answersCut(t, cutByClient); n != 0 {
				t.Errorf("%v answers counted as cut by a client that read to the end", n)
			}
			res2, got2 := do(t, c, "POST", r.url+"/t/acme/query", []byte(`{"query": "get c"}`), nil)
			if res2.StatusCode != 200 {
				t.Fatalf("the next request: %d %s", res2.StatusCode, got2)
			}
		})
	}
}

// A client that goes mid-way through a streamed answer is counted as the
// client's: 499, a cut answer by the client, no upstream error.
func TestClientLeavingMidStreamIsTheClients(t *testing.T) {
	node := newScripted(t, func(c net.Conn, br *bufio.Reader) {
		defer c.Close()
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n[{\r\n"); err != nil {
			return
		}
		// Rows keep coming until the router lets go of the connection.
		for i := 0; i < 2000; i++ {
			if _, err := fmt.Fprintf(c, "8\r\n\"k\": 1,\r\n"); err != nil {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	r := newRouter(t, newPlacements(map[string]Target{"acme": {Node: "n1", Addr: node.addr()}}), fwdOpts{})
	conn, err := net.Dial("tcp", r.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /t/acme/c HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(res.Body, make([]byte, 2)); err != nil || res.StatusCode != 200 {
		t.Fatalf("the streamed answer's start: %d, %v", res.StatusCode, err)
	}
	_ = conn.(*net.TCPConn).SetLinger(0)
	conn.Close() // the client goes mid-stream
	testkit.Eventually(t, 15*time.Second, func() bool { return r.requests(t, "rest", "499") == 1 },
		"the request counted as the client's (499)")
	if n := r.answersCut(t, cutByClient); n != 1 {
		t.Errorf("%v answers counted as cut by the client, want 1", n)
	}
	if n := r.answersCut(t, cutByNode); n != 0 {
		t.Errorf("%v answers counted as cut by the node", n)
	}
	if n := r.upstreamErrors(t, "n1"); n != 0 {
		t.Fatalf("%v upstream errors counted against n1 for a client that left", n)
	}
}
