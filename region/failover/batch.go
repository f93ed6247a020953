package failover

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

// promoted is one tenant promoted on its copy, still held by the failover.
type promoted struct {
	name string
	held global.Versioned[global.Tenant]
	ans  wire.Promoted
}

// nodes are the node records a batch's promotions look their copies up in.
type nodes = map[string]global.Versioned[global.Node]

// batch fails over up to Batch tenants, read as tenants holds them: one
// transaction holds them all, their copies are promoted in one call per
// node holding them (those nodes in parallel, found in recs), and one
// transaction per such node releases the promoted onto their copies as
// soon as that node answered. A lost race on either transaction falls
// back to one tenant at a time, which reads each again and reports each
// on its own.
func (f *Failover) batch(ctx context.Context, s *global.Store, node string, names []string,
	tenants map[string]global.Versioned[global.Tenant], recs nodes, force bool, res *Result) {
	var took steps
	began := time.Now()
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
		f.log.Info("failover: holding a batch at once lost a race; one tenant at a time", "tenants", len(names), "err", err)
		f.oneByOne(ctx, s, node, names, force, res)
		return
	}
	took.hold = time.Since(began)
	for i := range held {
		if held[i].Rev == 0 {
			held[i].Rev = rev
		}
	}
	// The view is to show the held records (their quotas, which a hold
	// keeps still) before a quota is carried; the promotions need not wait
	// for it.
	settled := make(chan struct{})
	var bg sync.WaitGroup
	defer bg.Wait()
	bg.Go(func() {
		defer close(settled)
		f.deps.Settle(ctx, rev)
	})
	byCopy := map[string][]int{}
	for i := range names {
		byCopy[held[i].Value.Replica] = append(byCopy[held[i].Value.Replica], i)
	}
	var mu sync.Mutex // guards res
	var g errgroup.Group
	g.SetLimit(Parallel)
	for replica, idx := range byCopy {
		g.Go(func() error {
			part := f.onCopy(ctx, s, node, recs, replica, names, held, idx, force, settled, took)
			mu.Lock()
			defer mu.Unlock()
			res.Promoted = append(res.Promoted, part.Promoted...)
			res.Failed = append(res.Failed, part.Failed...)
			return nil
		})
	}
	_ = g.Wait()
}

// onCopy promotes the held tenants names[idx] on their copies on node
// replica and releases those promoted onto them at once, without waiting
// for the batch's other copy nodes: a copy node as lost as the failed one
// (a zone tenant's copy in a region lost whole) answers only at the dial's
// bound, and the tenants whose copies answered write again meanwhile. It
// logs each step's time ("failover: copies released").
func (f *Failover) onCopy(ctx context.Context, s *global.Store, node string, recs nodes, replica string,
	names []string, held []global.Versioned[global.Tenant], idx []int, force bool, settled <-chan struct{}, took steps) Result {
	began := time.Now()
	ok, failed := f.promoteOn(ctx, s, recs, replica, names, held, idx, force, settled)
	took.promote = time.Since(began)
	part := Result{Failed: failed}
	if len(ok) > 0 {
		f.pointAtCopies(ctx, s, ok, force, &part, &took)
	}
	f.log.Info("failover: copies released", "node", node, "copy", replica, "tenants", len(idx), "promoted", len(part.Promoted),
		"hold_ms", took.hold.Milliseconds(), "promote_ms", took.promote.Milliseconds(),
		"opmu_wait_ms", took.opMuWait.Milliseconds(), "release_ms", took.release.Milliseconds(),
		"settle_ms", took.settle.Milliseconds())
	return part
}

// steps is how long each step of a batch took on one copy node, for its
// log line (read from the wall clock; nothing decides by them): the hold's
// transaction, the promotion (with the quotas carried), the wait for
// OpMu, the release's transaction and the view settling on it.
type steps struct {
	hold, promote, opMuWait, release, settle time.Duration
}

