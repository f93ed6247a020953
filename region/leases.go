package region

import (
	"net/http"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/lease"
	"github.com/fenec-go/fenec/region/leasing"
)

// The router's side of --auto-failover: the leasing (package
// region/leasing) wired over the router's lead, view, transport and
// failover, and GET /_shard/leases.

// wireLeasing builds the router's leasing over its lead, view, transport
// and failover: the forwarder's LeaseRetry on every router, and with
// --auto-failover the series and the goroutine that leases the nodes while
// this router leads.
func (rt *Router) wireLeasing() error {
	tr := leasing.NewHTTPTransport(func(name string) (global.Node, bool) {
		v := rt.watcher.View()
		if v == nil {
			return global.Node{}, false
		}
		return v.Node(name)
	}, rt.cfg.Forward.Resolver, rt.trust.Secure)
	rt.leaseTr = tr
	rt.clock = lease.NewMonoClock()
	rt.leasing = leasing.New(leasing.Deps{
		ID:        rt.id,
		Own:       rt.cfg.AutoFailover,
		Dir:       rt.sides.dirName(),
		Region:    rt.sides.leasedRegion(),
		Elsewhere: rt.leasedElsewhere,
		View:      rt.watcher.View,
		Lead:      rt.lead,
		Transport: tr,
		Probe:     tr.Probe,
		Failover:  rt.FailoverNode,
		Settle:    rt.settleTo,
		OwnNode:   rt.sides.ownNode,
		Clock:     rt.clock,
		Now:       rt.now,
		Log:       rt.log,
	})
	rt.fwd.SetLeaseRetry(rt.leasing)
	if rt.cfg.AutoFailover <= 0 {
		return nil
	}
	if err := rt.leasing.Register(rt.reg); err != nil {
		return err
	}
	rt.leaseUnwatch = rt.watcher.OnTenantChange(func(c global.TenantChange) {
		if !c.Far { // a far tenant's primary is leased by its own region's side
			rt.leasing.Poke()
		}
	})
	rt.leasing.Start(rt.ctx)
	return nil
}

// serveLeases answers GET /_shard/leases (the token was checked) with what
// l says of its leases.
func serveLeases(w http.ResponseWriter, r *http.Request, l *leasing.Leasing) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		cpError(w, ErrMethod)
		return
	}
	cpJSON(w, http.StatusOK, l.Leases())
}
