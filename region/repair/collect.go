package repair

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/audit"
	"github.com/fenec-go/fenec/wire"
)

// A move deletes its source's file once the directory points at the
// target; a router that stops before it does leaves the file on the
// source, frozen, with nothing of the directory naming it there. The
// repair collects such files: it asks every node which files it holds and
// deletes one that is
//
//   - of a tenant the directory places neither there (as its primary, its
//     copy, a read copy or a move's target) nor failed off that node
//     (rejoin's), and that no operation holds;
//   - frozen, a primary's file, of the tenant's lineage as recorded;
//   - while the tenant's primary answers as its primary, of that lineage
//     (the target serves it: nothing is lost with the source).
//
// The node deletes it only if it is still open and frozen as it marks it
// closing (DELETE ...?if=frozen): anything placed there since — a copy
// made, a move's install — is a new file, never frozen, and is kept. A
// node from before the replication status said "frozen" never shows a
// file frozen, so nothing is deleted on it.

// collectSources deletes, on every node that answers, the frozen files
// of moved tenants their moves left behind.
func (p *Repairer) collectSources(ctx context.Context, s *global.Store, tenants map[string]global.Versioned[global.Tenant], nodes map[string]global.Versioned[global.Node]) {
	var (
		mu    sync.Mutex // guards held
		held  = map[string][]string{}
		g, gc = errgroup.WithContext(ctx)
	)
	g.SetLimit(parallel)
	for name, n := range nodes {
		g.Go(func() error {
			files, err := p.deps.Nodes.Tenants(gc, n.Value)
			if err == nil { // one not answering is looked at next time
				mu.Lock()
				held[name] = files
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	for _, name := range slices.Sorted(maps.Keys(held)) {
		for _, t := range held[name] {
			at, ok := tenants[t]
			if !ok || !leftBehind(at.Value, name) || p.deps.SourcePending(t, name) {
				continue
			}
			if err := p.collectSource(ctx, s, t, name, at.Value); err != nil {
				p.log.Warn("a moved tenant's source left frozen not deleted: looked at again later", "tenant", t, "node", name, "err", err)
			}
		}
	}
}

// leftBehind reports whether a file of t on node may be a move's source
// left there: nothing of the directory's names node for t, and no
// operation holds t.
func leftBehind(t global.Tenant, node string) bool {
	return !PlacesOn(t, node) && !t.ReadCopies.Has(node) && t.FailedFrom != node && t.HeldBy == "" &&
		t.State == global.StateActive && t.Lineage != 0
}

// collectSource deletes tenant t's file on node once it is known to be a
// move's frozen source and t's primary serves it (see above).
func (p *Repairer) collectSource(ctx context.Context, s *global.Store, t, node string, rec global.Tenant) error {
	s, err := p.deps.OwnTenant(ctx, s, t)
	if err != nil {
		return nil // the other side collects what it owns
	}
	src, err := p.deps.Apart(ctx, s, rec.Node, node)
	if err != nil {
		return err
	}
	st, err := p.deps.Nodes.Replication(ctx, src, t)
	if err != nil {
		return err
	}
	if !st.Frozen || st.Role != "primary" || st.LineageID() != rec.Lineage {
		return nil // a copy being made, a file of another lineage: not this collector's
	}
	primary, err := s.GetNode(ctx, rec.Node)
	if err != nil {
		return err
	}
	if err := p.servesAsPrimary(ctx, primary.Value, t, rec.Lineage); err != nil {
		return err
	}
	// Read again, with no move of this router's beginning meanwhile: a
	// move back onto node since would have the file there its target's.
	p.deps.OpMu.Lock()
	defer p.deps.OpMu.Unlock()
	if cur, err := s.GetTenant(ctx, t); err != nil || !leftBehind(cur.Value, node) || cur.Value.Node != rec.Node {
		return err
	}
	gone, err := p.deps.Nodes.RemoveFrozen(ctx, src, t)
	p.audit("collect source", t, node, err, "a moved tenant's source left frozen; its primary "+rec.Node+" serves it")
	if err != nil {
		return err
	}
	if gone {
		p.log.Info("deleted a moved tenant's source left frozen", "tenant", t, "node", node, "primary", rec.Node)
	}
	return nil
}

// servesAsPrimary checks that n holds t as its primary, of lineage.
func (p *Repairer) servesAsPrimary(ctx context.Context, n global.Node, t string, lineage uint64) error {
	st, err := p.deps.Nodes.Replication(ctx, n, t)
	if err != nil {
		return fmt.Errorf("the primary of %s: %w", t, err)
	}
	if st.Role != "primary" || st.LineageID() != lineage {
		return fmt.Errorf("%w: the primary of %s answers as %s of lineage %d, the directory records %d",
			errNotLeftBehind, t, st.Role, st.LineageID(), lineage)
	}
	return nil
}

// audit records a change the repair made on its own (or failed to) in the
// audit log.
func (p *Repairer) audit(what, tenant, node string, err error, detail string) {
	e := audit.Entry{Time: p.deps.Now(), Router: p.deps.ID, Who: "repair", What: what, Tenant: tenant, Node: node, Outcome: "ok", Detail: detail}
	if err != nil {
		e.Outcome = err.Error()
		e.Status = wire.StatusOf(err)
	}
	if aerr := p.deps.Audit.Record(e); aerr != nil {
		p.log.Error("audit", "err", aerr)
	}
}