// promoteOn promotes the held tenants names[idx] on their copies on node
// replica in one call (POST /_admin/promote), each checked by the node as
// alone, and carries their quotas there, as the view shows them once
// settled is closed; a node without that route has each promoted in a
// call of its own. A tenant not promoted is released.
func (f *Failover) promoteOn(ctx context.Context, s *global.Store, recs nodes, replica string,
	names []string, held []global.Versioned[global.Tenant], idx []int, force bool, settled <-chan struct{}) ([]promoted, []Failure) {
	var failed []Failure
	fail := func(i int, err error) {
		f.releaseHeld(ctx, s, names[i], held[i])
		failed = append(failed, Failure{Tenant: names[i], Why: err.Error()})
	}
	copyNode, known := recs[replica]
	if !known {
		for _, i := range idx {
			fail(i, unknownCopy(names[i], replica))
		}
		return nil, failed
	}
	if f.copyLost(replica) {
		for _, i := range idx {
			fail(i, lostCopy(names[i], replica))
		}
		return nil, failed
	}
	sub, subRecs := make([]string, len(idx)), make([]global.Tenant, len(idx))
	for j, i := range idx {
		sub[j], subRecs[j] = names[i], held[i].Value
	}
	ans, err := f.deps.Nodes.PromoteMany(ctx, copyNode.Value, sub, subRecs, force, f.deps.Fence(copyNode.Value.Region))
	switch {
	case errors.Is(err, nodeapi.ErrNoBulkPromote):
		return f.promoteEach(ctx, s, recs, names, held, idx, force)
	case err != nil:
		for _, i := range idx {
			fail(i, fmt.Errorf("promote %s on %s: %w", names[i], replica, err))
		}
		return nil, failed
	}
	var ok []promoted
	<-settled
	v := f.deps.View()
	for j, i := range idx {
		a := ans.Tenants[j]
		if a.Tenant != names[i] || a.Status != http.StatusOK {
			fail(i, fmt.Errorf("promote %s on %s: %w: node answered %d for %s: %s", names[i], replica, nodeapi.ErrNodeCall, a.Status, a.Tenant, a.Error))
			continue
		}
		if q, has := v.Quota(names[i]); has {
			if err := f.deps.Nodes.PutQuota(ctx, copyNode.Value, names[i], q); err != nil {
				f.log.Warn("quota not carried to a node", "tenant", names[i], "node", replica, "err", err)
			}
		}
		ok = append(ok, promoted{name: names[i], held: held[i], ans: wire.Promoted{Promoted: a.Promoted, Seq: a.Seq, History: a.History}})
	}
	return ok, failed
}

// unknownCopy is the failure of a tenant whose copy's node is not
// recorded.
func unknownCopy(name, replica string) error {
	return fmt.Errorf("copy of %s: node %s: %w: %w", name, replica, leasing.ErrUnknownNode, global.ErrNotFound)
}

// copyLost says whether node, a copy's, is known lost (Deps.CopyLost).
func (f *Failover) copyLost(node string) bool {
	return f.deps.CopyLost != nil && f.deps.CopyLost(node)
}

// lostCopy is the failure of a tenant whose copy's node is known lost.
func lostCopy(name, replica string) error {
	return fmt.Errorf("%w: the copy of %s is on %s, whose lease lapsed too (lost with this node, or failed over): not promoted; "+
		"fail %s over once it answers again, or give %s a copy elsewhere (PUT /_shard/tenants/%s/survive)", ErrCopyLost, name, replica, replica, name, name)
}

