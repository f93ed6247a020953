package forward

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/wire"
)

// copyPlacements is fakePlacements that also names a read copy near the
// router for every tenant it lists in near.
type copyPlacements struct {
	*fakePlacements
	near map[string]Target
}

func (p copyPlacements) NearCopy(t string) (Target, bool) {
	tg, ok := p.near[t]
	return tg, ok
}

func lostZ1(addr string) Target {
	since := time.Date(2026, 12, 7, 7, 40, 1, 0, time.UTC)
	return Target{Node: "eu1", Addr: addr, Unavailable: &Unavailable{
		Reason: UnavailableZone, Tenant: "z1", Node: "eu1", Region: "eu", Since: since,
		Msg: "tenant z1 is unavailable: its node eu1 of region eu lapsed; it comes back when eu1 does",
	}}
}

// wantUnavailable checks a 503 answered for the lost z1.
func wantUnavailable(t *testing.T, resp *http.Response, body []byte) {
	t.Helper()
	var got unavailableBody
	if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(body, &got) != nil {
		t.Fatalf("want 503 with a JSON body, got %d %s", resp.StatusCode, body)
	}
	if got.Tenant != "z1" || got.Node != "eu1" || got.Region != "eu" || !strings.Contains(got.Error, "comes back when eu1 does") ||
		got.LapsedAt.IsZero() {
		t.Fatalf("the answer does not name the tenant, node, region and since when: %s", body)
	}
	if ra := resp.Header.Get("Retry-After"); ra != "5" {
		t.Fatalf("Retry-After %q, want 5", ra)
	}
}

// TestUnavailableAnsweredAtOnce: a tenant whose node is recorded lost is
// answered 503 at once, and nothing is sent to its node: not a read, not
// a write, not one that states a bound on a router with no copy near it.
func TestUnavailableAnsweredAtOnce(t *testing.T) {
	node := newRecorder(t, nil)
	p := newPlacements(map[string]Target{"z1": lostZ1(node.addr())})
	tr := newRouter(t, p, fwdOpts{})
	c := client(t)
	for _, tc := range []struct {
		method string
		body   []byte
		hdr    map[string]string
	}{
		{"POST", []byte(`{"q": "get kv"}`), nil},
		{"POST", []byte(`{"q": "insert kv {k: 'a'}"}`), map[string]string{"Idempotency-Key": "k1"}},
		{"GET", nil, map[string]string{wire.HeaderMaxStaleness: "60000"}},
	} {
		start := time.Now()
		resp, body := do(t, c, tc.method, tr.url+"/t/z1/query", tc.body, tc.hdr)
		wantUnavailable(t, resp, body)
		if took := time.Since(start); took > time.Second {
			t.Fatalf("answered after %v", took)
		}
	}
	if node.count() != 0 || node.conns.Load() != 0 {
		t.Fatalf("the lost node was sent %d requests on %d connections", node.count(), node.conns.Load())
	}
	if got := testkit.CounterValue(t, tr.f.lost[UnavailableZone]); got != 3 {
		t.Fatalf("fenec_router_unavailable_total{reason=zone} = %v, want 3", got)
	}
	if got := testkit.CounterValue(t, tr.f.lost[UnavailableNotFailedOver]); got != 0 {
		t.Fatalf("fenec_router_unavailable_total{reason=not_failed_over} = %v, want 0", got)
	}
}

// TestUnavailableReadCopyAnswers: a bounded read of a lost tenant goes to
// its read copy near the router, which answers it; one the copy declines,
// and one stating no bound, are answered 503 (the copy never asked for
// the latter).
func TestUnavailableReadCopyAnswers(t *testing.T) {
	lost := newRecorder(t, nil)
	var decline atomic.Bool
	cp := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if decline.Load() {
			w.Header().Set("Content-Length", "0")
			w.WriteHeader(wire.StatusDeclined)
			return
		}
		w.Header().Set(wire.HeaderStaleness, "900")
		w.Header().Set("Content-Length", "12")
		_, _ = w.Write([]byte(`{"rows": []}`))
	})
	p := copyPlacements{fakePlacements: newPlacements(map[string]Target{"z1": lostZ1(lost.addr())}),
		near: map[string]Target{"z1": {Node: "us1", Addr: cp.addr()}}}
	tr := newRouter(t, p, fwdOpts{})
	c := client(t)

	resp, body := do(t, c, "POST", tr.url+"/t/z1/query", []byte(`{"q": "get kv"}`), map[string]string{wire.HeaderMaxStaleness: "60000"})
	if resp.StatusCode != 200 || resp.Header.Get(wire.HeaderServedBy) != wire.ServedByCopy {
		t.Fatalf("a bounded read of a lost tenant with a copy near: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	decline.Store(true)
	resp, body = do(t, c, "POST", tr.url+"/t/z1/query", []byte(`{"q": "get kv"}`), map[string]string{wire.HeaderMaxStaleness: "10"})
	wantUnavailable(t, resp, body)
	copies := cp.count()
	resp, body = do(t, c, "POST", tr.url+"/t/z1/query", []byte(`{"q": "get kv"}`), nil)
	wantUnavailable(t, resp, body)
	if cp.count() != copies {
		t.Fatal("a read stating no bound went to the read copy")
	}
	if lost.count() != 0 {
		t.Fatalf("the lost node was sent %d requests", lost.count())
	}
}

// TestUnavailableRecordedAsDialled: a node recorded lost while a request
// dials it answers that request 503 unavailable, not 502 unreachable.
func TestUnavailableRecordedAsDialled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens: dials are refused
	p := newPlacements(map[string]Target{"z1": {Node: "eu1", Addr: addr}})
	dial := func(ctx context.Context, network, a string) (net.Conn, error) {
		p.set("z1", lostZ1(addr)) // the mark lands as the dial fails
		return nil, errors.New("connection refused")
	}
	tr := newRouter(t, p, fwdOpts{dial: dial})
	resp, body := do(t, client(t), "GET", tr.url+"/t/z1/kv", nil, nil)
	wantUnavailable(t, resp, body)
}
