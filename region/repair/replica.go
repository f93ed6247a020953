package repair

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/fenec-go/fenec/global"
)

// A tenant's voting copy in its own region (or, for a tenant set to
// survive its region, in another): where it goes, how it is made and
// recorded, and what becomes of it after a placement and a move.

// copyCatchUp bounds how long a new copy has to take its primary's image.
const copyCatchUp = 15 * time.Second

// PlacesOn reports whether t has its file, its copy or a move's target on
// node.
func PlacesOn(t global.Tenant, node string) bool {
	return t.Node == node || t.Replica == node || t.Target == node
}

// standbyOf is the standby recorded for node n ("" when none).
func (p *Repairer) standbyOf(ctx context.Context, n string) (string, error) {
	sb, err := p.deps.Store.GetStandby(ctx, n)
	if isNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read standby of %s: %w", n, err)
	}
	return sb.Value, nil
}

// PickReplica is the node that takes a copy of tenant t: its primary's
// standby if it has one; else, when spread (--replicas, an operator's
// POST /_shard/replicas), the other node of its region (standbys left
// out) holding the fewest copies of the primary's tenants, then the
// fewest bytes; "" when none is to be made. A tenant set to survive its
// region (region/copies) always gets a copy, on a node of another region
// leased by the global tier, its primary's standby left out.
func (p *Repairer) PickReplica(ctx context.Context, s *global.Store, t global.Tenant, spread bool) (string, error) {
	primary := t.Node
	region := t.Survive == global.SurviveRegion
	if !region {
		sb, err := p.standbyOf(ctx, primary)
		if err != nil || sb != "" {
			return sb, err
		}
		if !spread {
			return "", nil
		}
	}
	nodes, _, err := s.ListNodes(ctx)
	if err != nil {
		return "", err
	}
	pn, ok := nodes[primary]
	if !ok {
		return "", fmt.Errorf("%w: %s", p.deps.UnknownNode(global.ErrNotFound), primary)
	}
	tenants, _, err := s.ListTenants(ctx)
	if err != nil {
		return "", err
	}
	var copies map[string]int
	if region {
		copies = p.deps.RegionCandidates(ctx, s, t, pn.Value, nodes)
	} else {
		copies = regionCandidates(t, pn.Value.Region, nodes)
	}
	if len(copies) == 0 {
		return "", nil
	}
	for _, t := range tenants {
		if t.Value.Node == primary && t.Value.Replica != "" {
			if _, ok := copies[t.Value.Replica]; ok {
				copies[t.Value.Replica]++
			}
		}
	}
	return p.fewest(ctx, copies, nodes)
}

// regionCandidates are the nodes of region, other than t's primary, not
// standbys and holding none of t's read copies, each with a count of zero.
func regionCandidates(t global.Tenant, region string, nodes map[string]global.Versioned[global.Node]) map[string]int {
	out := map[string]int{}
	for name, n := range nodes {
		if name != t.Node && !n.Value.Standby && n.Value.Region == region && !t.ReadCopies.Has(name) {
			out[name] = 0
		}
	}
	return out
}

// fewest is the node of copies counting the fewest, ties broken by the
// fewest bytes on disk, then by name when none answered its sizes.
func (p *Repairer) fewest(ctx context.Context, copies map[string]int, nodes map[string]global.Versioned[global.Node]) (string, error) {
	least := slices.Min(slices.Collect(maps.Values(copies)))
	tied := map[string]global.Node{}
	for name, c := range copies {
		if c == least {
			tied[name] = nodes[name].Value
		}
	}
	if len(tied) == 1 {
		for name := range tied {
			return name, nil
		}
	}
	best, err := p.deps.Fittest(ctx, tied)
	if err != nil { // none answered its sizes: fall back on the name
		names := make([]string, 0, len(tied))
		for name := range tied {
			names = append(names, name)
		}
		return slices.Min(names), nil
	}
	return best, nil
}

// RecordLineage reads the tenant's lineage off its primary and records
// it when the directory has none yet.
func (p *Repairer) RecordLineage(ctx context.Context, s *global.Store, name string) (global.Versioned[global.Tenant], error) {
	at, err := s.GetTenant(ctx, name)
	if err != nil || at.Value.Lineage != 0 {
		return at, err
	}
	node, err := s.GetNode(ctx, at.Value.Node)
	if err != nil {
		return at, p.deps.UnknownNode(err)
	}
	st, err := p.deps.Nodes.Replication(ctx, node.Value, name)
	if err != nil {
		return at, fmt.Errorf("read %s's lineage on %s: %w", name, at.Value.Node, err)
	}
	if st.LineageID() == 0 {
		return at, nil
	}
	return s.UpdateTenant(ctx, name, at, func(t *global.Tenant) error {
		t.Lineage = st.LineageID()
		return nil
	})
}

