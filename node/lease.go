package node

import (
	"fmt"
	"net/http"
	"time"

	"github.com/fenec-go/fenec/lease"
)

// leaseRefusal is a write refused for want of a lease, with how long the
// client should wait (about a round of grants).
type leaseRefusal struct{ retry time.Duration }

func (e *leaseRefusal) Error() string             { return ErrNoLease.Error() }
func (e *leaseRefusal) Is(target error) bool      { return target == ErrNoLease }
func (e *leaseRefusal) RetryAfter() time.Duration { return e.retry }

// nodeLease is the node's side of leasing (nil lease: started without
// --lease).
type nodeLease struct {
	lease   *lease.NodeLease
	clock   lease.Clock
	handler *lease.Handler
	steps   *steps // copies in step (instep.go)
}

// newNodeLease loads the node's binding (the directory leasing it, the
// epoch, the highest term taken) from its data directory and starts
// holding no lease. Without cfg.Lease it only answers grants 409.
func newNodeLease(cfg Config) (*nodeLease, error) {
	clock := cfg.LeaseClock
	if clock == nil {
		clock = lease.BootClock{}
	}
	nl := &nodeLease{clock: clock, handler: &lease.Handler{Clock: clock}, steps: newSteps()}
	if !cfg.Lease {
		return nl, nil
	}
	tf := lease.NewTermFile(cfg.Dir)
	bound, err := tf.Load()
	if err != nil {
		return nil, fmt.Errorf("load lease term: %w", err)
	}
	nl.lease = lease.NewNodeLease(bound, tf.Store)
	nl.handler.Lease = nl.lease
	nl.handler.OnTaken = nl.steps.taken
	nl.handler.Report = func() (map[string]uint64, []string) { return nl.steps.report(nl.lease) }
	return nl, nil
}

// gate returns the lease's write check for one tenant; nil when the node
// takes no lease.
func (l *nodeLease) gate(tenant string) func() error {
	if l == nil || l.lease == nil {
		return nil
	}
	return func() error {
		if ok, retry := l.lease.Writable(l.clock.Now(), tenant); !ok {
			return &leaseRefusal{retry: retry}
		}
		return nil
	}
}

// left is what is left of the lease now (0 without --lease).
func (l *nodeLease) left() time.Duration {
	if l == nil || l.lease == nil {
		return 0
	}
	return time.Duration(l.lease.Status(l.clock.Now()).LeftMS) * time.Millisecond
}

// length is the length of the lease the node last took (0 without
// --lease, or before any grant).
func (l *nodeLease) length() time.Duration {
	if l == nil || l.lease == nil {
		return 0
	}
	return l.lease.Length()
}

// tenants is how many tenants the lease names (0 without --lease).
func (l *nodeLease) tenants() int {
	if l == nil || l.lease == nil {
		return 0
	}
	return len(l.lease.Status(l.clock.Now()).Tenants)
}

// serveLease answers POST and GET /_admin/lease (the admin token was
// checked).
func (c *call) serveLease() {
	c.route = "admin_lease"
	if !c.method(http.MethodGet, http.MethodHead, http.MethodPost) {
		return
	}
	h := *c.s.lease.handler
	var what, detail string // a grant that moved the binding, or was refused past the bound
	h.OnBinding = func(_ *http.Request, was, now lease.Binding, g lease.Grant, err error) {
		what, detail = "lease_bind", bindingChange(was, now, g)
		if err != nil {
			what, detail = "lease_refused", detail+": "+err.Error()
		}
	}
	h.ServeHTTP(c.w, c.r)
	switch what {
	case "lease_bind":
		c.log.Info("lease binding moved", "detail", detail)
	case "lease_refused":
		c.log.Warn("grant refused past the epoch bound", "detail", detail)
	}
	if what != "" {
		c.s.auditf(c, what, "", detail) // with the status answered
	}
}

// bindingChange describes, for the audit log, a grant that moves (or
// would move) a node's binding: from which directory, epoch and term to
// which, by which router, with which handoff.
func bindingChange(was, now lease.Binding, g lease.Grant) string {
	d := fmt.Sprintf("binding %s epoch %d term %d -> %s epoch %d term %d; grant of router %q: dir %q epoch %d term %d n %d",
		dirName(was.Dir), was.Epoch, was.Term, dirName(now.Dir), now.Epoch, now.Term, g.Router, g.Dir, g.Epoch, g.Term, g.N)
	if h := g.Handoff; h != nil {
		d += fmt.Sprintf(", handoff from %q term %d force %v", h.From, h.Term, h.Force)
	}
	return d
}

func dirName(d string) string {
	if d == "" {
		return "(none)"
	}
	return d
}

// fencedPromote says why a promotion a router asks at directory dir,
// epoch and term is refused ("": it is not): the node is leased by another
// directory, or by dir at a later epoch or term — the router no longer
// owns the node's region, and its request was held on the way. A node
// without --lease, or never leased, and a request naming no directory (an
// operator's by hand) are not fenced.
func (l *nodeLease) fencedPromote(dir string, epoch, term uint64) string {
	if l == nil || l.lease == nil || dir == "" {
		return ""
	}
	b := l.lease.Bound()
	switch {
	case b.Dir == "":
		return ""
	case b.Dir != dir:
		return fmt.Sprintf("this node is leased by %s (epoch %d), not by %s: the router asking does not lease its region", b.Dir, b.Epoch, dir)
	case epoch < b.Epoch || term < b.Term:
		return fmt.Sprintf("this node is leased by %s at epoch %d, term %d: the router asking, at epoch %d, term %d, was replaced", b.Dir, b.Epoch, b.Term, epoch, term)
	}
	return ""
}
