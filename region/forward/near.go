package forward

import (
	"bufio"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenec-go/fenec/wire"
)

// Reads near the reader (docs/regions.md): a read that states what it
// can take — a bound on staleness (Fenec-Max-Staleness) or a seq of its
// own write (Fenec-After) — goes first to the tenant's read copy on a
// node of the router's region, if the directory names one, with
// Fenec-Copy-Wait beside the router's proof. The copy answers it only if
// it can prove what was asked (package node); else it declines unrun
// (421, wire.StatusDeclined) and the read goes to the primary as any
// other. A copy that fails, does not answer within the wait and the dial
// bound, or answers 5xx is passed over the same way: a bounded read is
// never refused for want of a copy, and costs at most Config.CopyWait
// more than one sent to the primary straight away.

// CopyPlacements is Placements that also name a tenant's read copy near
// this router; a forwarder over one sends bounded reads there first.
type CopyPlacements interface {
	Placements
	// NearCopy names the node holding tenant's read copy in the router's
	// region, if any.
	NearCopy(tenant string) (Target, bool)
}

// Outcomes of a read sent to a read copy near the router.
const (
	CopyServed   = "served"   // the copy answered it
	CopyDeclined = "declined" // the copy could not prove what it asked: sent to the primary
	CopyFailed   = "failed"   // the copy failed, was slow to answer, or answered 5xx: sent to the primary
)

// nearMetrics counts reads sent to read copies.
type nearMetrics struct {
	byOutcome map[string]prometheus.Counter
}

func newNearMetrics(reg prometheus.Registerer) (*nearMetrics, error) {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fenec_router_copy_reads_total",
		Help: "Reads stating a staleness bound or a seq sent to a read copy near the router, by outcome (served, declined, failed: the last two then went to the primary).",
	}, []string{"outcome"})
	if reg != nil {
		if err := reg.Register(v); err != nil {
			return nil, err
		}
	}
	m := &nearMetrics{byOutcome: map[string]prometheus.Counter{}}
	for _, o := range []string{CopyServed, CopyDeclined, CopyFailed} {
		m.byOutcome[o] = v.WithLabelValues(o)
	}
	return m, nil
}

// nearCopy names the read copy a request goes to first: one asking a
// bound (Fenec-Max-Staleness or Fenec-After), on a router with copies
// near it.
func (f *Forwarder) nearCopy(x *exchange) (Target, bool) {
	if f.copies == nil || f.cfg.CopyWait <= 0 {
		return Target{}, false
	}
	h := x.r.Header
	if len(h[wire.HeaderMaxStaleness]) == 0 && len(h[wire.HeaderAfter]) == 0 {
		return Target{}, false
	}
	x.bounded = true
	return f.copies.NearCopy(x.tenant)
}

// forwardNear sends x to its tenant's read copy near the router when it
// may (nearCopy), and to the primary tgt otherwise or after the copy
// passed it on.
func (f *Forwarder) forwardNear(w http.ResponseWriter, x *exchange, tgt Target) int {
	x.bounded, x.toCopy = false, false
	if c, ok := f.nearCopy(x); ok && c.Refused == nil {
		full := x.deadline
		now := f.now()
		x.toCopy, x.fullDeadline, x.copyUntil = true, full, now.Add(f.cfg.CopyWait)
		x.deadline = minTime(full, x.copyUntil.Add(f.cfg.DialTimeout))
		res, code, _ := f.attempt(w, x, c, false, false)
		x.toCopy, x.deadline = false, full
		switch res {
		case resDone:
			f.near.byOutcome[CopyServed].Inc()
			return code
		case resGone:
			return statusClient
		case resDeclined:
			f.near.byOutcome[CopyDeclined].Inc()
		default:
			f.near.byOutcome[CopyFailed].Inc()
			f.log.Debug("read copy passed over", "request_id", x.id(), "tenant", x.tenant, "node", c.Node, "result", int(res))
		}
		if f.now().After(x.deadline) {
			return f.failed(w, x, tgt.Node, ErrUpstreamTimeout)
		}
	}
	if tgt.Unavailable != nil {
		return f.unavailable(w, x, tgt.Unavailable)
	}
	return f.forward(w, x, tgt)
}

// declinedByCopy says whether an answer read from a read copy is one the
// read goes on to the primary after: the copy's decline, or a failure of
// its own.
func declinedByCopy(h *head) bool {
	return h.status == wire.StatusDeclined || h.status >= 500
}

// servedBy writes, on the answer to a read that stated a bound, where it
// came from: the primary, or a read copy (Fenec-Node names which).
func (x *exchange) servedBy(dst http.Header) {
	if !x.bounded {
		return
	}
	v := wire.ServedByPrimary
	if x.toCopy {
		v = wire.ServedByCopy
	}
	dst[wire.HeaderServedBy] = []string{v}
}

// copyWaitHeader writes Fenec-Copy-Wait: what is left of the copy's wait.
func (x *exchange) copyWaitHeader(bw *bufio.Writer, left time.Duration) {
	bw.WriteString(wire.HeaderCopyWait + ": ")
	bw.Write(strconv.AppendInt(x.scratch[:0], max(left.Milliseconds(), 0), 10))
	bw.WriteString("\r\n")
}
