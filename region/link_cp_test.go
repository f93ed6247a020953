package region

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/testkit"
)

// A change at the global tier while a handoff is in flight: every
// placement the global tier answered before handing region eu over is in
// the region's directory when it leases, and every one the region
// answered before handing it back is in the global directory after.
func TestLinkChangesDuringHandoffCP(t *testing.T) {
	tt := startTwoTiers(t)
	g, e := tt.g, tt.e
	for _, c := range []struct {
		from, to *cpRouter
		side     string
		prefix   string
	}{{g, e, global.LeaserRegion, "x"}, {e, g, global.LeaserGlobal, "y"}} {
		// One placement answered before the handoff is asked, the rest
		// while it runs.
		first := c.prefix + "0"
		testkit.Eventually(t, cpWait, func() error {
			if st, b := c.from.shard(t, http.MethodPut, "tenants/"+first, map[string]any{"node": "a"}, nil); st != http.StatusCreated {
				return fmt.Errorf("place %s at %s: %d %s", first, c.from.rt.id, st, b)
			}
			return nil
		})
		done := make(chan struct{})
		acked := []string{first}
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := 1; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				name := fmt.Sprintf("%s%d", c.prefix, i)
				req, err := http.NewRequest(http.MethodPut, c.from.url+"/_shard/tenants/"+name, strings.NewReader(`{"node":"a"}`))
				if err != nil {
					return
				}
				req.Header.Set("Authorization", "Bearer "+cpRouterToken)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					continue
				}
				res.Body.Close()
				if res.StatusCode == http.StatusCreated {
					acked = append(acked, name)
				}
			}
		})
		c.to.handoff(t, c.side, false, http.StatusOK)
		close(done)
		wg.Wait()
		t.Logf("%d placements answered at %s around the handoff to %s", len(acked), c.from.rt.id, c.side)
		s := global.NewStore(c.to.rt.dir)
		testkit.Eventually(t, cpWait, func() error {
			for _, name := range acked {
				if _, err := s.GetTenant(cpCtx(t), name); err != nil {
					return fmt.Errorf("%s, placed at %s before the handoff to %s, in the new owner's directory: %w", name, c.from.rt.id, c.side, err)
				}
			}
			return nil
		})
	}
}
