package forward

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// route is the small fixed set a request is counted under; never a tenant.
type route uint8

const (
	routeQuery route = iota
	routeBatch
	routeRest
	routeChanges
	routeOther
	numRoutes
)

var routeNames = [numRoutes]string{"query", "batch", "rest", "changes", "other"}

func (r route) String() string { return routeNames[r] }

// Outcomes of a request cut out from a failed-over node.
const (
	CutResent      = "resent"       // sent again to the tenant's new node
	CutFailed502   = "failed_502"   // a write that may have run: answered 502
	CutStreamEnded = "stream_ended" // a subscription ended for its client to reopen
	CutLeft        = "left"         // its answer had begun: left to the node
)

// Who cut an answer short once its head had gone to the client.
const (
	cutByNode   = "node"   // the node ended it: its bounds, its going, or a failure midway
	cutByClient = "client" // the client went or stopped reading (counted 499 too)
)

// statusClient is recorded for a request whose client went away before an
// answer; no answer is written for it.
const statusClient = 499

// codeStrings holds the label value of every status code, built once.
var codeStrings = func() []string {
	s := make([]string, 600)
	for i := range s {
		s[i] = strconv.Itoa(i)
	}
	return s
}()

// forwardMetrics are the forwarding path's series. Counters for
// (route, code) are looked up once and cached, so a request costs no
// label hashing.
type forwardMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	upstream *prometheus.CounterVec
	cuts     *prometheus.CounterVec
	bodies   *prometheus.CounterVec // bodies refused by the budget, by reason
	answers  *prometheus.CounterVec // answers cut short after their head, by who cut them

	durByRoute [numRoutes]prometheus.Observer
	byCode     [numRoutes][600]atomic.Pointer[counterBox]
}

type counterBox struct{ c prometheus.Counter }

func newForwardMetrics(reg prometheus.Registerer) (*forwardMetrics, error) {
	m := &forwardMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_router_requests_total",
			Help: "Requests forwarded below /t/, by route and status.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fenec_router_request_duration_seconds",
			Help:    "Time from a request's arrival to the end of its answer, by route.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"route"}),
		upstream: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_router_upstream_errors_total",
			Help: "Failures talking to a node: refused, unreachable, timed out, connection ended.",
		}, []string{"node"}),
		cuts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_router_cut_requests_total",
			Help: "Requests cut out from a failed-over node, by what became of them.",
		}, []string{"outcome"}),
		bodies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_router_refused_bodies_total",
			Help: "Requests refused as their bodies arrived, the router holding its share of bodies (total: 503, --max-body-memory) or the address its share (address: 429, --max-body-memory-per-addr).",
		}, []string{"reason"}),
		answers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_router_answers_cut_total",
			Help: "Answers that ended short after their head had gone to the client, by who cut them: node (its bound on a slow reader, its answer memory, its tenant or itself going, or a failure midway; the request counted under the status its answer began with) or client (it went or stopped reading; counted 499). Neither is an upstream error.",
		}, []string{"by"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.duration, m.upstream, m.cuts, m.bodies, m.answers} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	for r := range numRoutes {
		m.durByRoute[r] = m.duration.WithLabelValues(routeNames[r])
	}
	m.bodies.WithLabelValues("total")
	m.bodies.WithLabelValues("address")
	m.answers.WithLabelValues(cutByNode)
	m.answers.WithLabelValues(cutByClient)
	for _, o := range []string{CutResent, CutFailed502, CutStreamEnded, CutLeft} {
		m.cuts.WithLabelValues(o)
	}
	return m, nil
}

func (m *forwardMetrics) observe(r route, code int, seconds float64) {
	if code < 0 || code >= 600 {
		code = 0
	}
	p := &m.byCode[r][code]
	b := p.Load()
	if b == nil {
		b = &counterBox{c: m.requests.WithLabelValues(routeNames[r], codeStrings[code])}
		p.Store(b)
	}
	b.c.Inc()
	m.durByRoute[r].Observe(seconds)
}

func (m *forwardMetrics) upstreamError(node string) {
	m.upstream.WithLabelValues(node).Inc()
}

func (m *forwardMetrics) answerCut(by string) {
	m.answers.WithLabelValues(by).Inc()
}

func (m *forwardMetrics) cut(outcome string) {
	m.cuts.WithLabelValues(outcome).Inc()
}

func (m *forwardMetrics) bodyRefused(err error) {
	reason := "total"
	if err == ErrBodyMemoryAddr {
		reason = "address"
	}
	m.bodies.WithLabelValues(reason).Inc()
}
