package node

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

const healthReq = "GET /_health HTTP/1.1\r\nHost: n\r\n\r\n"

// An address past --max-conns-per-addr is answered 429 as it connects,
// while its open connections and every other client are served as
// before; each connection the node lets go, whichever way it ends, gives
// the address its room back.
func TestStrangerPastItsConnectionsIsRefused(t *testing.T) {
	n := startNode(t, func(c *Config) { c.Conns = connlimit.Limits{Total: 100, PerAddr: 3} })
	addr := strings.TrimPrefix(n.url, "http://")
	type kept struct {
		c  net.Conn
		br *bufio.Reader
	}
	var open []kept
	for range 3 {
		c := testkit.DialFrom(t, "127.0.0.2", addr)
		k := kept{c, bufio.NewReader(c)}
		if st, _ := testkit.Ask(t, k.c, k.br, healthReq); st != 200 {
			t.Fatalf("health: %d", st)
		}
		open = append(open, k)
	}
	c := testkit.DialFrom(t, "127.0.0.2", addr)
	if st, body := testkit.Ask(t, c, bufio.NewReader(c), healthReq); st != http.StatusTooManyRequests ||
		!strings.Contains(string(body), "--max-conns-per-addr 3") {
		t.Fatalf("the fourth connection: %d %s", st, body)
	}
	// Another client is served, and the node counts the refusal.
	r := n.do("GET", "/_metrics", "", "Authorization", "Bearer "+adminToken)
	if r.Status != 200 || !strings.Contains(string(r.Body), `fenec_node_refused_connections_total{reason="address"} 1`) {
		t.Fatalf("metrics: %d, refusal not counted:\n%s", r.Status, testkit.LinesWith(string(r.Body), "refused_connections"))
	}
	// The stranger's open connections still work.
	for _, k := range open {
		if st, _ := testkit.Ask(t, k.c, k.br, healthReq); st != 200 {
			t.Fatalf("an open connection after the refusal: %d", st)
		}
		k.c.Close()
	}
	// Connections ending every way give their room back: closed by the
	// client when idle, cut mid-head, ended by the node over a bad
	// request. Many times over, so a leak of one would show.
	for i := range 30 {
		testkit.Eventually(t, 5*time.Second, func() bool { return n.s.conns.Open() <= 1 }, "the node let the connections go")
		c := testkit.DialFrom(t, "127.0.0.2", addr)
		br := bufio.NewReader(c)
		if st, _ := testkit.Ask(t, c, br, healthReq); st != 200 {
			t.Fatalf("round %d: %d", i, st)
		}
		switch i % 3 {
		case 0:
		case 1:
			io.WriteString(c, "GET /_health HTTP/1.1\r\nHo")
		case 2:
			io.WriteString(c, "BAD\x01 / HTTP/1.1\r\n\r\n")
			io.Copy(io.Discard, br)
		}
		c.Close()
	}
}