// AwaitCopy waits until the copy of tenant on n holds its primary's
// lineage, i.e. has taken the primary's image. Until then the copy is not
// the tenant (a failover would refuse it, or promote an empty file), and a
// primary under --sync always would answer writes its copy has not got:
// so a copy is recorded only once it has caught up.
func (p *Repairer) AwaitCopy(ctx context.Context, n global.Node, tenant string, lineage uint64) error {
	if lineage == 0 {
		return nil // a primary of no history yet: nothing to take
	}
	ctx, cancel := context.WithTimeout(ctx, copyCatchUp)
	defer cancel()
	for pause := 5 * time.Millisecond; ; pause = min(2*pause, 200*time.Millisecond) {
		st, err := p.deps.Nodes.Replication(ctx, n, tenant)
		if err == nil && st.LineageID() == lineage {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: it has not taken its primary's image (last: %v)", ErrCopyBehind, err)
		case <-time.After(pause):
		}
	}
}

// AddReplica gives tenant name a following copy on target: the copy's
// node makes the file anew (a stale one deleted first) and follows the
// primary, then the directory records the copy, and the copy it had
// before is deleted. A primary that does not answer gets no copy.
func (p *Repairer) AddReplica(ctx context.Context, s *global.Store, name, target string) error {
	at, err := p.RecordLineage(ctx, s, name)
	if err != nil {
		return err
	}
	if at.Value.HeldBy != "" {
		return p.deps.Held(name, at.Value.HeldBy)
	}
	if at.Value.Node == target {
		return fmt.Errorf("copy of %s on %s, its primary: %w", name, target, ErrSameNode)
	}
	primary, err := s.GetNode(ctx, at.Value.Node)
	if err != nil {
		return p.deps.UnknownNode(err)
	}
	if err := p.deps.Nodes.CheckToken(ctx, primary.Value); err != nil {
		return fmt.Errorf("primary %s of %s does not answer: %w", at.Value.Node, name, err)
	}
	// A moved tenant's source still to be deleted there goes first.
	if err := p.deps.SourceWait(ctx, name, target); err != nil {
		return err
	}
	dst, err := p.makeCopy(ctx, s, name, target, at.Value.Lineage, primary.Value, at.Value.Node)
	if err != nil {
		return err
	}
	p.deps.CarryQuota(ctx, s, dst, target, name)
	rec, err := s.UpdateTenant(ctx, name, at, func(t *global.Tenant) error {
		t.Replica = target
		return nil
	})
	if err != nil {
		return fmt.Errorf("record the copy of %s on %s: %w", name, target, err)
	}
	p.deps.Settle(ctx, rec.Rev)
	p.log.Info("replica made", "tenant", name, "primary", at.Value.Node, "replica", target)
	if old := at.Value.Replica; old != "" && old != target {
		// The copy it had before follows no more: delete it (best effort),
		// once the node is known to be neither the primary nor the new copy.
		if err := p.RemoveStale(ctx, s, name, old, at.Value.Node, target); err != nil {
			p.log.Warn("former copy not deleted", "tenant", name, "node", old, "err", err)
		}
	}
	return nil
}

// makeCopy makes tenant name's file on target anew, following primary
// (named primaryName), and waits until it holds lineage. It answers
// target's record as identified.
func (p *Repairer) makeCopy(ctx context.Context, s *global.Store, name, target string, lineage uint64, primary global.Node, primaryName string) (global.Node, error) {
	// Whatever the target holds of the tenant goes: first make sure,
	// asking both now, that the target is not the primary by another name.
	dst, err := p.deps.Apart(ctx, s, primaryName, target)
	if err != nil {
		return dst, fmt.Errorf("copy of %s on %s: %w", name, target, err)
	}
	if _, err := p.deps.Nodes.Remove(ctx, dst, name); err != nil {
		return dst, fmt.Errorf("delete a stale copy of %s on %s: %w", name, target, err)
	}
	if err := p.deps.Nodes.Create(ctx, dst, name); err != nil {
		return dst, fmt.Errorf("create a copy of %s on %s: %w", name, target, err)
	}
	if err := p.deps.Nodes.Follow(ctx, dst, target, name, primary); err != nil {
		return dst, fmt.Errorf("copy of %s on %s: %w", name, target, err)
	}
	if err := p.AwaitCopy(ctx, dst, name, lineage); err != nil {
		return dst, fmt.Errorf("copy of %s on %s: %w", name, target, err)
	}
	return dst, nil
}

// RemoveStale deletes tenant's file on node stale, once stale has been
// asked, with each of keep, whether it is that node under another name.
func (p *Repairer) RemoveStale(ctx context.Context, s *global.Store, tenant, stale string, keep ...string) error {
	var n global.Node
	for _, k := range keep {
		if k == "" {
			continue
		}
		var err error
		if n, err = p.deps.Apart(ctx, s, k, stale); err != nil {
			return err
		}
	}
	if n.Addr == "" {
		var err error
		if n, err = p.deps.Identified(ctx, s, stale); err != nil {
			return err
		}
	}
	_, err := p.deps.Nodes.Remove(ctx, n, tenant)
	return err
}

