package region

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/region/lead"
	"github.com/fenec-go/fenec/region/leasing"
)

// Outcomes of a move, the label of fenec_router_moves_total.
const (
	MoveDone    = "done"    // flipped onto the target
	MoveAborted = "aborted" // failed before the flip; the tenant was put back
	MoveStuck   = "stuck"   // failed and could not be wholly put back (logged)
	MoveRefused = "refused" // never began: held, unknown node, not leading
)

// controlMetrics are the control plane's series.
type controlMetrics struct {
	moves *prometheus.CounterVec
	// failovers counts failovers asked by hand (POST
	// /_shard/nodes/<n>/failover), by outcome; the automatic ones are
	// fenec_router_auto_failovers_total.
	failovers *prometheus.CounterVec
	// refused counts calls of /_shard/ and /_metrics refused for their
	// token: "unauthorized" (401, a missing or wrong one) and "held_off"
	// (429, from an address past the bad-token back-off).
	refused *prometheus.CounterVec
}

func newControlMetrics(reg prometheus.Registerer, w *global.Watcher, ld *lead.Lead) (*controlMetrics, error) {
	m := &controlMetrics{
		moves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_router_moves_total",
			Help: "Tenant moves this router ran, by outcome.",
		}, []string{"outcome"}),
	}
	m.failovers = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fenec_router_failovers_by_hand_total",
		Help: "Failovers asked of this router by hand (POST /_shard/nodes/<n>/failover), by outcome: done, partial, failed.",
	}, []string{"outcome"})
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fenec_router_refused_tokens_total",
		Help: "Calls of /_shard/ and /_metrics refused for their token: unauthorized (401, missing or wrong), held_off (429, an address past the bad-token back-off).",
	}, []string{"answer"})
	m.refused.WithLabelValues("unauthorized")
	m.refused.WithLabelValues("held_off")
	for _, o := range []string{MoveDone, MoveAborted, MoveStuck, MoveRefused} {
		m.moves.WithLabelValues(o)
	}
	for _, o := range []string{leasing.AutoFailoverDone, leasing.AutoFailoverPartial, leasing.AutoFailoverFailed} {
		m.failovers.WithLabelValues(o)
	}
	leading := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fenec_router_leading",
		Help: "1 while this router leads its directory (takes changes, and leases with --auto-failover), else 0.",
	}, func() float64 {
		if ok, _ := ld.Status(); ok {
			return 1
		}
		return 0
	})
	term := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fenec_router_term",
		Help: "The directory's term as this router last saw it lead or follow: it moves on at every promotion.",
	}, func() float64 { _, t := ld.Status(); return float64(t) })
	for _, c := range []prometheus.Collector{m.moves, m.failovers, m.refused, &tenantsCollector{w: w}, leading, term} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

var (
	tenantsDesc = prometheus.NewDesc("fenec_router_tenants",
		"Tenants placed on each node, as this router's copy of the directory has them.", []string{"node"}, nil)
	unreplicatedDesc = prometheus.NewDesc("fenec_router_tenants_unreplicated",
		"Tenants with no replica, as this router's copy of the directory has them: a failover of their node has no copy to promote.", nil, nil)
	behindDesc = prometheus.NewDesc("fenec_router_replicas_behind",
		"Tenants whose replica is recorded behind: no failover promotes it unforced until its primary says it caught up.", nil, nil)
	viewAgeDesc = prometheus.NewDesc("fenec_router_directory_ready",
		"1 once this router holds its copy of the directory (what /_ready answers 200 for), else 0.", nil, nil)
)

// tenantsCollector counts the tenants per node from the current view as it
// is scraped, so the gauge is never out of step with the directory.
type tenantsCollector struct{ w *global.Watcher }

func (c *tenantsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- tenantsDesc
	ch <- unreplicatedDesc
	ch <- behindDesc
	ch <- viewAgeDesc
}

func (c *tenantsCollector) Collect(ch chan<- prometheus.Metric) {
	v := c.w.View()
	if v == nil {
		ch <- prometheus.MustNewConstMetric(viewAgeDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(viewAgeDesc, prometheus.GaugeValue, 1)
	counts := map[string]int{}
	for name := range v.Nodes() {
		counts[name] = 0
	}
	unreplicated, behind := 0, 0
	for _, t := range v.Tenants() {
		counts[t.Node]++
		if t.Replica == "" {
			unreplicated++
		}
		if t.ReplicaBehind > 0 {
			behind++
		}
	}
	ch <- prometheus.MustNewConstMetric(unreplicatedDesc, prometheus.GaugeValue, float64(unreplicated))
	ch <- prometheus.MustNewConstMetric(behindDesc, prometheus.GaugeValue, float64(behind))
	for node, n := range counts {
		ch <- prometheus.MustNewConstMetric(tenantsDesc, prometheus.GaugeValue, float64(n), node)
	}
}
