package forward

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
)

// slowBody opens a raw connection that declares a body of size and sends
// sent bytes of it, leaving the rest to finish.
type slowBody struct {
	rc   *rawConn
	left int
}

func startBody(t *testing.T, url string, size, sent int) *slowBody {
	t.Helper()
	rc := dialRaw(t, url)
	head := fmt.Sprintf("POST /t/acme/batch HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", size)
	if _, err := io.WriteString(rc.c, head+strings.Repeat("a", sent)); err != nil {
		t.Fatal(err)
	}
	return &slowBody{rc: rc, left: size - sent}
}

// finish sends the rest of the body and reads the answer.
func (b *slowBody) finish(t *testing.T) *http.Response {
	t.Helper()
	resp, _ := b.rc.send(t, "POST", strings.Repeat("a", b.left))
	return resp
}

// answer reads an answer sent before the body was whole.
func (b *slowBody) answer(t *testing.T) (*http.Response, string) {
	t.Helper()
	resp, body := b.rc.send(t, "POST", "")
	return resp, string(body)
}

// Bodies are charged as they arrive: two bodies half sent from one address
// hold its share, a third from it is refused 429 with Retry-After before
// the router reads on, and once the two are answered their share is back.
// Without the budget, each connection could hold the largest body.
func TestBodyBudgetBoundsOneAddress(t *testing.T) {
	node := newRecorder(t, nil)
	place := newPlacements(map[string]Target{"acme": {Node: "n1", Addr: node.addr()}})
	r := newRouter(t, place, fwdOpts{cfg: func(c *Config) {
		c.MaxBodyBytes = 1 << 20
		c.MaxBodyMemoryPerAddr = 2<<20 + 64<<10
		c.MaxBodyMemory = 64 << 20
	}})
	const size, sent = 1 << 20, 900 << 10
	a := startBody(t, r.url, size, sent)
	b := startBody(t, r.url, size, sent)
	testkit.Eventually(t, 10*time.Second, func() bool { return r.f.budget.Held() >= 2*sent },
		"both half-sent bodies charged")
	c := startBody(t, r.url, size, sent)
	resp, body := c.answer(t)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(body, "--max-body-memory-per-addr") || !resp.Close {
		t.Fatalf("a third body from the address: %d Retry-After %q closing %v %s",
			resp.StatusCode, resp.Header.Get("Retry-After"), resp.Close, body)
	}
	for _, sb := range []*slowBody{a, b} {
		if resp := sb.finish(t); resp.StatusCode != 200 {
			t.Fatalf("a body within the share: %d", resp.StatusCode)
		}
	}
	if h := r.f.budget.Held(); h != 0 {
		t.Fatalf("%d bytes still charged after every body was answered", h)
	}
	if resp := startBody(t, r.url, size, 0).finish(t); resp.StatusCode != 200 {
		t.Fatalf("a body once the share was back: %d", resp.StatusCode)
	}
	if n := testkit.CounterValue(t, r.f.metrics.bodies.WithLabelValues("address")); n != 1 {
		t.Fatalf("refused bodies by address: %v, want 1", n)
	}
	if n := node.count(); n != 3 {
		t.Fatalf("node saw %d requests, want the 3 answered", n)
	}
}

// The router's bound in all is 503, and a body that declares a large
// length but sends little is charged for what came, not what it declared.
func TestBodyBudgetBoundsTheRouter(t *testing.T) {
	node := newRecorder(t, nil)
	place := newPlacements(map[string]Target{"acme": {Node: "n1", Addr: node.addr()}})
	r := newRouter(t, place, fwdOpts{cfg: func(c *Config) {
		c.MaxBodyBytes = 1 << 20
		c.MaxBodyMemoryPerAddr = 0
		c.MaxBodyMemory = 2<<20 + 64<<10
	}})
	var held []*slowBody
	for range 8 { // declared 8 MiB in all, sent 8 KiB each
		held = append(held, startBody(t, r.url, 1<<20, 8<<10))
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return r.f.budget.Held() >= 8*minBodyRoom })
	if h := r.f.budget.Held(); h >= 1<<20 {
		t.Fatalf("%d bytes charged for 8 bodies of 8 KiB declared 1 MiB each: charged by the declared length", h)
	}
	a := startBody(t, r.url, 1<<20, 900<<10)
	b := startBody(t, r.url, 1<<20, 900<<10)
	var refused int
	var taken []*slowBody
	for _, sb := range []*slowBody{a, b} {
		_ = sb.rc.c.SetReadDeadline(time.Now().Add(2 * time.Second))
		resp, err := http.ReadResponse(sb.rc.br, nil)
		if err != nil {
			taken = append(taken, sb)
			continue
		}
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("past the router's bound: %d", resp.StatusCode)
		}
		refused++
	}
	if refused != 1 {
		t.Fatalf("%d of two 900 KiB bodies refused past a 2 MiB budget with the small ones held; want 1", refused)
	}
	// One at a time: each small body grows to 1 MiB as it is finished.
	for _, sb := range append(taken, held...) {
		if resp := sb.finish(t); resp.StatusCode != 200 {
			t.Fatalf("a small body: %d", resp.StatusCode)
		}
	}
}

