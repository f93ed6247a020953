package lease

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
)

// httpTransport is the router's side of POST /_admin/lease as package
// region is expected to write it: the grant as JSON, the reply through
// DecodeReply, everything (dial included) bounded by ctx.
type httpTransport struct {
	client *http.Client

	mu    sync.Mutex
	addrs map[string]string // guarded by mu
}

func (h *httpTransport) Send(ctx context.Context, node string, g Grant) (Answer, error) {
	h.mu.Lock()
	addr := h.addrs[node]
	h.mu.Unlock()
	body, err := json.Marshal(g)
	if err != nil {
		return Answer{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, addr+"/_admin/lease", bytes.NewReader(body))
	if err != nil {
		return Answer{}, err
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return Answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Answer{}, err
	}
	return DecodeReply(resp.StatusCode, b)
}

// TestLeaserOverHTTP runs the Leaser against nodes serving Handler over
// real HTTP on loopback: one leased, one started without --lease, one that
// goes away and is failed over.
func TestLeaserOverHTTP(t *testing.T) {
	leases := map[string]*NodeLease{"a": NewNodeLease(Binding{}, nil), "c": NewNodeLease(Binding{}, nil)}
	tr := &httpTransport{client: &http.Client{Transport: &http.Transport{}}, addrs: map[string]string{}}
	t.Cleanup(tr.client.CloseIdleConnections)
	servers := map[string]*httptest.Server{}
	for _, n := range []string{"a", "b", "c"} {
		srv := httptest.NewServer(&Handler{Lease: leases[n], Clock: BootClock{}}) // b: nil lease
		t.Cleanup(srv.Close)
		servers[n] = srv
		tr.addrs[n] = srv.URL
	}

	var mu sync.Mutex
	failed := map[string]int{}
	l, err := NewLeaser(LeaserConfig{
		Router: "r-1", Term: 1, Lease: 2 * time.Second, Transport: tr,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Failover: func(_ context.Context, node string) {
			mu.Lock()
			defer mu.Unlock()
			failed[node]++
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for _, n := range []string{"a", "b", "c"} {
		l.SetTenants(n, []string{"t-" + n})
	}
	if err := l.Start(t.Context()); err != nil {
		t.Fatal(err)
	}

	writable := func(n string) bool {
		ok, _ := leases[n].Writable(BootClock{}.Now(), "t-"+n)
		return ok
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return writable("a") && writable("c") }, "a and c leased")

	servers["c"].CloseClientConnections()
	servers["c"].Close()
	testkit.Eventually(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return failed["c"] == 1
	}, "c failed over")
	if writable("c") {
		t.Fatal("c still writable when failed over")
	}
	// a kept its lease throughout, b (no lease) is never failed over.
	if !writable("a") {
		t.Fatal("a lost its lease")
	}
	mu.Lock()
	defer mu.Unlock()
	if failed["a"] != 0 || failed["b"] != 0 {
		t.Fatalf("failovers %v", failed)
	}
	for _, st := range l.Nodes() {
		if (st.Node == "b") == st.TakesLease {
			t.Fatalf("status %+v", st)
		}
	}
}