// promoteEach promotes the held tenants names[idx] one call each,
// Parallel at a time.
func (f *Failover) promoteEach(ctx context.Context, s *global.Store, recs nodes,
	names []string, held []global.Versioned[global.Tenant], idx []int, force bool) ([]promoted, []Failure) {
	var mu sync.Mutex // guards ok and failed
	var ok []promoted
	var failed []Failure
	var g errgroup.Group
	g.SetLimit(Parallel)
	for _, i := range idx {
		g.Go(func() error {
			ans, err := f.promoteHeld(ctx, s, recs, names[i], held[i], force)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = append(failed, Failure{Tenant: names[i], Why: err.Error()})
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
func (f *Failover) promoteHeld(ctx context.Context, s *global.Store, recs nodes, name string,
	held global.Versioned[global.Tenant], force bool) (wire.Promoted, error) {
	rec := held.Value
	copyNode, ok := recs[rec.Replica]
	if !ok {
		f.releaseHeld(ctx, s, name, held)
		return wire.Promoted{}, unknownCopy(name, rec.Replica)
	}
	if f.copyLost(rec.Replica) {
		f.releaseHeld(ctx, s, name, held)
		return wire.Promoted{}, lostCopy(name, rec.Replica)
	}
	ans, err := f.deps.Nodes.Promote(ctx, copyNode.Value, name, rec, force, f.deps.Fence(copyNode.Value.Region))
	if err != nil {
		f.releaseHeld(ctx, s, name, held)
		return wire.Promoted{}, fmt.Errorf("promote %s on %s: %w", name, rec.Replica, err)
	}
	f.deps.CarryQuota(ctx, s, copyNode.Value, rec.Replica, name)
	return ans, nil
}

// pointAtCopies releases the promoted tenants onto their copies in one
// transaction, with nothing of the router's in between (OpMu), or, if
// that loses a race, each in two steps as before: release, then point.
// OpMu is let go once the transaction committed: the view settling on it
// is waited for outside, so the failovers of other nodes lapsing at the
// same time release theirs meanwhile.
func (f *Failover) pointAtCopies(ctx context.Context, s *global.Store, ok []promoted, force bool, res *Result, took *steps) {
	slices.SortFunc(ok, func(a, b promoted) int { return strings.Compare(a.name, b.name) })
	waited := time.Now()
	f.deps.OpMu.Lock()
	took.opMuWait = time.Since(waited)
	rev, err := f.releaseLocked(ctx, s, ok, force, res)
	f.deps.OpMu.Unlock()
	took.release = time.Since(waited) - took.opMuWait
	if err != nil {
		return
	}
	settling := time.Now()
	f.deps.Settle(ctx, rev)
	took.settle = time.Since(settling)
	for _, p := range ok {
		f.logFailedOver(p, force)
		res.Promoted = append(res.Promoted, p.name)
	}
}

// releaseLocked releases ok onto their copies in one transaction and tells
// the repair loop, answering the transaction's revision; a transaction
// that lost a race has each pointed at its copy alone (added to res), and
// answers its error. The caller holds OpMu.
func (f *Failover) releaseLocked(ctx context.Context, s *global.Store, ok []promoted, force bool, res *Result) (int64, error) {
	tx := s.Txn()
	for _, p := range ok {
		tx, _ = tx.ReleaseAndFailover(p.name, p.held, global.HoldFailover, p.held.Value.Replica, p.ans.History)
	}
	rev, err := tx.Commit(ctx)
	if err != nil {
		f.log.Info("failover: pointing a batch at once lost a race; one tenant at a time", "tenants", len(ok), "err", err)
		for _, p := range ok {
			if err := f.pointAtCopyLocked(ctx, s, p); err != nil {
				res.Failed = append(res.Failed, Failure{Tenant: p.name, Why: err.Error()})
				continue
			}
			f.logFailedOver(p, force)
			res.Promoted = append(res.Promoted, p.name)
		}
		return 0, err
	}
	f.deps.Repair.FailedOff(ok[0].held.Value.Node)
	return rev, nil
}

// pointAtCopyLocked releases one promoted tenant and points the directory
// at its copy, conditioned on the release's revision. The caller holds
// OpMu.
func (f *Failover) pointAtCopyLocked(ctx context.Context, s *global.Store, p promoted) error {
	rec := p.held.Value
	free, err := s.Release(ctx, p.name, p.held, global.HoldFailover)
	if err != nil {
		return fmt.Errorf("release %s after its promotion on %s (a second failover finishes it): %w", p.name, rec.Replica, err)
	}
	done, err := s.Failover(ctx, p.name, free, rec.Replica, p.ans.History)
	if err != nil {
		return fmt.Errorf("point %s at %s (promoted there; a second failover finishes it): %w", p.name, rec.Replica, err)
	}
	f.deps.Settle(ctx, done.Rev)
	f.deps.Repair.FailedOff(rec.Node)
	return nil
}

func (f *Failover) logFailedOver(p promoted, force bool) {
	rec := p.held.Value
	f.log.Warn("tenant failed over", "tenant", p.name, "from", rec.Node, "to", rec.Replica,
		"history", p.ans.History, "seq", p.ans.Seq, "already_primary", !p.ans.Promoted, "forced", force)
}

// releaseHeld lets go of a tenant the failover held and could not
// promote.
func (f *Failover) releaseHeld(ctx context.Context, s *global.Store, name string, held global.Versioned[global.Tenant]) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.deps.NodeTimeout)
	defer cancel()
	rel, err := s.Release(rctx, name, held, global.HoldFailover)
	if err != nil {
		f.log.Error("release a tenant after a failed promotion", "tenant", name, "err", err)
		return
	}
	f.deps.Settle(rctx, rel.Rev) // this router's answers show the release
}

// oneByOne fails names over one at a time, each read again: one no
// longer on node is left alone, one another operation now holds is failed
// over when it ends.
func (f *Failover) oneByOne(ctx context.Context, s *global.Store, node string, names []string, force bool, res *Result) {
	for _, t := range names {
		at, err := s.GetTenant(ctx, t)
		if err != nil {
			res.Failed = append(res.Failed, Failure{Tenant: t, Why: err.Error()})
			continue
		}
		if at.Value.Node != node {
			continue // moved or failed over meanwhile
		}
		at = f.breakRestore(ctx, s, t, node, at)
		if by := at.Value.HeldBy; by != "" && by != global.HoldFailover {
			res.Failed = append(res.Failed, heldFailure(t, at.Value))
			f.whenReleased(s, t, node, at.Value.Replica, force)
			continue
		}
		if err := f.tenant(ctx, s, t, at, force); err != nil {
			res.Failed = append(res.Failed, Failure{Tenant: t, Why: err.Error()})
			continue
		}
		res.Promoted = append(res.Promoted, t)
	}
}

// tenant holds one tenant, promotes its copy, and records the copy as its
// primary, as batch does for many. A tenant already held by a failover
// (one cut short) is taken as it is.
func (f *Failover) tenant(ctx context.Context, s *global.Store, name string, at global.Versioned[global.Tenant], force bool) error {
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
	recs, _, err := s.ListNodes(ctx)
	if err != nil {
		f.releaseHeld(ctx, s, name, held)
		return err
	}
	ans, err := f.promoteHeld(ctx, s, recs, name, held, force)
	if err != nil {
		return err
	}
	f.deps.OpMu.Lock()
	defer f.deps.OpMu.Unlock()
	p := promoted{name: name, held: held, ans: ans}
	if err := f.pointAtCopyLocked(ctx, s, p); err != nil {
		return err
	}
	f.logFailedOver(p, force)
	return nil
}
