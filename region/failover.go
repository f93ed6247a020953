package region

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/region/leasing"
	"github.com/fenec-go/fenec/region/nodeapi"
	"github.com/fenec-go/fenec/wire"
)

// FailoverResult is what a failover of one node did: the tenants promoted
// on their copies and those that were not, with why. The leasing fails
// lapsed nodes over through FailoverNode, so the type is its.
type FailoverResult = leasing.FailoverResult

// FailoverFailure is a tenant a failover left on its node.
type FailoverFailure = leasing.FailoverFailure

// failoverBatch bounds the tenants one directory transaction of a
// failover holds or points at their copies: each takes a condition and a
// write, the fence and the region's guard a condition each, within etcd's
// default --max-txn-ops of 128 (and far within its request size: a
// tenant's record is about 100 bytes).
const failoverBatch = 100

// failoverParallel bounds the promotions a failover has running at once
// (calls to nodes without POST /_admin/promote; calls of many, one per
// copy node, within a batch).
const failoverParallel = 16

// failoverBatches bounds the batches a failover has under way at once:
// one's promotions wait on the copies' disks while the next is held and
// sent, so a node of many tenants does not cost its batches one after
// another.
const failoverBatches = 4

// FailoverNode promotes every tenant of node on its copy (sending the node
// the tenant's lineage and the history its primary forked at its last
// failover) and points the directory at the copy: the tenants are held in
// one transaction per failoverBatch, promoted in one call per batch and
// copy node, and released onto their copies in one transaction per batch
// again, failoverBatches batches under way at once, so a node of many
// tenants costs a few directory writes and node calls, not three a tenant. A
// tenant held by another operation is failed over when that operation
// ends, onto the copy it had then. Calling it again finishes what a call
// left. force promotes copies the nodes would refuse.
func (rt *Router) FailoverNode(ctx context.Context, node string, force bool) FailoverResult {
	res := FailoverResult{Node: node, Promoted: []string{}, Failed: []FailoverFailure{}}
	s, err := rt.lead.Changes(ctx)
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
	var todo, broken []string
	for _, t := range names {
		at := tenants[t]
		if at.Value.HeldBy == holdRestore { // restore_hold.go: not waited for
			at = rt.breakRestore(ctx, s, t, node, at)
			tenants[t] = at
			broken = append(broken, t)
		}
		if by := at.Value.HeldBy; by != "" && by != global.HoldFailover {
			res.Failed = append(res.Failed, FailoverFailure{Tenant: t,
				Why: fmt.Sprintf("held by %s: failed over onto %q when it ends", by, at.Value.Replica)})
			rt.failoverWhenReleased(s, t, node, at.Value.Replica, force)
			continue
		}
		if err := promotable(t, at.Value, force); err != nil {
			res.Failed = append(res.Failed, FailoverFailure{Tenant: t, Why: err.Error()})
			continue
		}
		todo = append(todo, t)
	}
	var mu sync.Mutex // guards res while batches run
	var g errgroup.Group
	g.SetLimit(failoverBatches)
	for batch := range slices.Chunk(todo, failoverBatch) {
		g.Go(func() error {
			var part FailoverResult
			rt.failoverBatch(ctx, s, node, batch, tenants, force, &part)
			mu.Lock()
			defer mu.Unlock()
			res.Promoted = append(res.Promoted, part.Promoted...)
			res.Failed = append(res.Failed, part.Failed...)
			return nil
		})
	}
	_ = g.Wait()
	slices.Sort(res.Promoted)
	for _, t := range broken {
		if !slices.Contains(res.Promoted, t) {
			rt.heldEnded(t) // held as the lease lapsed, not waited for: its node's again
		}
	}
	outcome := "done"
	if len(res.Failed) > 0 {
		outcome = "partial"
	}
	rt.log.Warn("node failed over", "node", node, "promoted", len(res.Promoted), "failed", len(res.Failed), "outcome", outcome)
	return res
}

// promotable says why a tenant's copy cannot be promoted, if it cannot.
func promotable(name string, rec global.Tenant, force bool) error {
	if rec.Replica == "" {
		return fmt.Errorf("%s: %w to promote", name, ErrNoReplica)
	}
	if rec.ReplicaBehind > 0 && !force {
		return fmt.Errorf("%s: %w: its copy on %s fell behind and %s answered writes without it from seq %d on; "+
			"bring %s back (its file holds them), or fail over with {\"force\": true} to promote the copy without them",
			name, ErrReplicaBehind, rec.Replica, rec.Node, rec.ReplicaBehind, rec.Node)
	}
	return nil
}

// promoted is one tenant promoted on its copy, still held by the failover.
type promoted struct {
	name string
	held global.Versioned[global.Tenant]
	ans  wire.Promoted
}