// AfterPlace, once a tenant is placed, records its lineage and gives it
// a copy if its node has a standby or the router runs --replicas. A copy
// that cannot be made is left to the repair.
func (p *Repairer) AfterPlace(ctx context.Context, s *global.Store, name string) {
	at, err := p.RecordLineage(ctx, s, name)
	if err != nil {
		p.log.Warn("lineage not recorded at placement", "tenant", name, "err", err)
		return
	}
	target, err := p.PickReplica(ctx, s, at.Value, p.deps.Replicas)
	if err != nil || target == "" {
		if err != nil {
			p.log.Warn("no copy chosen at placement", "tenant", name, "err", err)
		}
		return
	}
	if err := p.AddReplica(ctx, s, name, target); err != nil {
		p.log.Warn("copy not made at placement: the repair tries again", "tenant", name, "replica", target, "err", err)
		p.Later(name)
	}
}

// AfterMove has a moved tenant's copy follow the new primary; a copy on
// the node it moved to was replaced by the move (replaced: the directory
// dropped it as the move began), so a new one is made, wherever a copy
// would be given one by hand when the router spreads none.
func (p *Repairer) AfterMove(ctx context.Context, s *global.Store, name string, replaced bool) {
	at, err := s.GetTenant(ctx, name)
	if err != nil {
		return
	}
	if at.Value.Replica == "" || at.Value.Replica == at.Value.Node {
		p.recopyMoved(ctx, s, name, at, replaced)
		return
	}
	primary, perr := s.GetNode(ctx, at.Value.Node)
	dst, derr := p.deps.Apart(ctx, s, at.Value.Node, at.Value.Replica)
	if err := errors.Join(perr, derr); err != nil {
		p.log.Warn("copy not told to follow a moved tenant", "tenant", name, "err", err)
		return
	}
	if err := p.deps.Nodes.Follow(ctx, dst, at.Value.Replica, name, primary.Value); err != nil {
		p.log.Warn("copy not told to follow a moved tenant", "tenant", name, "replica", at.Value.Replica, "err", err)
	}
}

// recopyMoved gives a moved tenant (at) that has no copy, or whose copy
// is on the node it moved to, a new one.
func (p *Repairer) recopyMoved(ctx context.Context, s *global.Store, name string, at global.Versioned[global.Tenant], replaced bool) {
	if at.Value.Replica != "" {
		rec, err := s.UpdateTenant(ctx, name, at, func(t *global.Tenant) error {
			t.Replica = ""
			return nil
		})
		if err != nil {
			p.log.Warn("forget a copy a move replaced", "tenant", name, "err", err)
			return
		}
		p.deps.Settle(ctx, rec.Rev)
	}
	if target, err := p.PickReplica(ctx, s, at.Value, p.deps.Replicas || replaced); err == nil && target != "" {
		if err := p.AddReplica(ctx, s, name, target); err != nil {
			p.log.Warn("copy not made after a move", "tenant", name, "err", err)
			p.Later(name)
		}
	}
}

// Failure is a tenant that got no copy, and why.
type Failure struct {
	Tenant string `json:"tenant"`
	Why    string `json:"why"`
}

// ReplicateAll gives every active tenant without a copy one now, of
// those this router's side owns: on its node's standby, else on the other
// node of its region holding the fewest of its node's copies. It returns
// those given one and those that were not (each also owed to the repair).
func (p *Repairer) ReplicateAll(ctx context.Context, s *global.Store) ([]string, []Failure, error) {
	tenants, _, err := s.ListTenants(ctx)
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, 0, len(tenants))
	for t, rec := range tenants {
		if rec.Value.Replica == "" && rec.Value.State == global.StateActive {
			names = append(names, t)
		}
	}
	slices.Sort(names)
	replicated, failed := []string{}, []Failure{}
	for _, t := range names {
		rec := tenants[t].Value
		ts, err := p.deps.OwnTenant(ctx, s, t)
		if err != nil {
			continue // the other side's to replicate
		}
		target, err := p.PickReplica(ctx, ts, rec, true)
		if err == nil && target == "" {
			err = fmt.Errorf("%w: no other node in %s's region", ErrNoCandidate, rec.Node)
		}
		if err == nil {
			err = p.AddReplica(ctx, ts, t, target)
		}
		if err != nil {
			failed = append(failed, Failure{Tenant: t, Why: err.Error()})
			p.Later(t)
			continue
		}
		replicated = append(replicated, t)
	}
	return replicated, failed, nil
}

func isNotFound(err error) bool { return errors.Is(err, global.ErrNotFound) }
