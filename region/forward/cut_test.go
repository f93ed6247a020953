package forward

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/tests/proxy"
)

// cutFixture: tenants acme and other on node a behind a cuttable proxy,
// node b the copy a failover promotes.
type cutFixture struct {
	old   *recorder
	px    *proxy.Proxy
	neu   *recorder
	place *fakePlacements
	r     *testRouter
	c     *http.Client
	clock *offsetClock
}

func newCutFixture(t *testing.T, oldAnswer http.HandlerFunc, o fwdOpts) *cutFixture {
	fx := &cutFixture{old: newRecorder(t, oldAnswer), neu: newRecorder(t, nil), clock: newOffsetClock()}
	fx.px = proxy.New(t, fx.old.addr())
	a := Target{Node: "a", Addr: fx.px.Addr()}
	fx.place = newPlacements(map[string]Target{"acme": a, "other": a})
	if o.now == nil {
		o.now = fx.clock.now
	}
	fx.r = newRouter(t, fx.place, o)
	fx.c = client(t)
	return fx
}

// failover moves tenants to node b and cuts them off a, as the control
// plane does when its directory shows the failover.
func (fx *cutFixture) failover(tenants ...string) {
	b := Target{Node: "b", Addr: fx.neu.addr()}
	m := map[string]Target{}
	for _, t := range tenants {
		fx.place.set(t, b)
		m[t] = b
	}
	fx.r.f.Cut("a", m)
}

func TestCutSentAwaitingAnswer(t *testing.T) {
	key := map[string]string{"Idempotency-Key": "k-1"}
	cases := []struct {
		name    string
		method  string
		hdr     map[string]string
		want    int
		resent  bool
		waitHdr bool
	}{
		{name: "read", method: "GET", want: 200, resent: true},
		{name: "keyed write", method: "POST", hdr: key, want: 200, resent: true},
		{name: "plain write", method: "POST", want: 502},
		{name: "held keyed", method: "POST", hdr: map[string]string{"Idempotency-Key": "k-2", "Fenec-Wait": "5000"}, want: 200, resent: true, waitHdr: true},
		{name: "held plain", method: "POST", hdr: map[string]string{"Fenec-Wait": "5000"}, want: 502},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fx := newCutFixture(t, nil, fwdOpts{})
			fx.px.Cut() // the node is lost: nothing answers, nothing closes
			var body []byte
			if tc.method == "POST" {
				body = []byte(`{"query": "set jobs where state = \"new\" state = \"taken\" limit 1"}`)
			}
			a := goDo(fx.c, newReq(t, context.Background(), tc.method, fx.r.url+"/t/acme/query", body, tc.hdr))
			waitPhase(t, fx.r.f, "a", "acme", phaseSent)
			fx.clock.advance(1200 * time.Millisecond)
			fx.failover("acme")
			resp, got, err := a.wait(t)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d %s, want %d", resp.StatusCode, got, tc.want)
			}
			if tc.resent {
				reqs := fx.neu.requests()
				if len(reqs) != 1 || !bytes.Equal(reqs[0].Body, body) || reqs[0].Method != tc.method {
					t.Fatalf("new node saw %+v", reqs)
				}
				if tc.waitHdr {
					ms, err := strconv.Atoi(reqs[0].Header.Get("Fenec-Wait"))
					if err != nil || ms > 3800 || ms < 2000 {
						t.Fatalf("resent Fenec-Wait %q, want what is left of 5000 after 1200", reqs[0].Header.Get("Fenec-Wait"))
					}
				}
				if v := fx.r.cuts(t, CutResent); v != 1 {
					t.Fatalf("cut resent = %v", v)
				}
				return
			}
			var e map[string]string
			if json.Unmarshal(got, &e) != nil || e["outcome"] != "unknown" {
				t.Fatalf("502 body %s", got)
			}
			if fx.neu.count() != 0 {
				t.Fatal("a write that may have run was sent again")
			}
			if v := fx.r.cuts(t, CutFailed502); v != 1 {
				t.Fatalf("cut failed_502 = %v", v)
			}
		})
	}
}

// TestCutWhileSending: a write still being sent cannot have run: it goes
// to the new node whole.
func TestCutWhileSending(t *testing.T) {
	fx := newCutFixture(t, nil, fwdOpts{})
	fx.px.Cut()
	body := randomBytes(24<<20, 11)
	a := goDo(fx.c, newReq(t, context.Background(), "POST", fx.r.url+"/t/acme/batch", body, nil))
	waitPhase(t, fx.r.f, "a", "acme", phaseSending)
	fx.failover("acme")
	resp, got, err := a.wait(t)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v %s", err, resp, got)
	}
	reqs := fx.neu.requests()
	if len(reqs) != 1 || !bytes.Equal(reqs[0].Body, body) {
		t.Fatalf("new node saw %d requests", len(reqs))
	}
	if v := fx.r.cuts(t, CutResent); v != 1 {
		t.Fatalf("cut resent = %v", v)
	}
}

