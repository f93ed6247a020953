package forward

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
)

// fakeLease is a LeaseRetry a test drives.
type fakeLease struct {
	leading bool
	lease   time.Duration
	mu      sync.Mutex
	grants  []string // guarded by mu: nodes granted
	onGrant func()
}

func (l *fakeLease) Leading() bool        { return l.leading }
func (l *fakeLease) Lease() time.Duration { return l.lease }
func (l *fakeLease) GrantNow(_ context.Context, node string) error {
	l.mu.Lock()
	l.grants = append(l.grants, node)
	l.mu.Unlock()
	if l.onGrant != nil {
		l.onGrant()
	}
	return nil
}

func (l *fakeLease) granted() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.grants...)
}

// refusingNode refuses writes with 503 Fenec-Refused: lease while refuse
// says so.
func refusingNode(t *testing.T, refuse func(n int64) bool) (*recorder, *atomic.Int64) {
	var tries atomic.Int64
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		n := tries.Add(1)
		if refuse(n) {
			w.Header().Set("Fenec-Refused", "lease")
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Length", "30")
			w.WriteHeader(503)
			_, _ = io.WriteString(w, `{"error": "no lease for this"}`)
			return
		}
		w.Header().Set("Content-Length", "2")
		_, _ = io.WriteString(w, "ok")
	})
	return rec, &tries
}

func TestLeaseRefusalNonLeadingAsksUntilItLands(t *testing.T) {
	node, tries := refusingNode(t, func(n int64) bool { return n <= 4 })
	place := newPlacements(map[string]Target{"acme": {Node: "n2", Addr: node.addr()}})
	r := newRouter(t, place, fwdOpts{})
	lease := &fakeLease{lease: 10 * time.Second}
	r.f.SetLeaseRetry(lease)
	body := randomBytes(50_000, 5)
	resp, got := do(t, client(t), "POST", r.url+"/t/acme/query", body, nil)
	if resp.StatusCode != 200 || string(got) != "ok" {
		t.Fatalf("%d %s", resp.StatusCode, got)
	}
	if tries.Load() != 5 {
		t.Fatalf("node tried %d times, want 5", tries.Load())
	}
	for i, s := range node.requests() {
		if !bytes.Equal(s.Body, body) {
			t.Fatalf("try %d carried another body", i)
		}
	}
	if len(lease.granted()) != 0 {
		t.Fatal("a non-leading router granted")
	}
	if n := node.conns.Load(); n != 1 {
		t.Errorf("refusals closed connections: %d", n)
	}
}

func TestLeaseRefusalNonLeadingBoundedByLease(t *testing.T) {
	node, _ := refusingNode(t, func(int64) bool { return true })
	place := newPlacements(map[string]Target{"acme": {Node: "n2", Addr: node.addr()}})
	r := newRouter(t, place, fwdOpts{})
	r.f.SetLeaseRetry(&fakeLease{lease: 150 * time.Millisecond})
	resp, got := do(t, client(t), "POST", r.url+"/t/acme/query", []byte(`{}`), nil)
	if resp.StatusCode != 503 || resp.Header.Get("Fenec-Refused") != "lease" || string(got) != `{"error": "no lease for this"}` {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, got)
	}
}

// TestLeaseRefusalNonLeadingStopsWhenClientLeaves: with a bound of an hour,
// only the client leaving ends the asking.
func TestLeaseRefusalNonLeadingStopsWhenClientLeaves(t *testing.T) {
	node, tries := refusingNode(t, func(int64) bool { return true })
	place := newPlacements(map[string]Target{"acme": {Node: "n2", Addr: node.addr()}})
	r := newRouter(t, place, fwdOpts{cfg: func(c *Config) { c.UpstreamTimeout = time.Hour }})
	r.f.SetLeaseRetry(&fakeLease{lease: 2 * time.Hour})
	ended := make(chan struct{})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		defer close(ended)
		r.f.ServeHTTP(w, req)
	}))
	t.Cleanup(front.Close)
	router := front.URL
	ctx, cancel := context.WithCancel(context.Background())
	a := goDo(client(t), newReq(t, ctx, "POST", router+"/t/acme/query", []byte(`{}`), nil))
	testkit.Eventually(t, 10*time.Second, func() bool { return tries.Load() >= 3 })
	cancel()
	if _, _, err := a.wait(t); err == nil {
		t.Fatal("cancelled request answered")
	}
	select {
	case <-ended:
	case <-time.After(20 * time.Second):
		t.Fatal("the router kept asking after its client left")
	}
}

func TestLeaseRefusalLeadingGrantsTwice(t *testing.T) {
	node, tries := refusingNode(t, func(int64) bool { return true })
	place := newPlacements(map[string]Target{"acme": {Node: "n2", Addr: node.addr()}})
	r := newRouter(t, place, fwdOpts{})
	lease := &fakeLease{leading: true, lease: time.Hour}
	r.f.SetLeaseRetry(lease)
	resp, _ := do(t, client(t), "POST", r.url+"/t/acme/query", []byte(`{}`), nil)
	if resp.StatusCode != 503 || resp.Header.Get("Fenec-Refused") != "lease" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	if g := lease.granted(); len(g) != 2 || g[0] != "n2" || g[1] != "n2" {
		t.Fatalf("grants %v, want two to n2", g)
	}
	if tries.Load() != 3 {
		t.Fatalf("node tried %d times, want 3", tries.Load())
	}
}

func TestLeaseRefusalLeadingLandsAfterGrant(t *testing.T) {
	var granted atomic.Bool
	node, tries := refusingNode(t, func(int64) bool { return !granted.Load() })
	place := newPlacements(map[string]Target{"acme": {Node: "n2", Addr: node.addr()}})
	r := newRouter(t, place, fwdOpts{})
	lease := &fakeLease{leading: true, lease: time.Hour, onGrant: func() { granted.Store(true) }}
	r.f.SetLeaseRetry(lease)
	resp, got := do(t, client(t), "POST", r.url+"/t/acme/query", []byte(`{}`), map[string]string{"Idempotency-Key": "k"})
	if resp.StatusCode != 200 || string(got) != "ok" || tries.Load() != 2 || len(lease.granted()) != 1 {
		t.Fatalf("%d %s tries %d grants %v", resp.StatusCode, got, tries.Load(), lease.granted())
	}
}

func TestLeaseRefusalWithoutHookPassesBack(t *testing.T) {
	node, tries := refusingNode(t, func(int64) bool { return true })
	place := newPlacements(map[string]Target{"acme": {Node: "n2", Addr: node.addr()}})
	r := newRouter(t, place, fwdOpts{})
	resp, _ := do(t, client(t), "POST", r.url+"/t/acme/query", []byte(`{}`), nil)
	if resp.StatusCode != 503 || tries.Load() != 1 {
		t.Fatalf("%d after %d tries", resp.StatusCode, tries.Load())
	}
}
