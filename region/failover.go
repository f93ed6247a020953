package region

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/fenec-go/fenec/global"
)

// holdFailover is the HeldBy of a tenant whose copy is being promoted.
const holdFailover = "failover"

// heldWaitLimit bounds how long a failover waits, in the background, for
// the operation holding a tenant to end.
const heldWaitLimit = 10 * time.Minute

// FailoverResult is what a failover of one node did: the tenants promoted
// on their copies and those that were not, with why.
type FailoverResult struct {
	Node     string            `json:"node"`
	Promoted []string          `json:"promoted"`
	Failed   []FailoverFailure `json:"failed"`
}

// FailoverFailure is a tenant a failover left on its node.
type FailoverFailure struct {
	Tenant string `json:"tenant"`
	Why    string `json:"why"`
}

// FailoverNode promotes, one at a time, every tenant of node on its copy
// (sending the node the tenant's lineage and the history its primary
// forked at its last failover) and points the directory at the copy. A
// tenant held by another operation is failed over when that operation
// ends, onto the copy it had then. Calling it again finishes what a call
// left. force promotes copies the nodes would refuse.
func (rt *Router) FailoverNode(ctx context.Context, node string, force bool) FailoverResult {
	res := FailoverResult{Node: node, Promoted: []string{}, Failed: []FailoverFailure{}}
	s, err := rt.lead.changes(ctx)
	if err == nil {
		s, err = rt.ownNode(ctx, s, node) // only the side leasing the node's region fails it over
	}
	if err != nil {
		res.Failed = append(res.Failed, FailoverFailure{Why: err.Error()})
		return res
	}
	tenants, _, err := s.ListTenants(ctx)
	if err != nil {
		res.Failed = append(res.Failed, FailoverFailure{Why: err.Error()})
		return res
	}
	names := make([]string, 0)
	for t, rec := range tenants {
		if rec.Value.Node == node {
			names = append(names, t)
		}
	}
	slices.Sort(names)
	for _, t := range names {
		at := tenants[t]
		if by := at.Value.HeldBy; by != "" && by != holdFailover {
			res.Failed = append(res.Failed, FailoverFailure{Tenant: t,
				Why: fmt.Sprintf("held by %s: failed over onto %q when it ends", by, at.Value.Replica)})
			rt.failoverWhenReleased(s, t, node, at.Value.Replica, force)
			continue
		}
		if err := rt.failoverTenant(ctx, s, t, at, force); err != nil {
			res.Failed = append(res.Failed, FailoverFailure{Tenant: t, Why: err.Error()})
			continue
		}
		res.Promoted = append(res.Promoted, t)
	}
	outcome := "done"
	if len(res.Failed) > 0 {
		outcome = "partial"
	}
	rt.log.Warn("node failed over", "node", node, "promoted", len(res.Promoted), "failed", len(res.Failed), "outcome", outcome)
	return res
}