// TestCutWhileConnecting: a request still connecting gives up at the cut
// and goes to the new node, even a plain write.
func TestCutWhileConnecting(t *testing.T) {
	hang := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == "lost:1" {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	fx := newCutFixture(t, nil, fwdOpts{dial: hang, cfg: func(c *Config) { c.DialTimeout = 50 * time.Second }})
	fx.place.set("acme", Target{Node: "a", Addr: "lost:1"})
	a := goDo(fx.c, newReq(t, context.Background(), "POST", fx.r.url+"/t/acme/query", []byte(`{}`), nil))
	waitPhase(t, fx.r.f, "a", "acme", phaseConnecting)
	fx.failover("acme")
	resp, got, err := a.wait(t)
	if err != nil || resp.StatusCode != 200 || fx.neu.count() != 1 {
		t.Fatalf("%v %v %s; new node saw %d", err, resp, got, fx.neu.count())
	}
}

// TestRefusedAtConnectAfterFailover: a dial refused as the failover lands
// is not a 502; the request goes where the tenant is now.
func TestRefusedAtConnectAfterFailover(t *testing.T) {
	var fx *cutFixture
	refuse := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == "refusing:1" {
			fx.place.set("acme", Target{Node: "b", Addr: fx.neu.addr()})
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	fx = newCutFixture(t, nil, fwdOpts{dial: refuse})
	fx.place.set("acme", Target{Node: "a", Addr: "refusing:1"})
	resp, got := do(t, fx.c, "POST", fx.r.url+"/t/acme/query", []byte(`{}`), nil)
	if resp.StatusCode != 200 || fx.neu.count() != 1 {
		t.Fatalf("%d %s; new node saw %d", resp.StatusCode, got, fx.neu.count())
	}
}

// TestCutEndsStream: a subscription to the lost node ends for its client to
// open it again.
func TestCutEndsStream(t *testing.T) {
	fx := newCutFixture(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: seed\ndata: {}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}, fwdOpts{})
	resp, err := fx.c.Get(fx.r.url + "/t/acme/orders/changes")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	readEvent(t, br, "seed")
	waitPhase(t, fx.r.f, "a", "acme", phaseStream)
	fx.px.Cut()
	fx.failover("acme")
	if _, err := io.ReadAll(br); err == nil {
		t.Fatal("stream ended as if whole")
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return fx.r.cuts(t, CutStreamEnded) == 1 })
}

// TestCutLeavesAnswerBegunAndOtherTenants: an answer that had begun is left
// to the node, and so is everything for a tenant the failover left there.
func TestCutLeavesAnswerBegunAndOtherTenants(t *testing.T) {
	release := make(chan struct{})
	fx := newCutFixture(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/t/acme/slow" {
			w.Header().Set("Content-Length", "10")
			_, _ = io.WriteString(w, "hello")
			w.(http.Flusher).Flush()
			<-release
			_, _ = io.WriteString(w, "world")
			return
		}
		w.Header().Set("Content-Length", "5")
		_, _ = io.WriteString(w, "other")
	}, fwdOpts{})
	begun := goDo(fx.c, newReq(t, context.Background(), "GET", fx.r.url+"/t/acme/slow", nil, nil))
	waitPhase(t, fx.r.f, "a", "acme", phaseAnswer)
	fx.px.Cut()
	other := goDo(fx.c, newReq(t, context.Background(), "POST", fx.r.url+"/t/other/query", []byte(`{}`), nil))
	waitPhase(t, fx.r.f, "a", "other", phaseSent)

	fx.failover("acme")
	if v := fx.r.cuts(t, CutLeft); v != 1 {
		t.Fatalf("cut left = %v", v)
	}
	if got := fx.r.f.inFlight("a", "other"); len(got) != 1 || got[0] != phaseSent {
		t.Fatalf("other tenant's request: %v", got)
	}
	close(release)
	fx.px.Heal()
	resp, body, err := begun.wait(t)
	if err != nil || resp.StatusCode != 200 || string(body) != "helloworld" {
		t.Fatalf("begun answer: %v %v %q", err, resp, body)
	}
	resp, body, err = other.wait(t)
	if err != nil || resp.StatusCode != 200 || string(body) != "other" {
		t.Fatalf("other tenant: %v %v %q", err, resp, body)
	}
	if fx.neu.count() != 0 {
		t.Fatalf("new node saw %d requests", fx.neu.count())
	}
	if fx.r.cuts(t, CutResent)+fx.r.cuts(t, CutFailed502)+fx.r.cuts(t, CutStreamEnded) != 0 {
		t.Fatal("something was cut")
	}
}

