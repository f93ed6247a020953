package forward

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A tenant whose node the directory records lost (its lease certainly
// lapsed and its router failed it over, docs/regions.md "A region lost
// whole") and that no failover moved off it is answered 503 at once,
// naming the tenant, the node, its region and since when, with what to
// do: never sent to a node gone, to wait out the dial or the upstream
// timeout. A read that states a bound still goes to the tenant's read
// copy near the router first (near.go), which answers it as its bound
// allows.

// ErrUnavailable: the tenant's node is recorded lost and the tenant is
// still on it (an *Unavailable says which and what to do).
var ErrUnavailable = errors.New("tenant unavailable: its node is recorded lost")

// Reasons a tenant is answered unavailable, the label of
// fenec_router_unavailable_total.
const (
	// UnavailableZone: the tenant survives its zone only and its node's
	// region is where all its voting copies were.
	UnavailableZone = "zone"
	// UnavailableNotFailedOver: the tenant had a copy to fail over to,
	// and the failover of its node left it there all the same.
	UnavailableNotFailedOver = "not_failed_over"
)

// UnavailableRetry is the Retry-After of an unavailable tenant's answer:
// it comes back with its node, which is seconds at the least.
const UnavailableRetry = 5 * time.Second

// Unavailable is why a tenant cannot be served now: its node is recorded
// lost. The control plane makes it (it knows the tenant's survival and
// copies); the forwarder answers it.
type Unavailable struct {
	Reason string    // UnavailableZone or UnavailableNotFailedOver
	Tenant string    // the tenant
	Node   string    // its node, recorded lost
	Region string    // the node's region
	Since  time.Time // when the node was recorded lost
	// Msg is the whole refusal: what happened, and what to do.
	Msg string
}

func (u *Unavailable) Error() string { return u.Msg }

func (u *Unavailable) Unwrap() error { return ErrUnavailable }

// unavailableBody is the JSON an unavailable tenant is answered with.
type unavailableBody struct {
	Error    string    `json:"error"`
	Tenant   string    `json:"tenant"`
	Node     string    `json:"node"`
	Region   string    `json:"region"`
	LapsedAt time.Time `json:"lapsed_at"`
}

var retryUnavailable = []string{strconv.Itoa(int(UnavailableRetry / time.Second))}

// unavailable answers u for x's request: 503 with Retry-After, at once.
func (f *Forwarder) unavailable(w http.ResponseWriter, x *exchange, u *Unavailable) int {
	if c := f.lost[u.Reason]; c != nil {
		c.Inc()
	}
	body, _ := json.Marshal(unavailableBody{Error: u.Msg, Tenant: u.Tenant, Node: u.Node, Region: u.Region, LapsedAt: u.Since})
	body = append(body, '\n')
	h := w.Header()
	h["Content-Type"] = jsonType
	h["Content-Length"] = lengthValue(len(body))
	h["Retry-After"] = retryUnavailable
	answerID(w, x.id())
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(body)
	f.log.Debug("tenant unavailable: its node is recorded lost", "request_id", x.id(), "tenant", u.Tenant,
		"node", u.Node, "region", u.Region, "reason", u.Reason)
	return http.StatusServiceUnavailable
}

// lostNow is the tenant's unavailability as the placements say now, if
// it is still on node and the request may be answered so: nothing of it
// was sent whole, or sending it again is harmless.
func (f *Forwarder) lostNow(x *exchange, node string) *Unavailable {
	if x.sentWhole && !x.replayable {
		return nil // may have run: its own answer says so
	}
	if now, ok := f.place.Lookup(x.tenant); ok && now.Node == node {
		return now.Unavailable
	}
	return nil
}

// newUnavailableMetrics registers fenec_router_unavailable_total.
func newUnavailableMetrics(reg prometheus.Registerer) (map[string]prometheus.Counter, error) {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fenec_router_unavailable_total",
		Help: "Requests answered 503 at once because their tenant's node is recorded lost (its lease lapsed and it was failed over) and the tenant is still on it, by reason: zone (it survives its zone only) or not_failed_over (its failover left it there).",
	}, []string{"reason"})
	if reg != nil {
		if err := reg.Register(v); err != nil {
			return nil, err
		}
	}
	m := map[string]prometheus.Counter{}
	for _, r := range []string{UnavailableZone, UnavailableNotFailedOver} {
		m[r] = v.WithLabelValues(r)
	}
	return m, nil
}
