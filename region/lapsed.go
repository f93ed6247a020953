package region

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/region/forward"
)

// A node lost (DESIGN.md §10, docs/regions.md "A region lost whole"):
// once the leasing fails a node over because its lease certainly lapsed,
// the directory records it lapsed (global.Node.Lapsed), and every router
// answers the tenants that failover left on it — those that survive their
// zone only and had no copy outside it, or whose failover did not
// complete — 503 at once, naming the tenant, the node, its region and
// since when, rather than sending them to a node gone to wait out the
// dial or the upstream timeout. Their read copies go on answering reads
// that state a bound. The mark is cleared once the node answers its
// grants again (or is recorded again: it answered its admin token).

// failoverLapsed is the leasing's failover of a node whose lease lapsed:
// FailoverNode, then the node recorded lapsed. The record is written
// whether or not the node was marked already, so that a clear racing it
// (clearAnswered, conditioned on the record it read) loses.
func (rt *Router) failoverLapsed(ctx context.Context, node string, force bool) FailoverResult {
	res := rt.FailoverNode(ctx, node, force)
	rt.markLapsed(ctx, node)
	return res
}

// markLapsed records node lapsed now, unless it was already (its first
// lapse is kept).
func (rt *Router) markLapsed(ctx context.Context, node string) {
	s, err := rt.lead.changes(ctx)
	if err == nil {
		s, err = rt.ownNode(ctx, s, node)
	}
	var rev int64
	if err == nil {
		rev, err = updateNode(ctx, s, node, func(n *global.Node) bool {
			if n.Lapsed.IsZero() {
				n.Lapsed = rt.now()
			}
			return true
		})
	}
	if err != nil {
		rt.log.Warn("node not recorded lapsed: its tenants left on it are sent to it, and fail as it does", "node", node, "err", err)
		return
	}
	rt.settleTo(ctx, rev)
	rt.log.Warn("node recorded lapsed: the tenants left on it are answered 503 until it answers its grants again", "node", node)
}

// startLapses runs, on a router that leases nodes (--auto-failover), the
// loop that clears the lapse of nodes answering their grants again.
func (rt *Router) startLapses() {
	if rt.cfg.AutoFailover <= 0 {
		return
	}
	rt.wg.Go(func() {
		t := time.NewTicker(rt.leasing.Tick())
		defer t.Stop()
		for {
			select {
			case <-rt.ctx.Done():
				return
			case <-t.C:
				rt.clearAnswered(rt.ctx)
			}
		}
	})
}

// clearAnswered clears the lapse of every node recorded lapsed that has
// answered this router's grants and not lapsed since: while this router
// leases, the Leaser knows (an answer came back, and no failover was
// called after it). A router that does not lease clears nothing; a new
// leader clears a node once it answers.
func (rt *Router) clearAnswered(ctx context.Context) {
	v := rt.watcher.View()
	if v == nil {
		return
	}
	var marked []string
	for name, n := range v.Nodes() {
		if !n.Lapsed.IsZero() {
			marked = append(marked, name)
		}
	}
	if len(marked) == 0 {
		return
	}
	for _, node := range marked {
		if rt.answeredSinceLapse(node) {
			rt.clearLapsed(ctx, node)
		}
	}
}

// answeredSinceLapse says whether node has answered this router's grants
// and has not lapsed since.
func (rt *Router) answeredSinceLapse(node string) bool {
	for _, st := range rt.leasing.Nodes() {
		if st.Node == node {
			return st.Answered && !st.FailedOver
		}
	}
	return false
}

// clearLapsed clears node's lapse, asking the Leaser again as the record
// is read (a lapse marked meanwhile makes the write lose its race).
func (rt *Router) clearLapsed(ctx context.Context, node string) {
	cctx, cancel := context.WithTimeout(ctx, rt.cfg.NodeTimeout)
	defer cancel()
	s, err := rt.lead.changes(cctx)
	if err == nil {
		s, err = rt.ownNode(cctx, s, node)
	}
	var rev int64
	if err == nil {
		rev, err = updateNode(cctx, s, node, func(n *global.Node) bool {
			if n.Lapsed.IsZero() || !rt.answeredSinceLapse(node) {
				return false
			}
			n.Lapsed = time.Time{}
			return true
		})
	}
	if err != nil {
		rt.log.Warn("node's lapse not cleared: tried again", "node", node, "err", err)
		return
	}
	if rev > 0 {
		rt.settleTo(cctx, rev)
		rt.log.Info("node answers its grants again: its lapse cleared, its tenants served", "node", node)
	}
}

// unavailable is tenant name's unavailability, as the view v shows it:
// nil unless its node n is recorded lapsed and no failover holds the
// tenant (one under way is waited for, as any other).
func unavailable(v *global.View, name string, t global.Tenant, n global.Node) *forward.Unavailable {
	if n.Lapsed.IsZero() || t.HeldBy == global.HoldFailover {
		return nil
	}
	u := &forward.Unavailable{Reason: forward.UnavailableZone, Tenant: name, Node: t.Node, Region: n.Region, Since: n.Lapsed}
	var b strings.Builder
	fmt.Fprintf(&b, "tenant %s is unavailable: its node %s of region %s stopped answering and its lease lapsed at %s",
		name, t.Node, n.Region, n.Lapsed.UTC().Format(time.RFC3339))
	if regionLapsed(v, n.Region) {
		fmt.Fprintf(&b, " (every node of region %s has lapsed: the region is lost)", n.Region)
	}
	if t.Survive == global.SurviveRegion {
		u.Reason = forward.UnavailableNotFailedOver
		fmt.Fprintf(&b, ", and its failover to its copy on %s did not complete (the leading router's log says why): fail it over with POST /_shard/nodes/%s/failover ({\"force\": true} promotes a copy that fell behind), or wait for %s to come back",
			t.Replica, t.Node, t.Node)
	} else {
		fmt.Fprintf(&b, "; it survives its zone only (\"survive\": \"zone\"), so no copy outside %s can take its writes", n.Region)
		if t.Replica != "" {
			fmt.Fprintf(&b, " (its copy on %s could not be promoted: POST /_shard/nodes/%s/failover tries again)", t.Replica, t.Node)
		}
		fmt.Fprintf(&b, ": it comes back when %s does; retry after Retry-After", t.Node)
	}
	if copies := t.ReadCopies.Names(); len(copies) > 0 {
		fmt.Fprintf(&b, ". Reads that state Fenec-Max-Staleness or Fenec-After are answered meanwhile by its read copies (on %s), through a router near them (fenec-shard --near), as far as their bounds allow",
			strings.Join(copies, ", "))
	} else {
		b.WriteString(". It has no read copy to answer reads meanwhile")
	}
	if t.Survive != global.SurviveRegion {
		fmt.Fprintf(&b, ". A tenant that must outlive its region is set to survive it: PUT /_shard/tenants/%s/survive {\"survive\": \"region\"}", name)
	}
	u.Msg = b.String()
	return u
}

// regionLapsed says whether every node of region r is recorded lapsed.
func regionLapsed(v *global.View, r string) bool {
	seen := 0
	for _, n := range v.Nodes() {
		if n.Region != r {
			continue
		}
		if n.Lapsed.IsZero() {
			return false
		}
		seen++
	}
	return seen > 0
}
