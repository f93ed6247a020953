package copies

import (
	"context"
	"fmt"
	"slices"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/counted"
)

// Survival per tenant (docs/regions.md, "What a tenant survives"): a
// tenant that must survive its region's loss ("survive": "region") keeps
// its voting copy on a node of another region, both regions leased by
// the global tier — the only directory that outlives either — so that a
// failover by the global tier's leading router promotes it when the
// home region is lost whole. Under --sync always a write is acknowledged
// only once that copy holds it: it costs the round trip between the two
// regions, reads do not. A "zone" tenant (the default) keeps its copy in
// its own region.

// Survival is what PUT /_shard/tenants/<t>/survive answers.
type Survival struct {
	Tenant  string `json:"tenant"`
	Survive string `json:"survive"`
	Node    string `json:"node"`
	Replica string `json:"replica"`
}

// SetSurvive sets tenant name's survival to survive (global.SurviveZone
// or global.SurviveRegion): to region, its voting copy is made on a node
// of another region first (copyNode, or the one the router picks; the
// copy it had is deleted once the new one follows), then the record says
// so; to zone, the record says so first, then its copy comes home to its
// region. The router has checked the request and holds its operations'
// lock.
func (c *Copies) SetSurvive(ctx context.Context, s *global.Store, name, survive, copyNode string) (Survival, error) {
	at, err := s.GetTenant(ctx, name)
	if err != nil {
		return Survival{}, c.deps.UnknownTenant(err)
	}
	if at.Value.HeldBy != "" {
		return Survival{}, c.deps.Held(name, at.Value.HeldBy)
	}
	if survive == global.SurviveRegion {
		if err := c.regionCopy(ctx, s, name, at.Value, copyNode); err != nil {
			return Survival{}, err
		}
	}
	now, err := s.GetTenant(ctx, name)
	if err != nil {
		return Survival{}, err
	}
	rec, err := s.UpdateTenant(ctx, name, now, func(t *global.Tenant) error {
		if survive == global.SurviveZone {
			t.Survive = ""
		} else {
			t.Survive = global.SurviveRegion
		}
		return nil
	})
	if err != nil {
		return Survival{}, fmt.Errorf("record %s's survival: %w", name, err)
	}
	c.deps.Settle(ctx, rec.Rev)
	if survive == global.SurviveZone {
		c.homeCopy(ctx, s, name)
	}
	c.log.Info("tenant survival set", "tenant", name, "survive", survive, "replica", rec.Value.Replica)
	return Survival{Tenant: name, Survive: survive, Node: rec.Value.Node, Replica: rec.Value.Replica}, nil
}

// regionCopy gives tenant name (its record t), to survive its region, its
// voting copy on target, a node of another region (the router picks one
// when target is ""), unless it is there already.
func (c *Copies) regionCopy(ctx context.Context, s *global.Store, name string, t global.Tenant, target string) error {
	if err := c.GloballyLeased(ctx, s, t.Node); err != nil {
		return fmt.Errorf("%w: tenant %s: %w", ErrSurvive, name, err)
	}
	if target == "" {
		want := t
		want.Survive = global.SurviveRegion
		var err error
		if target, err = c.deps.PickReplica(ctx, s, want, true); err != nil {
			return err
		}
		if target == "" {
			return fmt.Errorf("%w: no node of another region leased by the global tier can hold %s's copy: record one, or name it (\"copy\")", ErrSurvive, name)
		}
	}
	if err := c.checkRegionCopy(ctx, s, t, target); err != nil {
		return err
	}
	if t.Replica == target {
		return nil
	}
	return c.deps.AddReplica(ctx, s, name, target)
}

