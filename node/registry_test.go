package node

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
)

// TestRegistryChurn runs requests while the tenant is deleted, created
// again and closed for idleness: every answer is one of the statuses
// those states give, never a 500, and nothing is left behind.
func TestRegistryChurn(t *testing.T) {
	n := startNode(t, func(c *Config) { c.IdleClose = 5 * time.Millisecond })
	n.mkTenant("a")
	n.q("a", "create collection c (n int)")
	var stop atomic.Bool
	var wg sync.WaitGroup
	defer func() { stop.Store(true); wg.Wait() }() // also when the test fails early
	bad := make(chan string, 100)
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				for _, r := range []*resp{
					n.do("GET", "/t/a/c?count", ""),
					n.do("POST", "/t/a/c", `{"n":1}`),
				} {
					switch r.Status {
					case 200, 201, 404, 503:
					default:
						select {
						case bad <- string(r.Body):
						default:
						}
					}
				}
			}
		})
	}
	for range 30 {
		if r := n.admin("DELETE", "tenants/a", ""); r.Status != 204 {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		if r := n.admin("PUT", "tenants/a", ""); r.Status != 201 {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		n.q("a", "create collection c (n int)")
	}
	stop.Store(true)
	wg.Wait()
	close(bad)
	for b := range bad {
		t.Errorf("unexpected answer %s", b)
	}
	if r := n.do("GET", "/t/a/c?count", ""); r.Status != 200 {
		t.Fatalf("final read: %d %s", r.Status, r.Body)
	}
}

// TestSlowOpenStallsNoOther: while one tenant's open hangs, another
// tenant opens and answers, and requests to the slow one share its one
// open.
func TestSlowOpenStallsNoOther(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, func(c *Config) { c.Dir = dir })
	for _, name := range []string{"slow", "fast"} {
		n.mkTenant(name)
		n.q(name, "create collection c (n int)")
	}
	n.s.Close()
	release := make(chan struct{})
	var opens atomic.Int32
	n2 := startNode(t, func(c *Config) { c.Dir = dir })
	hook := func(name string) {
		if name == "slow" {
			opens.Add(1)
			<-release
		}
	}
	n2.s.reg.beforeOpen.Store(&hook)
	var wg sync.WaitGroup
	slow := make([]*resp, 3)
	for i := range slow {
		wg.Go(func() { slow[i] = n2.do("GET", "/t/slow/c?count", "") })
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return opens.Load() == 1 }, "the slow open began")
	if r := n2.do("GET", "/t/fast/c?count", ""); r.Status != 200 {
		t.Fatalf("fast tenant while another opens: %d %s", r.Status, r.Body)
	}
	close(release)
	wg.Wait()
	for _, r := range slow {
		if r.Status != 200 {
			t.Fatalf("slow tenant: %d %s", r.Status, r.Body)
		}
	}
	if got := opens.Load(); got != 1 {
		t.Fatalf("slow tenant opened %d times", got)
	}
}