// failoverTenant holds the tenant, promotes its copy, and records the copy
// as its primary with Store.Failover. A tenant already held by a failover
// (one cut short) is taken as it is.
func (rt *Router) failoverTenant(ctx context.Context, s *global.Store, name string, at global.Versioned[global.Tenant], force bool) error {
	rec := at.Value
	if rec.Replica == "" {
		return fmt.Errorf("%s: %w to promote", name, ErrNoReplica)
	}
	if rec.ReplicaBehind > 0 && !force {
		return fmt.Errorf("%s: %w: its copy on %s fell behind and %s answered writes without it from seq %d on; "+
			"bring %s back (its file holds them), or fail over with {\"force\": true} to promote the copy without them",
			name, ErrReplicaBehind, rec.Replica, rec.Node, rec.ReplicaBehind, rec.Node)
	}
	held := at
	if rec.HeldBy != holdFailover {
		var err error
		if held, err = s.Hold(ctx, name, at, holdFailover); err != nil {
			return fmt.Errorf("hold %s: %w", name, err)
		}
	}
	release := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rt.cfg.NodeTimeout)
		defer cancel()
		rel, err := s.Release(rctx, name, held, holdFailover)
		if err != nil {
			rt.log.Error("release a tenant after a failed promotion", "tenant", name, "err", err)
			return
		}
		rt.settleTo(rctx, rel.Rev) // this router's answers show the release

	}
	copyNode, err := s.GetNode(ctx, rec.Replica)
	if err != nil {
		release()
		return fmt.Errorf("copy of %s: %w", name, errNotFoundAs(err, ErrUnknownNode))
	}
	ans, err := rt.nodes.promote(ctx, copyNode.Value, name, rec, force, rt.promoteFence(copyNode.Value.Region))
	if err != nil {
		release()
		return fmt.Errorf("promote %s on %s: %w", name, rec.Replica, err)
	}
	rt.carryQuota(ctx, s, copyNode.Value, rec.Replica, name)
	// Release and point at the copy with nothing of this router's in
	// between; the Failover is conditioned on the release's revision.
	rt.opMu.Lock()
	defer rt.opMu.Unlock()
	free, err := s.Release(ctx, name, held, holdFailover)
	if err != nil {
		return fmt.Errorf("release %s after its promotion on %s (a second failover finishes it): %w", name, rec.Replica, err)
	}
	done, err := s.Failover(ctx, name, free, rec.Replica, ans.History)
	if err != nil {
		return fmt.Errorf("point %s at %s (promoted there; a second failover finishes it): %w", name, rec.Replica, err)
	}
	rt.settleTo(ctx, done.Rev)
	rt.repair.failedOff(rec.Node)
	rt.log.Warn("tenant failed over", "tenant", name, "from", rec.Node, "to", rec.Replica,
		"history", ans.History, "seq", ans.Seq, "already_primary", !ans.Promoted, "forced", force)
	return nil
}

// failoverWhenReleased waits, on a goroutine the router owns, until the
// operation holding tenant name ends, then fails it over onto replica,
// the copy it had when its node was failed over, if it is still on node.
func (rt *Router) failoverWhenReleased(s *global.Store, name, node, replica string, force bool) {
	if replica == "" {
		return
	}
	rt.wg.Go(func() {
		ctx, cancel := context.WithTimeout(rt.ctx, heldWaitLimit)
		defer cancel()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			at, err := s.GetTenant(ctx, name)
			if err != nil {
				if isNotFound(err) {
					return
				}
				continue
			}
			if at.Value.HeldBy != "" && at.Value.HeldBy != holdFailover {
				continue
			}
			if at.Value.Node != node || at.Value.Replica != replica {
				rt.log.Info("held tenant not failed over: it changed meanwhile", "tenant", name,
					"node", at.Value.Node, "replica", at.Value.Replica)
				return
			}
			err = rt.failoverTenant(ctx, s, name, at, force)
			if err == nil {
				return
			}
			if errors.Is(err, global.ErrConflict) || errors.Is(err, global.ErrHeld) {
				continue
			}
			rt.log.Error("held tenant's failover failed", "tenant", name, "node", node, "err", err)
			return
		}
	})
}

// postFailover serves POST /_shard/nodes/<n>/failover.
func (c *shardCall) postFailover(s *global.Store, node string) (int, any, error) {
	if err := global.CheckName("node", node); err != nil {
		return 0, nil, err
	}
	var req struct {
		Force bool `json:"force"`
	}
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	if _, err := s.GetNode(c.r.Context(), node); err != nil {
		return 0, nil, errNotFoundAs(err, ErrUnknownNode)
	}
	res := c.rt.FailoverNode(c.r.Context(), node, req.Force)
	c.rt.metrics.failovers.WithLabelValues(failoverOutcome(res)).Inc()
	code := http.StatusOK
	if len(res.Failed) > 0 {
		code = http.StatusBadGateway
	}
	return code, res, nil
}