// failoverBatch fails over up to failoverBatch tenants, read as tenants
// holds them: one transaction holds them all, their copies are promoted
// in one call per node holding them (those nodes in parallel), one
// transaction releases the promoted onto their copies.
// A lost race on either transaction falls back to one tenant at a time,
// which reads each again and reports each on its own.
func (rt *Router) failoverBatch(ctx context.Context, s *global.Store, node string, names []string, tenants map[string]global.Versioned[global.Tenant], force bool, res *FailoverResult) {
	tx := s.Txn()
	held := make([]global.Versioned[global.Tenant], len(names))
	for i, t := range names {
		at := tenants[t]
		if at.Value.HeldBy == global.HoldFailover { // one cut short: taken as it is
			held[i] = at
			continue
		}
		tx, held[i].Value = tx.HoldTenant(t, at, global.HoldFailover)
	}
	rev, err := tx.Commit(ctx)
	if err != nil {
		rt.log.Info("failover: holding a batch at once lost a race; one tenant at a time", "tenants", len(names), "err", err)
		rt.failoverOneByOne(ctx, s, node, names, force, res)
		return
	}
	for i := range held {
		if held[i].Rev == 0 {
			held[i].Rev = rev
		}
	}
	nodes, _, err := s.ListNodes(ctx)
	if err != nil {
		for i, t := range names {
			rt.releaseHeld(ctx, s, t, held[i])
			res.Failed = append(res.Failed, FailoverFailure{Tenant: t, Why: err.Error()})
		}
		return
	}
	rt.settleTo(ctx, rev) // the view shows the held records (their quotas, which a hold keeps still)
	byCopy := map[string][]int{}
	for i := range names {
		byCopy[held[i].Value.Replica] = append(byCopy[held[i].Value.Replica], i)
	}
	var mu sync.Mutex // guards res and ok below
	var ok []promoted
	var g errgroup.Group
	g.SetLimit(failoverParallel)
	for replica, idx := range byCopy {
		g.Go(func() error {
			got, failed := rt.promoteOn(ctx, s, nodes, replica, names, held, idx, force)
			mu.Lock()
			defer mu.Unlock()
			ok = append(ok, got...)
			res.Failed = append(res.Failed, failed...)
			return nil
		})
	}
	_ = g.Wait()
	if len(ok) > 0 {
		rt.pointAtCopies(ctx, s, ok, force, res)
	}
}

// promoteOn promotes the held tenants names[idx] on their copies on node
// replica in one call (POST /_admin/promote), each checked by the node as
// alone, and carries their quotas there; a node without that route has
// each promoted in a call of its own. A tenant not promoted is released.
func (rt *Router) promoteOn(ctx context.Context, s *global.Store, nodes map[string]global.Versioned[global.Node], replica string,
	names []string, held []global.Versioned[global.Tenant], idx []int, force bool) ([]promoted, []FailoverFailure) {
	var ok []promoted
	var failed []FailoverFailure
	fail := func(i int, err error) {
		rt.releaseHeld(ctx, s, names[i], held[i])
		failed = append(failed, FailoverFailure{Tenant: names[i], Why: err.Error()})
	}
	copyNode, known := nodes[replica]
	if !known {
		for _, i := range idx {
			fail(i, fmt.Errorf("copy of %s: node %s: %w: %w", names[i], replica, ErrUnknownNode, global.ErrNotFound))
		}
		return nil, failed
	}
	sub, recs := make([]string, len(idx)), make([]global.Tenant, len(idx))
	for j, i := range idx {
		sub[j], recs[j] = names[i], held[i].Value
	}
	ans, err := rt.nodes.PromoteMany(ctx, copyNode.Value, sub, recs, force, rt.promoteFence(copyNode.Value.Region))
	switch {
	case errors.Is(err, nodeapi.ErrNoBulkPromote):
		return rt.promoteEach(ctx, s, nodes, names, held, idx, force)
	case err != nil:
		for _, i := range idx {
			fail(i, fmt.Errorf("promote %s on %s: %w", names[i], replica, err))
		}
		return nil, failed
	}
	v := rt.watcher.View()
	for j, i := range idx {
		a := ans.Tenants[j]
		if a.Tenant != names[i] || a.Status != http.StatusOK {
			fail(i, fmt.Errorf("promote %s on %s: %w: node answered %d for %s: %s", names[i], replica, ErrNodeCall, a.Status, a.Tenant, a.Error))
			continue
		}
		if q, has := v.Quota(names[i]); has {
			if err := rt.nodes.PutQuota(ctx, copyNode.Value, names[i], q); err != nil {
				rt.log.Warn("quota not carried to a node", "tenant", names[i], "node", replica, "err", err)
			}
		}
		ok = append(ok, promoted{name: names[i], held: held[i], ans: wire.Promoted{Promoted: a.Promoted, Seq: a.Seq, History: a.History}})
	}
	return ok, failed
}

