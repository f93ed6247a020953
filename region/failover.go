package region

import (
	"context"
	"fmt"
	"net/http"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/region/failover"
)

// A node's failover — by hand (POST /_shard/nodes/<n>/failover) or on a
// lapsed lease (the leasing, through FailoverNode) — is package
// region/failover's, wired here over the router's lead, ownership, node
// client, opMu, view, quotas, repair loop and leasing.

// FailoverResult is what a failover of one node did: the tenants promoted
// on their copies and those that were not, with why. The leasing fails
// lapsed nodes over through FailoverNode, so the type is its.
type FailoverResult = failover.Result

// FailoverFailure is a tenant a failover left on its node.
type FailoverFailure = failover.Failure

// wireFailover builds the router's failover; Close closes it.
func (rt *Router) wireFailover() {
	rt.failover = failover.New(failover.Deps{
		Changes:    rt.lead.Changes,
		OwnNode:    rt.sides.ownNode,
		OwnRegion:  rt.sides.own,
		CopyLost:   rt.copyLost,
		Nodes:      rt.nodes,
		Fence:      rt.sides.promoteFence,
		OpMu:       &rt.opMu,
		View:       rt.watcher.View,
		Settle:     rt.settleTo,
		CarryQuota: rt.carryQuota,
		Repair:     failoverRepair{rt},
		HeldEnded: func(tenant string) {
			if rt.leasing != nil {
				rt.leasing.HeldEnded(tenant)
			}
		},
		NodeTimeout: rt.cfg.NodeTimeout,
		Log:         rt.log,
	})
}

// copyLost says whether node is known lost: the leasing fails it over
// now, or the directory records it lapsed. A failover promotes no copy
// there.
func (rt *Router) copyLost(node string) bool {
	if rt.leasing != nil && rt.leasing.FailingOver(node) {
		return true
	}
	if v := rt.watcher.View(); v != nil {
		if n, ok := v.Node(node); ok && !n.Lapsed.IsZero() {
			return true
		}
	}
	return false
}

// failoverRepair is the router's repair loop as a failover tells it.
type failoverRepair struct{ rt *Router }

func (r failoverRepair) FailedOff(node string) { r.rt.repair.FailedOff(node) }

// FailoverNode fails node's tenants over to their copies
// (failover.Failover.Node); force promotes copies the nodes would refuse.
func (rt *Router) FailoverNode(ctx context.Context, node string, force bool) FailoverResult {
	return rt.failover.Node(ctx, node, force)
}

// postFailover serves POST /_shard/nodes/<n>/failover.
func (c *shardCall) postFailover(s *global.Store, node string) (int, any, error) {
	if err := global.CheckName("node", node); err != nil {
		return 0, nil, err
	}
	var req struct {
		Force  bool `json:"force"`
		IfDown bool `json:"if_down"`
	}
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	rec, err := s.GetNode(c.r.Context(), node)
	if err != nil {
		return 0, nil, errNotFoundAs(err, ErrUnknownNode)
	}
	if req.IfDown {
		if id, ok := c.rt.failover.Answering(c.r.Context(), rec.Value); ok {
			return 0, nil, fmt.Errorf("%w: node %s answers its admin token (id %s): a failover moves its tenants' writes to their copies while it still serves them; send the failover without \"if_down\" to fail it over all the same",
				ErrNodeAnswers, node, id)
		}
	}
	res := c.rt.FailoverNode(c.r.Context(), node, req.Force)
	c.rt.metrics.failovers.WithLabelValues(res.Outcome()).Inc()
	code := http.StatusOK
	if len(res.Failed) > 0 {
		code = http.StatusBadGateway
	}
	return code, res, nil
}
