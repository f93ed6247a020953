package lease

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of a grant, the label of fenec_router_lease_grants_total.
const (
	GrantTook       = "took"           // the node took it, list and lease
	GrantNotTaken   = "not_taken"      // answered, not newer than the grant its lease came from
	GrantLate       = "late"           // answered after the router stopped waiting: counted as unanswered
	GrantUnanswered = "unanswered"     // no answer within a third of the lease (cut off, slow, or gone)
	GrantNeedsList  = "needs_list"     // refused: the node lacks the list (it is sent at once)
	GrantNoLease    = "takes_no_lease" // refused: the node runs without --lease
	GrantLowerTerm  = "lower_term"     // refused: the node took a higher term (this router is fenced)
)

// Metrics are a router's leasing series, kept across the Leasers it runs
// (one per term it leads at): every grant by outcome, and each leased
// node's lease as the current Leaser counts it. Register it once; give it
// to every LeaserConfig.
type Metrics struct {
	grants *prometheus.CounterVec

	mu  sync.Mutex // guards cur
	cur *Leaser    // the Leaser running now, nil between terms
}

var (
	leftDesc = prometheus.NewDesc("fenec_router_lease_left_seconds",
		"What is left of each leased node's lease by the leading router's count (the lease it counts the node by, less the time since its last answer); the node is failed over a tenth of a lease after 0.",
		[]string{"node"}, nil)
	leaseDesc = prometheus.NewDesc("fenec_router_lease_seconds",
		"The lease the leading router counts each leased node by (its own, or the directory's longer record until the node runs one of its grants).",
		[]string{"node"}, nil)
)

// NewMetrics returns the series, every grant outcome at zero.
func NewMetrics() *Metrics {
	m := &Metrics{grants: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fenec_router_lease_grants_total",
		Help: "Grants this router sent while leading, by what came of them: took, not_taken, late, unanswered, or refused (needs_list, takes_no_lease, lower_term).",
	}, []string{"outcome"})}
	for _, o := range []string{GrantTook, GrantNotTaken, GrantLate, GrantUnanswered, GrantNeedsList, GrantNoLease, GrantLowerTerm} {
		m.grants.WithLabelValues(o)
	}
	return m
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.grants.Describe(ch)
	ch <- leftDesc
	ch <- leaseDesc
}

// Collect implements prometheus.Collector: the counters, and the current
// Leaser's nodes as they are now.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.grants.Collect(ch)
	m.mu.Lock()
	l := m.cur
	m.mu.Unlock()
	if l == nil {
		return
	}
	for _, st := range l.Nodes() {
		if !st.TakesLease {
			continue
		}
		left := max(st.LeaseMS-st.LastAnswerMS, 0)
		ch <- prometheus.MustNewConstMetric(leftDesc, prometheus.GaugeValue, float64(left)/1000, st.Node)
		ch <- prometheus.MustNewConstMetric(leaseDesc, prometheus.GaugeValue, float64(st.LeaseMS)/1000, st.Node)
	}
}

// attach makes l the Leaser whose nodes are reported; detach stops
// reporting it (if it still is the one).
func (m *Metrics) attach(l *Leaser) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.cur = l
	m.mu.Unlock()
}

func (m *Metrics) detach(l *Leaser) {
	if m == nil {
		return
	}
	m.mu.Lock()
	if m.cur == l {
		m.cur = nil
	}
	m.mu.Unlock()
}

// grant counts one grant's outcome: the answer a (when err is nil and it
// came back in time), or the error.
func (m *Metrics) grant(inTime bool, a Answer, err error) {
	if m == nil {
		return
	}
	m.grants.WithLabelValues(grantOutcome(inTime, a, err)).Inc()
}

func grantOutcome(inTime bool, a Answer, err error) string {
	switch {
	case err == nil && !inTime:
		return GrantLate
	case err == nil && a.Took:
		return GrantTook
	case err == nil:
		return GrantNotTaken
	case errors.Is(err, ErrNeedsList):
		return GrantNeedsList
	case errors.Is(err, ErrTakesNoLease):
		return GrantNoLease
	case errors.Is(err, ErrLowerTerm):
		return GrantLowerTerm
	}
	return GrantUnanswered
}
