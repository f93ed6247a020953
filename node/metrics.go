package node

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the node's Prometheus series, on a registry of its own. No
// label ever names a tenant.
type metrics struct {
	reg        *prometheus.Registry
	statements *prometheus.CounterVec   // kind
	errors     *prometheus.CounterVec   // status
	duration   *prometheus.HistogramVec // route
	conns      prometheus.Gauge
	held       prometheus.Gauge
	streams    prometheus.Gauge
	// unreplicated counts writes answered under --sync always before a
	// copy streaming from their tenant acknowledged them: a failover onto
	// it may lack them.
	unreplicated prometheus.Counter
	// cancelled counts statements stopped part way, by why: client (it
	// went, or its router gave up), time (--max-statement-time), tenant
	// (the tenant going, the node stopping).
	cancelled *prometheus.CounterVec
}

// answers registers the series of the answer budget (answer.go).
func (m *metrics) answers(b *answerBudget, refused *atomic.Int64) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fenec_node_answer_bytes",
			Help: "Bytes the answers being made and written hold now, charged against --max-answer-memory.",
		}, func() float64 { return float64(b.used.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "fenec_node_answers_refused_total",
			Help: "Reads refused for --max-answer-memory: 503 while the budget was spent, 400 for an answer that alone would pass it.",
		}, func() float64 { return float64(refused.Load()) }),
	)
}

// newMetrics registers the series; the tenant, lease and copy gauges read
// the registry and the lease when scraped.
func newMetrics(reg *registry, nl *nodeLease) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		statements: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_node_statements_total",
			Help: "Statements run, by kind (get, put, insert, set, del, ddl, other).",
		}, []string{"kind"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_node_errors_total",
			Help: "Requests answered with an error, by status.",
		}, []string{"status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fenec_node_request_duration_seconds",
			Help:    "Request durations by route.",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route"}),
		conns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fenec_node_open_connections",
			Help: "Client connections open.",
		}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fenec_node_held_requests",
			Help: "Requests held by Fenec-Wait or Fenec-After.",
		}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fenec_node_streams",
			Help: "Subscriptions and change feeds open.",
		}),
		cancelled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_node_statements_cancelled_total",
			Help: "Statements stopped part way, nothing of them landed, by reason: client (it went, or its router gave up), time (--max-statement-time), tenant (the tenant going, the node stopping).",
		}, []string{"reason"}),
		unreplicated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_node_writes_unreplicated_total",
			Help: "Writes under --sync always answered before a copy streaming from the tenant acknowledged them (it lagged and was not waited for): a failover onto it may lack them.",
		}),
	}
	// Every reason's series is there from the start, so that an alert's
	// rate over it sees the first statement stopped.
	for _, reason := range []string{"client", "time", "tenant"} {
		m.cancelled.WithLabelValues(reason)
	}
	m.reg.MustRegister(m.statements, m.errors, m.duration, m.conns, m.held, m.streams, m.unreplicated, m.cancelled,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fenec_node_tenants_on_disk",
			Help: "Tenant files in the node's directory.",
		}, func() float64 { names, _ := reg.onDisk(); return float64(len(names)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fenec_node_tenants_open",
			Help: "Tenants open now.",
		}, func() float64 { return float64(reg.openCount()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fenec_node_memory_bytes",
			Help: "Memory the open tenants hold, as the engine estimates it.",
		}, func() float64 { return float64(reg.memory()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fenec_node_lease_left_seconds",
			Help: "What is left of the node's lease by its own boot clock (0: it holds none, or runs without --lease); its tenants take no write at 0.",
		}, func() float64 { return nl.left().Seconds() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fenec_node_lease_tenants",
			Help: "Tenants the node's lease names.",
		}, func() float64 { return float64(nl.tenants()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fenec_node_tenants_frozen",
			Help: "Open tenants frozen (writes answer 503): a move's source while it copies, or one left so.",
		}, func() float64 { n, _ := reg.frozen(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fenec_node_frozen_oldest_seconds",
			Help: "How long the longest-frozen tenant has been frozen (0: none is). A move freezes its source for the copy, well under a minute; longer is a move that never finished or a moved tenant's source never deleted.",
		}, func() float64 { _, oldest := reg.frozen(); return oldest.Seconds() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fenec_node_copies_lagging",
			Help: "Copies streaming from this node's open primaries that a write no longer waits for (they lagged past the bound).",
		}, func() float64 { lagging, _ := reg.copyLag(); return float64(lagging) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fenec_node_copy_lag_max_seq",
			Help: "The most writes any copy streaming from this node's open primaries has not acknowledged.",
		}, func() float64 { _, most := reg.copyLag(); return float64(most) }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// frozen counts the open tenants frozen and says how long the one frozen
// longest has been.
func (r *registry) frozen() (n int, oldest time.Duration) {
	now := time.Now().UnixNano()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range r.tenants {
		at := t.frozenAt.Load()
		if at == 0 {
			continue
		}
		n++
		oldest = max(oldest, time.Duration(now-at))
	}
	return n, oldest
}

// copyLag looks at the copies streaming from every open primary: how many
// lag (a write no longer waits for them), and the most writes one has not
// acknowledged.
func (r *registry) copyLag() (lagging int, most uint64) {
	r.mu.Lock()
	names := make([]string, 0, len(r.tenants))
	for name := range r.tenants {
		names = append(names, name)
	}
	r.mu.Unlock()
	for _, name := range names {
		t := r.peek(name)
		if t == nil {
			continue
		}
		seq := t.db.Seq()
		for _, c := range t.copies() {
			if c.Lagging {
				lagging++
			}
			if c.Acked < seq {
				most = max(most, seq-c.Acked)
			}
		}
	}
	return lagging, most
}

// countError counts an answer with an error status.
func (m *metrics) countError(status int) {
	if status >= 400 {
		m.errors.WithLabelValues(strconv.Itoa(status)).Inc()
	}
}

// handler serves the registry as Prometheus text.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
