package region

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/connlimit"
	"github.com/fenec-go/fenec/internal/testkit"
)

// A stranger past --max-conns-per-addr is answered 429 as it connects;
// the router's other clients, and the stranger's open connections, are
// served as before. Its connections give their room back as they end,
// whether the router's own loop served them (/t/) or net/http did (every
// other route, handed over), and however they end.
func TestRouterStrangerPastItsConnectionsIsRefused(t *testing.T) {
	r := startCPRouter(t, func(c *Config) { c.Conns = connlimit.Limits{Total: 100, PerAddr: 2} })
	r.addNode(t, "n1", startCPNode(t))
	r.place(t, "a", "n1")
	r.mustQuery(t, "a", "create collection c (name text)")
	addr := strings.TrimPrefix(r.url, "http://")
	dial := func() net.Conn { return testkit.DialFrom(t, "127.0.0.2", addr) }
	ask := func(c net.Conn, br *bufio.Reader, req string) int {
		st, _ := testkit.Ask(t, c, br, req)
		return st
	}
	const read = "POST /t/a/query HTTP/1.1\r\nHost: r\r\nContent-Length: 23\r\n\r\n{\"query\":\"get c count\"}"
	const healthReq = "GET /_health HTTP/1.1\r\nHost: r\r\n\r\n"
	loop, handed := dial(), dial()
	loopR, handedR := bufio.NewReader(loop), bufio.NewReader(handed)
	if st := ask(loop, loopR, read); st != 200 {
		t.Fatalf("a read through the loop: %d", st)
	}
	if st := ask(handed, handedR, healthReq); st != 200 {
		t.Fatalf("health, handed over: %d", st)
	}
	third := dial()
	if st, body := testkit.Ask(t, third, bufio.NewReader(third), read); st != http.StatusTooManyRequests ||
		!strings.Contains(string(body), "--max-conns-per-addr 2") {
		t.Fatalf("the third connection: %d %s", st, body)
	}
	// Another client, and the stranger's open connections, are served.
	r.mustQuery(t, "a", "get c count")
	if st := ask(loop, loopR, read); st != 200 {
		t.Fatalf("the open loop connection: %d", st)
	}
	if st := ask(handed, handedR, healthReq); st != 200 {
		t.Fatalf("the open handed-over connection: %d", st)
	}
	st, _, b := cpDo(t, http.MethodGet, r.url+"/_metrics", cpRouterToken, nil, nil)
	if st != 200 || !strings.Contains(string(b), `fenec_router_refused_connections_total{reason="address"} 1`) ||
		!strings.Contains(string(b), "fenec_router_open_connections") {
		t.Fatalf("metrics: %d\n%s", st, b)
	}
	loop.Close()
	handed.Close()
	// Every way a connection ends gives its room back, on both paths,
	// many times over, so that one connection not counted out would show.
	ends := []func(c net.Conn, br *bufio.Reader){
		func(c net.Conn, _ *bufio.Reader) { c.Close() },
		func(c net.Conn, _ *bufio.Reader) { io.WriteString(c, "GET /t/a/c HTTP/1.1\r\nHo"); c.Close() },
		func(c net.Conn, br *bufio.Reader) {
			io.WriteString(c, "GET /t/a/c HTTP/1.1\r\nHost: r\r\nContent-Length: x\r\n\r\n")
			io.Copy(io.Discard, br)
			c.Close()
		},
		func(c net.Conn, _ *bufio.Reader) {
			// handed over (a route of net/http's) and left mid-request
			io.WriteString(c, "GET /_health HTTP/1.1\r\nHost: r\r\nX-a: b")
			c.Close()
		},
	}
	for i := range 24 {
		testkit.Eventually(t, 5*time.Second, func() bool { return r.rt.conns.Open() <= 1 }, "the router let the stranger's connections go")
		c := dial()
		br := bufio.NewReader(c)
		req := read
		if i%2 == 1 {
			req = healthReq
		}
		if st := ask(c, br, req); st != 200 {
			t.Fatalf("round %d: %d", i, st)
		}
		ends[i%len(ends)](c, br)
	}
}