// promoteEach promotes the held tenants names[idx] one call each,
// failoverParallel at a time.
func (rt *Router) promoteEach(ctx context.Context, s *global.Store, nodes map[string]global.Versioned[global.Node],
	names []string, held []global.Versioned[global.Tenant], idx []int, force bool) ([]promoted, []FailoverFailure) {
	var mu sync.Mutex // guards ok and failed
	var ok []promoted
	var failed []FailoverFailure
	var g errgroup.Group
	g.SetLimit(failoverParallel)
	for _, i := range idx {
		g.Go(func() error {
			ans, err := rt.promoteHeld(ctx, s, nodes, names[i], held[i], force)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = append(failed, FailoverFailure{Tenant: names[i], Why: err.Error()})
			} else {
				ok = append(ok, promoted{name: names[i], held: held[i], ans: ans})
			}
			return nil
		})
	}
	_ = g.Wait()
	return ok, failed
}

// promoteHeld promotes the held tenant's copy and carries its quota there;
// a failed promotion releases the tenant.
func (rt *Router) promoteHeld(ctx context.Context, s *global.Store, nodes map[string]global.Versioned[global.Node], name string, held global.Versioned[global.Tenant], force bool) (wire.Promoted, error) {
	rec := held.Value
	copyNode, ok := nodes[rec.Replica]
	if !ok {
		rt.releaseHeld(ctx, s, name, held)
		return wire.Promoted{}, fmt.Errorf("copy of %s: node %s: %w: %w", name, rec.Replica, ErrUnknownNode, global.ErrNotFound)
	}
	ans, err := rt.nodes.Promote(ctx, copyNode.Value, name, rec, force, rt.promoteFence(copyNode.Value.Region))
	if err != nil {
		rt.releaseHeld(ctx, s, name, held)
		return wire.Promoted{}, fmt.Errorf("promote %s on %s: %w", name, rec.Replica, err)
	}
	rt.carryQuota(ctx, s, copyNode.Value, rec.Replica, name)
	return ans, nil
}

// pointAtCopies releases the promoted tenants onto their copies in one
// transaction, with nothing of this router's in between (opMu), or, if
// that loses a race, each in two steps as before: release, then point.
func (rt *Router) pointAtCopies(ctx context.Context, s *global.Store, ok []promoted, force bool, res *FailoverResult) {
	slices.SortFunc(ok, func(a, b promoted) int { return strings.Compare(a.name, b.name) })
	rt.opMu.Lock()
	defer rt.opMu.Unlock()
	tx := s.Txn()
	for _, p := range ok {
		tx, _ = tx.ReleaseAndFailover(p.name, p.held, global.HoldFailover, p.held.Value.Replica, p.ans.History)
	}
	rev, err := tx.Commit(ctx)
	if err != nil {
		rt.log.Info("failover: pointing a batch at once lost a race; one tenant at a time", "tenants", len(ok), "err", err)
		for _, p := range ok {
			if err := rt.pointAtCopy(ctx, s, p); err != nil {
				res.Failed = append(res.Failed, FailoverFailure{Tenant: p.name, Why: err.Error()})
				continue
			}
			rt.logFailedOver(p, force)
			res.Promoted = append(res.Promoted, p.name)
		}
		return
	}
	rt.settleTo(ctx, rev)
	for _, p := range ok {
		rt.logFailedOver(p, force)
		res.Promoted = append(res.Promoted, p.name)
	}
	rt.repair.failedOff(ok[0].held.Value.Node)
}

// pointAtCopy releases one promoted tenant and points the directory at
// its copy, conditioned on the release's revision. The caller holds opMu.
func (rt *Router) pointAtCopy(ctx context.Context, s *global.Store, p promoted) error {
	rec := p.held.Value
	free, err := s.Release(ctx, p.name, p.held, global.HoldFailover)
	if err != nil {
		return fmt.Errorf("release %s after its promotion on %s (a second failover finishes it): %w", p.name, rec.Replica, err)
	}
	done, err := s.Failover(ctx, p.name, free, rec.Replica, p.ans.History)
	if err != nil {
		return fmt.Errorf("point %s at %s (promoted there; a second failover finishes it): %w", p.name, rec.Replica, err)
	}
	rt.settleTo(ctx, done.Rev)
	rt.repair.failedOff(rec.Node)
	return nil
}