// TestCutOtherNodeUntouched: a cut names one node; requests to another
// node for the same tenant name are not looked at.
func TestCutOtherNodeUntouched(t *testing.T) {
	fx := newCutFixture(t, nil, fwdOpts{})
	fx.px.Cut()
	a := goDo(fx.c, newReq(t, context.Background(), "GET", fx.r.url+"/t/acme/x", nil, nil))
	waitPhase(t, fx.r.f, "a", "acme", phaseSent)
	fx.r.f.Cut("z", map[string]Target{"acme": {Node: "b", Addr: fx.neu.addr()}})
	fx.r.f.Cut("a", map[string]Target{"nobody": {Node: "b", Addr: fx.neu.addr()}})
	if got := fx.r.f.inFlight("a", "acme"); len(got) != 1 || got[0] != phaseSent {
		t.Fatalf("in flight: %v", got)
	}
	fx.px.Heal()
	if resp, _, err := a.wait(t); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", err, resp)
	}
}

// TestNodeResetMidRequest: a node whose connections are reset (not a cut)
// has reads asked again and plain writes answered "may have run".
func TestNodeResetMidRequest(t *testing.T) {
	for _, tc := range []struct {
		method string
		want   int
	}{{"GET", 200}, {"POST", 502}} {
		t.Run(tc.method, func(t *testing.T) {
			release := make(chan struct{})
			var first atomic.Bool
			fx := newCutFixture(t, func(w http.ResponseWriter, r *http.Request) {
				if first.CompareAndSwap(false, true) {
					select {
					case <-release:
					case <-r.Context().Done():
					}
				}
				w.Header().Set("Content-Length", "2")
				_, _ = io.WriteString(w, "ok")
			}, fwdOpts{})
			t.Cleanup(func() { close(release) })
			a := goDo(fx.c, newReq(t, context.Background(), tc.method, fx.r.url+"/t/acme/query", []byte(`{}`), nil))
			testkit.Eventually(t, 10*time.Second, func() bool { return fx.old.count() == 1 })
			waitPhase(t, fx.r.f, "a", "acme", phaseSent)
			fx.px.Reset()
			resp, body, err := a.wait(t)
			if err != nil || resp.StatusCode != tc.want {
				t.Fatalf("%v %v %s", err, resp, body)
			}
			if tc.want == 200 && fx.old.count() != 2 {
				t.Fatalf("node saw %d requests, want the read twice", fx.old.count())
			}
		})
	}
}

// TestCutThenRefusedUntilGranted is the seed's failover as a router that
// does not lead sees it: a keyed write out to the lost node is cut and sent
// to the new primary, which refuses it unrun until the leading router's
// grant reaches it; it is asked again until it lands.
func TestCutThenRefusedUntilGranted(t *testing.T) {
	var granted atomic.Bool
	fx := newCutFixture(t, nil, fwdOpts{})
	fx.neu.setAnswer(func(w http.ResponseWriter, r *http.Request) {
		if !granted.Load() {
			w.Header().Set("Fenec-Refused", "lease")
			w.Header().Set("Content-Length", "0")
			w.WriteHeader(503)
			return
		}
		w.Header().Set("Content-Length", "2")
		_, _ = io.WriteString(w, "ok")
	})
	fx.r.f.SetLeaseRetry(&fakeLease{lease: time.Hour})
	fx.px.Cut()
	a := goDo(fx.c, newReq(t, context.Background(), "POST", fx.r.url+"/t/acme/query", []byte(`{"q": 1}`), map[string]string{"Idempotency-Key": "k"}))
	waitPhase(t, fx.r.f, "a", "acme", phaseSent)
	fx.failover("acme")
	testkit.Eventually(t, 10*time.Second, func() bool { return fx.neu.count() >= 3 })
	granted.Store(true) // the leading router's grant lands
	resp, body, err := a.wait(t)
	if err != nil || resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("%v %v %q", err, resp, body)
	}
	if v := fx.r.cuts(t, CutResent); v != 1 {
		t.Fatalf("cut resent = %v", v)
	}
}

// The step that marks a request sent from inside the wait for its answer
// never waits on the flight's lock: a cut holds that lock while it closes
// the connection, and the close waits for the wait's hold on the socket
// to end. Held by another, the step says no at once and the request goes
// on without the wait; free, it enters the phase unless the attempt was
// stopped.
func TestTryEnterSentNeverWaits(t *testing.T) {
	var fl flight
	fl.begin("acme")
	fl.mu.Lock()
	done := make(chan bool, 1)
	go func() { done <- fl.tryEnterSent() }()
	select {
	case ok := <-done:
		if ok {
			t.Fatal("entered the phase while another held the lock")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waited on the lock a cut holds while it closes the connection")
	}
	fl.mu.Unlock()
	if !fl.tryEnterSent() {
		t.Fatal("a free, live attempt did not enter the phase")
	}
	if fl.phase != phaseSent {
		t.Fatalf("phase %v, want sent", fl.phase)
	}
	fl.clientGone()
	if fl.tryEnterSent() {
		t.Fatal("an attempt whose client left entered the phase")
	}
}
