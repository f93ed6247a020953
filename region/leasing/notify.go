package leasing

import (
	"context"
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
type leaseAgeCollector struct{ l *Leasing }

func (c *leaseAgeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- leaseAgeDesc }

func (c *leaseAgeCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.l.Nodes() {
		ch <- prometheus.MustNewConstMetric(leaseAgeDesc, prometheus.GaugeValue, float64(st.LastAnswerMS)/1000, st.Node)
	}
}
