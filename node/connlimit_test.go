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

// strangerConn connects to n from the loopback address ip, a client of
// its own.
func strangerConn(t *testing.T, n *testNode, ip string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", strings.TrimPrefix(n.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// health asks /_health on c, kept alive, and returns the status.
func health(t *testing.T, c net.Conn, br *bufio.Reader) int {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET /_health HTTP/1.1\r\nHost: n\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// An address past --max-conns-per-addr is answered 429 as it connects,
// while its open connections and every other client are served as
// before; each connection the node lets go, whichever way it ends, gives
// the address its room back.
func TestStrangerPastItsConnectionsIsRefused(t *testing.T) {
	n := startNode(t, func(c *Config) { c.Conns = connlimit.Limits{Total: 100, PerAddr: 3} })
	var open []net.Conn
	for range 3 {
		c := strangerConn(t, n, "127.0.0.2")
		if st := health(t, c, bufio.NewReader(c)); st != 200 {
			t.Fatalf("health: %d", st)
		}
		open = append(open, c)
	}
	c := strangerConn(t, n, "127.0.0.2")
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "GET /_health HTTP/1.1\r\nHost: n\r\n\r\n")
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "--max-conns-per-addr 3") {
		t.Fatalf("the fourth connection: %d %s", res.StatusCode, body)
	}
	// Another client is served, and the node counts the refusal.
	r := n.do("GET", "/_metrics", "", "Authorization", "Bearer "+adminToken)
	if r.Status != 200 || !strings.Contains(string(r.Body), `fenec_node_refused_connections_total{reason="address"} 1`) {
		t.Fatalf("metrics: %d, refusal not counted:\n%s", r.Status, grepLines(string(r.Body), "refused_connections"))
	}
	// The stranger's open connections still work.
	for _, c := range open {
		if st := health(t, c, bufio.NewReader(c)); st != 200 {
			t.Fatalf("an open connection after the refusal: %d", st)
		}
	}
	// Connections ending every way give their room back: closed by the
	// client when idle, cut mid-head, ended by the node over a bad
	// request. Many times over, so a leak of one would show.
	for _, c := range open {
		c.Close()
	}
	for i := range 30 {
		testkit.Eventually(t, 5*time.Second, func() bool { return n.s.conns.Open() <= 1 }, "the node let the connections go")
		c := strangerConn(t, n, "127.0.0.2")
		br := bufio.NewReader(c)
		if st := health(t, c, br); st != 200 {
			t.Fatalf("round %d: %d", i, st)
		}
		switch i % 3 {
		case 0:
			c.Close()
		case 1:
			io.WriteString(c, "GET /_health HTTP/1.1\r\nHo")
			c.Close()
		case 2:
			io.WriteString(c, "BAD\x01 / HTTP/1.1\r\n\r\n")
			io.Copy(io.Discard, br)
			c.Close()
		}
	}
}

// grepLines is the lines of s holding sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
