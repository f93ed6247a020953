package region

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fenec-go/fenec/internal/testkit"
)

// TestGrantReachingAnotherNodeRefusedCP: a leased node's address is
// re-pointed at another leased node. The grants meant for the first name
// the node they are for, and the node they reach refuses every one of
// them: it never takes another node's list (which could name a tenant
// whose old file it holds).
func TestGrantReachingAnotherNodeRefusedCP(t *testing.T) {
	r := startLeasingRouter(t)
	n1, n2 := startLeaseNode(t, true), startLeaseNode(t, true)
	var target atomic.Pointer[url.URL]
	u2, _ := url.Parse(n2.URL())
	target.Store(u2)
	var repointed atomic.Bool
	var grants, taken atomic.Int64 // grants through the front once re-pointed, and those answered 200
	front := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target.Load()) },
		ModifyResponse: func(res *http.Response) error {
			if repointed.Load() && res.Request.URL.Path == "/_admin/lease" && res.Request.Method == http.MethodPost {
				grants.Add(1)
				if res.StatusCode == http.StatusOK {
					taken.Add(1)
				}
			}
			return nil
		},
	})
	t.Cleanup(front.Close)
	r.addLeaseNode(t, "n1", n1, nil)
	if st, b := r.shard(t, http.MethodPut, "nodes/n2", map[string]any{"addr": front.URL, "token": cpAdminToken, "region": "eu"}, nil); st != http.StatusCreated {
		t.Fatalf("put node n2: %d %s", st, b)
	}
	r.waitLeased(t, "n1")
	r.waitLeased(t, "n2")
	r.place(t, "t2", "n2")

	u1, _ := url.Parse(n1.URL())
	target.Store(u1)
	repointed.Store(true)
	front.CloseClientConnections() // kept connections to n2 end too
	testkit.Eventually(t, cpWait, func() error {
		if grants.Load() < 3 {
			return fmt.Errorf("%d grants for n2 reached n1 so far", grants.Load())
		}
		return nil
	})
	if taken.Load() != 0 {
		t.Fatalf("n1 took %d of %d grants meant for n2", taken.Load(), grants.Load())
	}
	st, _, b := cpDo(t, http.MethodGet, n1.URL()+"/_admin/lease", cpAdminToken, nil, nil)
	// Quoted: the router's generated id may hold the letters t2.
	if st != http.StatusOK || strings.Contains(string(b), `"t2"`) {
		t.Fatalf("n1's lease: %d %s", st, b)
	}
}
