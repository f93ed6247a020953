package region

import (
	"context"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/region/repair"
)

// Tenants' voting copies and the repair loop are package region/repair's,
// wired here over the router's directory, node client, lead, operations'
// lock, ownership, identity check, quotas, moves' sources, read copies,
// view, audit log and clock. The failover tells it the nodes it failed
// tenants off (Repairer.FailedOff); a placement and a move hand it their
// tenant (AfterPlace, AfterMove); a copy that could not be made now is
// owed to it (Later). PUT /_shard/nodes/<n>'s "standby" and POST
// /_shard/replicas are answered over it (replica.go).

// wireRepair builds the router's repair; Start runs its loop.
func (rt *Router) wireRepair() {
	rt.repair = repair.New(repair.Deps{
		ID:            rt.id,
		Store:         rt.store,
		Nodes:         rt.nodes,
		Lead:          rt.lead,
		OpMu:          &rt.opMu,
		Replicas:      rt.cfg.Replicas,
		OwnTenant:     rt.sides.ownTenant,
		Identified:    rt.identified,
		Apart:         rt.apart,
		Fittest:       fittest(rt),
		CarryQuota:    rt.carryQuota,
		SourceWait:    rt.sources.wait,
		SourcePending: rt.sources.pending,
		// rt.copies is built after the repair, over its replicas.
		RegionCandidates: func(ctx context.Context, s *global.Store, t global.Tenant, primary global.Node, nodes map[string]global.Versioned[global.Node]) map[string]int {
			return rt.copies.RegionCandidates(ctx, s, t, primary, nodes)
		},
		Point: func(ctx context.Context, tenants map[string]global.Versioned[global.Tenant], nodes map[string]global.Versioned[global.Node]) {
			rt.copies.Point(ctx, tenants, nodes)
		},
		Settle:      rt.settleTo,
		UnknownNode: func(err error) error { return errNotFoundAs(err, ErrUnknownNode) },
		Held:        func(tenant, by string) error { return &heldError{tenant: tenant, by: by} },
		Audit:       rt.audit,
		Now:         rt.now,
		Log:         rt.log,
	})
}

// fittest is the node of cands with the fewest bytes on disk, as rt's
// node client measures them.
func fittest(rt *Router) func(ctx context.Context, cands map[string]global.Node) (string, error) {
	return func(ctx context.Context, cands map[string]global.Node) (string, error) {
		return leastBytes(measureEach(ctx, rt.nodes, cands, rt.cfg.SizesParallel))
	}
}
