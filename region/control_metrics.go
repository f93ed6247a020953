package region

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenec-go/fenec/global"
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
}

func newControlMetrics(reg prometheus.Registerer, w *global.Watcher) (*controlMetrics, error) {
	m := &controlMetrics{
		moves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_router_moves_total",
			Help: "Tenant moves this router ran, by outcome.",
		}, []string{"outcome"}),
	}
	for _, o := range []string{MoveDone, MoveAborted, MoveStuck, MoveRefused} {
		m.moves.WithLabelValues(o)
	}
	for _, c := range []prometheus.Collector{m.moves, &tenantsCollector{w: w}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

var tenantsDesc = prometheus.NewDesc("fenec_router_tenants",
	"Tenants placed on each node, as this router's copy of the directory has them.", []string{"node"}, nil)

// tenantsCollector counts the tenants per node from the current view as it
// is scraped, so the gauge is never out of step with the directory.
type tenantsCollector struct{ w *global.Watcher }

func (c *tenantsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- tenantsDesc }

func (c *tenantsCollector) Collect(ch chan<- prometheus.Metric) {
	v := c.w.View()
	if v == nil {
		return
	}
	counts := map[string]int{}
	for name := range v.Nodes() {
		counts[name] = 0
	}
	for _, t := range v.Tenants() {
		counts[t.Node]++
	}
	for node, n := range counts {
		ch <- prometheus.MustNewConstMetric(tenantsDesc, prometheus.GaugeValue, float64(n), node)
	}
}