// A client that leaves while its request is dialled is counted as the
// client's (499), never as the node failing: hang-ups must not page the
// operator about a healthy node.
func TestHangUpsAreTheClients(t *testing.T) {
	dialing := make(chan struct{}, 64)
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialing <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	place := newPlacements(map[string]Target{"acme": {Node: "n1", Addr: "127.0.0.1:1"}})
	r := newRouter(t, place, fwdOpts{dial: dial, cfg: func(c *Config) { c.DialTimeout = time.Minute }})
	c := client(t)
	const n = 40
	for range n {
		ctx, cancel := context.WithCancel(context.Background())
		a := goDo(c, newReq(t, ctx, "GET", r.url+"/t/acme/c", nil, nil))
		<-dialing
		cancel()
		_, _, _ = a.wait(t)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return r.requests(t, "rest", "499") == n },
		"every hang-up counted as the client's")
	if e := r.upstreamErrors(t, "n1"); e != 0 {
		t.Fatalf("%v upstream errors counted against a node for %d clients that hung up", e, n)
	}
}

// Large bodies take the budget only up to its last eighth: with it held
// by bodies past a MiB, one more large body is refused 503 while a small
// write — most clients' — still has room. Without the reserve, a few
// strangers' large bodies leave every writer's small body refused.
func TestBodyBudgetKeepsRoomForSmallBodies(t *testing.T) {
	node := newRecorder(t, nil)
	place := newPlacements(map[string]Target{"acme": {Node: "n1", Addr: node.addr()}})
	r := newRouter(t, place, fwdOpts{cfg: func(c *Config) {
		c.MaxBodyBytes = 4 << 20
		c.MaxBodyMemoryPerAddr = 0
		c.MaxBodyMemory = 16 << 20
	}})
	const size, sent = 4 << 20, 3 << 20
	var large []*slowBody
	for range 3 {
		large = append(large, startBody(t, r.url, size, sent))
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return r.f.budget.Held() >= 12<<20 },
		"three large bodies charged")
	d := startBody(t, r.url, size, sent)
	resp, body := d.answer(t)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "--max-body-memory") {
		t.Fatalf("a fourth large body into the reserve: %d %s", resp.StatusCode, body)
	}
	if resp := startBody(t, r.url, 100<<10, 0).finish(t); resp.StatusCode != 200 {
		t.Fatalf("a small body beside large ones holding all but the reserve: %d", resp.StatusCode)
	}
	for _, b := range large {
		if resp := b.finish(t); resp.StatusCode != 200 {
			t.Fatalf("a large body within the budget: %d", resp.StatusCode)
		}
	}
}

func TestBodyBudgetReserve(t *testing.T) {
	b := newBodyBudget(8<<20, 0)
	if err := b.take("a", 7<<20, 7<<20); err != nil {
		t.Fatalf("a large body up to the reserve: %v", err)
	}
	if err := b.take("b", 16<<10, 2<<20); err != ErrBodyMemory {
		t.Fatalf("a large body growing into the reserve: %v", err)
	}
	if err := b.take("c", 512<<10, 512<<10); err != nil {
		t.Fatalf("a small body in the reserve: %v", err)
	}
	if err := b.take("c", 512<<10, 1<<20); err != nil {
		t.Fatalf("a body of a MiB in the reserve: %v", err)
	}
	if err := b.take("d", 16<<10, 16<<10); err != ErrBodyMemory {
		t.Fatalf("a small body past the whole budget: %v", err)
	}
}