// checkRegionCopy refuses target as the voting copy of t, a tenant to
// survive its region: it must be a recorded node of another region than
// t's primary, leased by the global tier, holding no other copy of t.
func (c *Copies) checkRegionCopy(ctx context.Context, s *global.Store, t global.Tenant, target string) error {
	node, err := s.GetNode(ctx, target)
	if err != nil {
		return c.deps.UnknownNode(err)
	}
	primary, err := s.GetNode(ctx, t.Node)
	if err != nil {
		return c.deps.UnknownNode(err)
	}
	switch {
	case target == t.Node:
		return fmt.Errorf("%w: %s is the tenant's primary: name a node of another region", ErrSurvive, target)
	case node.Value.Region == primary.Value.Region:
		return fmt.Errorf("%w: %s is in the tenant's own region %q: a copy there does not outlive it; name a node of another region", ErrSurvive, target, node.Value.Region)
	case t.ReadCopies.Has(target):
		return fmt.Errorf("%w: %s holds the tenant's read copy, which is never promoted: drop it first, or name another node", ErrSurvive, target)
	}
	if err := c.GloballyLeased(ctx, s, target); err != nil {
		return fmt.Errorf("%w: %w", ErrSurvive, err)
	}
	return nil
}

// homeCopy brings the voting copy of tenant name, set to survive its zone
// only, back into its primary's region, where the router would place it;
// one that cannot be made is left to the repair (the copy it has stays).
func (c *Copies) homeCopy(ctx context.Context, s *global.Store, name string) {
	at, err := s.GetTenant(ctx, name)
	if err != nil || at.Value.Replica == "" {
		return
	}
	nodes, _, err := s.ListNodes(ctx)
	if err != nil {
		return
	}
	p, r := nodes[at.Value.Node], nodes[at.Value.Replica]
	if p.Value.Region == r.Value.Region {
		return
	}
	target, err := c.deps.PickReplica(ctx, s, at.Value, true)
	if err != nil || target == "" {
		c.log.Warn("the copy of a tenant set to survive its zone stays in another region: no node of its own region can take it", "tenant", name, "replica", at.Value.Replica, "err", err)
		return
	}
	if err := c.deps.AddReplica(ctx, s, name, target); err != nil {
		c.log.Warn("copy not brought home", "tenant", name, "target", target, "err", err)
	}
}

// RegionCandidates filters the nodes a copy of t may go to when t is to
// survive its region: nodes of other regions than primary's, leased by
// the global tier, neither standbys nor holding t's read copies. Each is
// given 0 (the count of copies the caller fills in).
func (c *Copies) RegionCandidates(ctx context.Context, s *global.Store, t global.Tenant, primary global.Node, nodes map[string]global.Versioned[global.Node]) map[string]int {
	out := map[string]int{}
	owned := map[string]bool{}
	for name, n := range nodes {
		if name == t.Node || n.Value.Standby || n.Value.Region == primary.Region || t.ReadCopies.Has(name) {
			continue
		}
		ok, seen := owned[n.Value.Region]
		if !seen {
			_, err := c.deps.Own(ctx, s, n.Value.Region)
			ok = err == nil
			owned[n.Value.Region] = ok
		}
		if ok {
			out[name] = 0
		}
	}
	return out
}

// RefuseRegionalLeasing refuses a handoff of region r to its own leasing
// while tenants that must survive their region live in it, or keep their
// copy there: nobody outside a region that leases itself can fail its
// tenants over, so they would survive its loss no more.
func RefuseRegionalLeasing(ctx context.Context, s *global.Store, r string) error {
	tenants, _, err := s.ListTenants(ctx)
	if err != nil {
		return err
	}
	nodes, _, err := s.ListNodes(ctx)
	if err != nil {
		return err
	}
	var names []string
	for name, rec := range tenants {
		t := rec.Value
		if t.Survive != global.SurviveRegion {
			continue
		}
		if nodes[t.Node].Value.Region == r || t.Replica != "" && nodes[t.Replica].Value.Region == r {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	return fmt.Errorf("%w: region %s holds %s set to survive their region's loss, or their copies: a region that leases itself cannot be failed over from outside; set them to \"zone\" first (PUT /_shard/tenants/<t>/survive {\"survive\": \"zone\"})",
		ErrSurvive, r, counted.Names(names, "tenant", 10))
}