func (rt *Router) logFailedOver(p promoted, force bool) {
	rec := p.held.Value
	rt.log.Warn("tenant failed over", "tenant", p.name, "from", rec.Node, "to", rec.Replica,
		"history", p.ans.History, "seq", p.ans.Seq, "already_primary", !p.ans.Promoted, "forced", force)
}

// releaseHeld lets go of a tenant the failover held and could not
// promote.
func (rt *Router) releaseHeld(ctx context.Context, s *global.Store, name string, held global.Versioned[global.Tenant]) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rt.cfg.NodeTimeout)
	defer cancel()
	rel, err := s.Release(rctx, name, held, global.HoldFailover)
	if err != nil {
		rt.log.Error("release a tenant after a failed promotion", "tenant", name, "err", err)
		return
	}
	rt.settleTo(rctx, rel.Rev) // this router's answers show the release
}

// failoverOneByOne fails names over one at a time, each read again: one
// no longer on node is left alone, one another operation now holds is
// failed over when it ends.
func (rt *Router) failoverOneByOne(ctx context.Context, s *global.Store, node string, names []string, force bool, res *FailoverResult) {
	for _, t := range names {
		at, err := s.GetTenant(ctx, t)
		if err != nil {
			res.Failed = append(res.Failed, FailoverFailure{Tenant: t, Why: err.Error()})
			continue
		}
		if at.Value.Node != node {
			continue // moved or failed over meanwhile
		}
		at = rt.breakRestore(ctx, s, t, node, at)
		if by := at.Value.HeldBy; by != "" && by != global.HoldFailover {
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
}

// failoverTenant holds one tenant, promotes its copy, and records the
// copy as its primary, as failoverBatch does for many. A tenant already
// held by a failover (one cut short) is taken as it is.
func (rt *Router) failoverTenant(ctx context.Context, s *global.Store, name string, at global.Versioned[global.Tenant], force bool) error {
	if err := promotable(name, at.Value, force); err != nil {
		return err
	}
	held := at
	if at.Value.HeldBy != global.HoldFailover {
		var err error
		if held, err = s.Hold(ctx, name, at, global.HoldFailover); err != nil {
			return fmt.Errorf("hold %s: %w", name, err)
		}
	}
	nodes, _, err := s.ListNodes(ctx)
	if err != nil {
		rt.releaseHeld(ctx, s, name, held)
		return err
	}
	ans, err := rt.promoteHeld(ctx, s, nodes, name, held, force)
	if err != nil {
		return err
	}
	rt.opMu.Lock()
	defer rt.opMu.Unlock()
	p := promoted{name: name, held: held, ans: ans}
	if err := rt.pointAtCopy(ctx, s, p); err != nil {
		return err
	}
	rt.logFailedOver(p, force)
	return nil
}

// failoverWhenReleased waits, on a goroutine the router owns, until the
// operation holding tenant name ends, then fails it over onto replica,
// the copy it had when its node was failed over, if it is still on node.
// However the wait ends, the leasing is told (heldEnded): a tenant it
// gave up on goes back on its node's lease list at once. Every give-up is
// logged.
func (rt *Router) failoverWhenReleased(s *global.Store, name, node, replica string, force bool) {
	if replica == "" {
		rt.log.Warn("held tenant not failed over: it has no copy; back on its node's lease list", "tenant", name, "node", node)
		rt.heldEnded(name)
		return
	}
	rt.wg.Go(func() {
		defer rt.heldEnded(name)
		ctx, cancel := context.WithTimeout(rt.ctx, leasing.HeldWaitLimit)
		defer cancel()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				rt.log.Warn("held tenant not failed over: gave up waiting for the operation holding it; back on its node's lease list",
					"tenant", name, "node", node, "waited", leasing.HeldWaitLimit, "err", context.Cause(ctx))
				return
			case <-tick.C:
			}
			at, err := s.GetTenant(ctx, name)
			if err != nil {
				if isNotFound(err) {
					rt.log.Info("held tenant not failed over: deleted meanwhile", "tenant", name, "node", node)
					return
				}
				continue
			}
			if at.Value.HeldBy != "" && at.Value.HeldBy != global.HoldFailover {
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
			rt.log.Error("held tenant's failover failed: back on its node's lease list", "tenant", name, "node", node, "err", err)
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
		if id, ok := c.rt.answering(c.r.Context(), rec.Value); ok {
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

// answering says whether node n answers its admin token now as the node
// recorded (its id, where one is recorded), and the id it answers with:
// what a failover asked only of a node that is down checks first.
func (rt *Router) answering(ctx context.Context, n global.Node) (string, bool) {
	id, err := rt.nodes.Identify(ctx, n)
	if err != nil || (n.ID != "" && id != n.ID) {
		return "", false
	}
	if id == "" {
		id = "not recorded"
	}
	return id, true
}
