package forward

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/internal/tlsx"
)

// tlsNode is a node served over TLS that answers each request with
// whether its connection resumed a session and who the client was.
type tlsNode struct {
	srv        *http.Server
	ln         net.Listener
	handshakes atomic.Int64 // connections that completed a handshake
	resumed    atomic.Int64
	conns      sync.Map // net.Conn → struct{}: open connections
}

func newTLSNode(tb testing.TB, src *tlsx.Source) *tlsNode {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	n := &tlsNode{ln: ln}
	n.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			who := "-"
			if tlsx.HasClientCert(r) {
				who = r.TLS.PeerCertificates[0].Subject.CommonName
			}
			fmt.Fprintf(w, "%s resumed=%v", who, r.TLS.DidResume)
		}),
		ConnState: func(c net.Conn, st http.ConnState) {
			switch st {
			case http.StateActive:
				if _, seen := n.conns.LoadOrStore(c, struct{}{}); !seen {
					n.handshakes.Add(1)
				}
			case http.StateClosed, http.StateHijacked:
				n.conns.Delete(c)
			}
		},
		ErrorLog: log.New(io.Discard, "", 0),
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = n.srv.Serve(src.Listen(ln, false)) })
	tb.Cleanup(func() {
		n.srv.Close()
		wg.Wait()
	})
	return n
}

func (n *tlsNode) addr() string { return "https://" + n.ln.Addr().String() }

// closeIdle closes the node's side of every open connection, as its
// idle timeout does.
func (n *tlsNode) closeIdle() {
	n.conns.Range(func(k, _ any) bool {
		_ = k.(net.Conn).Close()
		return true
	})
}

func tlsRouter(tb testing.TB, place Placements, src *tlsx.Source) *testRouter {
	return newRouter(tb, place, fwdOpts{cfg: func(c *Config) { c.TLS = src.Client }})
}

func TestForwardOverTLSPooledAndResumed(t *testing.T) {
	p := testkit.NewPKI(t, "ca")
	node := newTLSNode(t, testkit.Source(t, p.Issue("n1")))
	place := newPlacements(map[string]Target{"acme": {Node: "n1", Addr: node.addr()}})
	r := tlsRouter(t, place, testkit.Source(t, p.Issue("router")))
	c := client(t)
	for i := range 5 {
		resp, body := do(t, c, "GET", r.url+"/t/acme/x", nil, nil)
		if resp.StatusCode != 200 || string(body) != "router resumed=false" {
			t.Fatalf("request %d: %d %q, want the router's certificate shown", i, resp.StatusCode, body)
		}
	}
	if n := node.handshakes.Load(); n != 1 {
		t.Fatalf("%d connections for 5 requests in a row, want 1 pooled", n)
	}
	// The node closes it for its silence: the router lets go of it and
	// a plain write goes out whole on a fresh connection, which resumes.
	node.closeIdle()
	pl := r.f.pools.lookup("n1")
	testkit.Eventually(t, 10*time.Second, func() bool {
		pl.mu.Lock()
		defer pl.mu.Unlock()
		return len(pl.idle) == 1 && !pl.idle[0].usable()
	})
	resp, body := do(t, c, "POST", r.url+"/t/acme/query", []byte(`{"query": "x"}`), nil)
	if resp.StatusCode != 200 || string(body) != "router resumed=true" {
		t.Fatalf("write after the node closed the pooled connection: %d %q, want a resumed session", resp.StatusCode, body)
	}
}

func TestForwardOverTLSRefusesNodeOfAnotherCA(t *testing.T) {
	p, other := testkit.NewPKI(t, "ca"), testkit.NewPKI(t, "other")
	node := newTLSNode(t, testkit.Source(t, other.Issue("n1")))
	place := newPlacements(map[string]Target{"acme": {Node: "n1", Addr: node.addr()}})
	r := tlsRouter(t, place, testkit.Source(t, p.Issue("router")))
	resp, body := do(t, client(t), "GET", r.url+"/t/acme/x", nil, nil)
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("a node of another CA: %d %s, want 502", resp.StatusCode, body)
	}
	if n := node.handshakes.Load(); n != 0 {
		t.Fatalf("the node served %d requests to a router that does not trust it", n)
	}
}

func TestForwardOverTLSChecksTheNodeName(t *testing.T) {
	p := testkit.NewPKI(t, "ca")
	// n1's certificate names n1.internal only; the directory says
	// 127.0.0.1: not the same name, refused.
	node := newTLSNode(t, testkit.Source(t, p.Issue("n1", "n1.internal")))
	place := newPlacements(map[string]Target{"acme": {Node: "n1", Addr: node.addr()}})
	r := tlsRouter(t, place, testkit.Source(t, p.Issue("router")))
	if resp, body := do(t, client(t), "GET", r.url+"/t/acme/x", nil, nil); resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("a node certificate for another name: %d %s, want 502", resp.StatusCode, body)
	}
}

// TestForwardToANodeThatNeverShakesHands: a node addressed https:// that
// takes the connection and never answers the hello is a node that cannot
// be reached: the request is answered 502 once the dial's bound passes,
// and the router keeps no connection to it.
func TestForwardToANodeThatNeverShakesHands(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held, never answered
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	p := testkit.NewPKI(t, "ca")
	place := newPlacements(map[string]Target{"acme": {Node: "n1", Addr: "https://" + ln.Addr().String()}})
	r := newRouter(t, place, fwdOpts{cfg: func(c *Config) {
		c.TLS = testkit.Source(t, p.Issue("router")).Client
		c.DialTimeout = 200 * time.Millisecond
	}})
	resp, body := do(t, client(t), "GET", r.url+"/t/acme/x", nil, nil)
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("a node that never shakes hands: %d %s, want 502", resp.StatusCode, body)
	}
	if pl := r.f.pools.lookup("n1"); pl != nil && pl.idleCount() != 0 {
		t.Fatalf("the router kept %d connections to it", pl.idleCount())
	}
}
