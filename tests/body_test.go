package tests

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/tests/cluster"
)

// slowBody opens a connection to addr ("host:port") from the local ip
// ("" for any) and sends a request head declaring a body of length bytes
// with Expect: 100-continue, then waits until the server asks for the body
// (its handler began reading it) and sends sent bytes of it. The
// connection is closed at cleanup.
func slowBody(t *testing.T, addr, ip, method, path string, length, sent int) (net.Conn, *bufio.Reader) {
	t.Helper()
	d := net.Dialer{Timeout: wait}
	if ip != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(ip)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(wait))
	head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: fenec\r\nContent-Type: application/json\r\n"+
		"Authorization: Bearer %s\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", method, path, cluster.AdminToken, length)
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatalf("send head: %v", err)
	}
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 ") {
		t.Fatalf("waiting for 100 Continue: %q %v", line, err)
	}
	if _, err := br.ReadString('\n'); err != nil { // the interim answer's empty line
		t.Fatalf("100 Continue: %v", err)
	}
	if _, err := c.Write(make([]byte, sent)); err != nil {
		t.Fatalf("send %d bytes of the body: %v", sent, err)
	}
	return c, br
}

// The router holds what a request's body has brought, not what its head
// declares: twelve connections each declaring a body of 60 MB and sending
// none of it leave the router's memory where it was. Before, it allocated
// each declared length as the head arrived (+720 MB here).
func TestRouterMemoryFollowsBodyBytes(t *testing.T) {
	r, n := oneNode(t)
	r.Place("a", n)
	wantStatus(t, r.Client().Query("a", "create collection kv (k text, v int)"), 200, "create")
	rss, peak, err := r.Memory()
	if err != nil {
		t.Fatalf("no memory figures for the router: %v", err)
	}
	const conns, declared = 12, 60 << 20
	for range conns {
		slowBody(t, r.Addr(), "", "POST", "/t/a/query", declared, 0)
	}
	// Every handler is reading its body now (each asked for it).
	after, peakAfter, err := r.Memory()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("router RSS %d MiB before, %d MiB with %d bodies of %d MiB declared (peak %d MiB, then %d MiB)",
		rss>>20, after>>20, conns, declared>>20, peak>>20, peakAfter>>20)
	if grew := peakAfter - rss; grew > 64<<20 {
		t.Fatalf("the router's peak memory grew %d MiB for %d bodies declared and never sent", grew>>20, conns)
	}
	// The router still answers everyone else.
	wantStatus(t, r.Client().Query("a", "get kv"), 200, "a read beside the stalled bodies")
}

// A body that stops arriving is cut after --body-timeout without a byte,
// on the router and on the node: the request is answered 408 and its
// connection closed, so a stalled client holds no handler, tenant or
// request slot. The bound is on the gap between bytes, not on the whole:
// an image upload trickling in for longer than the bound is installed.
func TestBodyThatStopsIsCut(t *testing.T) {
	c := cluster.New(t)
	r := c.StartRouter("router", cluster.RouterOptions{Args: []string{"--body-timeout", "1"}})
	n := c.StartNode("n1", cluster.NodeOptions{Args: []string{"--body-timeout", "1"}})
	r.Register(n)
	r.Place("a", n)
	cl := r.Client()
	wantStatus(t, cl.Query("a", "create collection kv (k text, v int)"), 200, "create")
	for k := range 200 {
		wantStatus(t, cl.Query("a", "put kv {k: $1, v: $2}", strings.Repeat("x", 100), k), 200, "put")
	}
	cut := func(what, addr, method, path string) {
		t.Helper()
		conn, br := slowBody(t, addr, "", method, path, 1000, 10)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: no answer to a stalled body: %v", what, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "body") {
			t.Fatalf("%s: %d %s, want 408 naming the body", what, res.StatusCode, b)
		}
		if _, err := br.ReadByte(); err != io.EOF {
			t.Fatalf("%s: the connection stayed open after the cut (%v)", what, err)
		}
		conn.Close()
	}
	cut("through the router", r.Addr(), "POST", "/t/a/query")
	cut("straight to the node", n.Direct(), "POST", "/t/a/query")
	cut("an image upload straight to the node", n.Direct(), "PUT", "/_admin/tenants/b/file")
	// A body refused unread (an unknown tenant) is cut as well: the server
	// reads what is left of a small one before it answers.
	unread := func(what, addr string) {
		t.Helper()
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(wait))
		fmt.Fprintf(conn, "POST /t/nothere/query HTTP/1.1\r\nHost: fenec\r\nContent-Length: 1000\r\n\r\n{\"query\"")
		br := bufio.NewReader(conn)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: no answer while the body stalls: %v", what, err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusNotFound {
			t.Fatalf("%s: %d, want 404", what, res.StatusCode)
		}
		if _, err := br.ReadByte(); err != io.EOF {
			t.Fatalf("%s: the connection stayed open (%v)", what, err)
		}
	}
	unread("an unknown tenant through the router", r.Addr())
	unread("an unknown tenant on the node", n.Direct())
	wantStatus(t, cl.Query("a", "get kv count"), 200, "a read after the cuts")

	// An image trickling in, a gap of a fifth of the bound between its
	// pieces, for longer than the bound in all.
	img := n.Admin().Do("GET", "/_admin/tenants/a/file", nil)
	wantStatus(t, img, 200, "image of a")
	pr, pw := io.Pipe()
	go func() {
		const pieces = 8
		step := (len(img.Body) + pieces - 1) / pieces
		for b := img.Body; len(b) > 0; b = b[min(step, len(b)):] {
			if _, err := pw.Write(b[:min(step, len(b))]); err != nil {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		pw.Close()
	}()
	req, _ := http.NewRequest("PUT", "http://"+n.Direct()+"/_admin/tenants/b/file", pr)
	req.Header.Set("Authorization", "Bearer "+cluster.AdminToken)
	req.ContentLength = int64(len(img.Body))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("trickled image upload: %v", err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("trickled image upload: %d %s", res.StatusCode, b)
	}
}
