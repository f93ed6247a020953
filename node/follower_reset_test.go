package node

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
)

// resetOnce is a TCP proxy in front of target whose first connection is
// reset once the request's head has come: a connection the network
// accepts and then loses before the answer's head (a node killed as it
// accepted, a proxy whose node is gone). The others pass.
type resetOnce struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
}

func startResetOnce(t *testing.T, target string) *resetOnce {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &resetOnce{ln: ln, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *resetOnce) accept() {
	first := true
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if first {
			first = false
			p.wg.Go(func() { resetAfterHead(c) })
			continue
		}
		p.wg.Go(func() { p.pass(c) })
	}
}

// resetAfterHead reads the request's head and the first chunk of its
// body (the copy's first ack: the transport then waits for the next),
// then resets the connection.
func resetAfterHead(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	for {
		line, err := br.ReadString('\n')
		if err != nil || strings.TrimSpace(line) == "" {
			break
		}
	}
	if size, err := br.ReadString('\n'); err == nil {
		n, _ := strconv.ParseInt(strings.TrimSpace(size), 16, 64)
		io.CopyN(io.Discard, br, n+2)
	}
	c.(*net.TCPConn).SetLinger(0)
	c.Close()
}

func (p *resetOnce) pass(c net.Conn) {
	defer c.Close()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer up.Close()
	var wg sync.WaitGroup
	wg.Go(func() { io.Copy(up, c); up.(*net.TCPConn).CloseWrite() })
	io.Copy(c, up)
	c.(*net.TCPConn).CloseWrite()
	wg.Wait()
}

// A copy whose connection to its primary is lost after the request went
// and before the feed's head came back follows again within its bound
// on a head, not three keepalives later: the transport holds a failed
// request until its body ends, and the body is the copy's acks, which
// end only with the feed.
func TestFollowerLosesConnectionBeforeHead(t *testing.T) {
	a := startNode(t, withRepl)
	people(t, a)
	p := startResetOnce(t, a.s.Addr())
	// Started after the proxy, the copy is closed before it at cleanup,
	// which ends the connections the proxy passes.
	b := startNode(t, func(c *Config) { withRepl(c); c.KeepAlive = 4 * time.Second })
	b.mkTenant("a")
	start := time.Now()
	if r := b.admin("POST", "tenants/a/follow", `{"from":"http://`+p.ln.Addr().String()+`"}`); r.Status != http.StatusOK {
		t.Fatalf("follow: %d %s", r.Status, r.Body)
	}
	// Three keepalives are 12 s; the bound on a head is 5 s.
	testkit.Eventually(t, 9*time.Second, func() bool { return count(b, "a") == `{"count":3}` }, "the copy caught up")
	t.Logf("the copy caught up %v after it was told to follow", time.Since(start).Round(time.Millisecond))
}
