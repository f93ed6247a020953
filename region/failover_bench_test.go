package region

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// BenchmarkFailoverCP measures a failover by hand of a lost node holding
// 10 tenants with caught-up copies on its standby (in-process nodes under
// --sync always): each op promotes all 10 and points the directory at
// them. It reports ms per tenant.
func BenchmarkFailoverCP(b *testing.B) {
	const tenants = 10
	var total time.Duration
	for b.Loop() {
		b.StopTimer()
		r := startCPRouter(b, nil)
		pa, pb := startReplNode(b), startReplNode(b)
		r.addReplNode(b, "a", pa, nil)
		r.addReplNode(b, "b", pb, nil)
		r.addReplNode(b, "a", pa, map[string]any{"standby": "b"})
		for i := range tenants {
			name := fmt.Sprintf("t%d", i)
			r.place(b, name, "a")
			r.mustQuery(b, name, "create collection c (n int)")
			r.mustQuery(b, name, `put c {n: 1}`)
			caughtUp(b, name, pa, pb)
		}
		pa.down(b)
		b.StartTimer()
		start := time.Now()
		var res FailoverResult
		st, body := r.shard(b, http.MethodPost, "nodes/a/failover", nil, &res)
		total += time.Since(start)
		b.StopTimer()
		if st != http.StatusOK || len(res.Promoted) != tenants {
			b.Fatalf("failover: %d %s", st, body)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N)/tenants, "ms/tenant")
}
