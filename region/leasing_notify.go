package region

import (
	"context"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenec-go/fenec/lease"
)

// answerNotifier tells waiters of the next grant answer from a node.
type answerNotifier struct {
	mu   sync.Mutex
	wait map[string]chan struct{} // guarded by mu: closed at the node's next answer
}

func newAnswerNotifier() *answerNotifier {
	return &answerNotifier{wait: map[string]chan struct{}{}}
}

// next returns a channel closed when node's next answer comes back.
func (a *answerNotifier) next(node string) <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch, ok := a.wait[node]
	if !ok {
		ch = make(chan struct{})
		a.wait[node] = ch
	}
	return ch
}

// answered wakes node's waiters.
func (a *answerNotifier) answered(node string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ch, ok := a.wait[node]; ok {
		close(ch)
		delete(a.wait, node)
	}
}

// notifyingTransport tells an answerNotifier of every answer.
type notifyingTransport struct {
	tr lease.Transport
	n  *answerNotifier
}

func (t *notifyingTransport) Send(ctx context.Context, node string, g lease.Grant) (lease.Answer, error) {
	a, err := t.tr.Send(ctx, node, g)
	if err == nil {
		t.n.answered(node)
	}
	return a, err
}

var leaseAgeDesc = prometheus.NewDesc("fenec_router_lease_age_seconds",
	"Time since each leased node's last grant answer came back (of the first round before one did).", []string{"node"}, nil)

// leaseAgeCollector reads the leases as they are scraped.
type leaseAgeCollector struct{ l *leasing }

func (c *leaseAgeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- leaseAgeDesc }

func (c *leaseAgeCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.l.nodes() {
		ch <- prometheus.MustNewConstMetric(leaseAgeDesc, prometheus.GaugeValue, float64(st.LastAnswerMS)/1000, st.Node)
	}
}

// serveLeases answers GET /_shard/leases (the token was checked). A
// router that grants no lease answers the term of the directory's lead as
// it sees it, not a leasing term of 0.
func (l *leasing) serveLeases(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		cpError(w, ErrMethod)
		return
	}
	ans := l.status()
	if v := l.deps.view(); !ans.Leasing && v != nil {
		ans.Term = v.Leader.Term
	}
	cpJSON(w, http.StatusOK, ans)
}
