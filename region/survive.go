package region

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/fenec-go/fenec/global"
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

// ErrSurvive: a tenant's survival cannot be set or kept as asked (409).
var ErrSurvive = errors.New("survival refused")

// surviveBody is PUT /_shard/tenants/<t>/survive.
type surviveBody struct {
	Survive string `json:"survive"`
	// Copy names the node of another region to hold the voting copy of a
	// tenant set to survive its region (none: the router picks one).
	Copy string `json:"copy"`
}

// surviveAnswer is what the PUT answers.
type surviveAnswer struct {
	Tenant  string `json:"tenant"`
	Survive string `json:"survive"`
	Node    string `json:"node"`
	Replica string `json:"replica"`
}

// putSurvive sets tenant name's survival: to region, its voting copy is
// made on a node of another region first (the copy it had is deleted
// once the new one follows), then the record says so; to zone, the
// record says so first, then its copy comes home to its region.
func (c *shardCall) putSurvive(s *global.Store, name string) (int, any, error) {
	if c.rt.mirroring() {
		return 0, nil, fmt.Errorf("%w: a tenant's survival is set on the global tier's leading router", ErrMirrored)
	}
	var body surviveBody
	if err := c.decode(&body); err != nil {
		return 0, nil, err
	}
	if body.Survive != global.SurviveZone && body.Survive != global.SurviveRegion {
		return 0, nil, fmt.Errorf(`%w: "survive" is "zone" (its copy in its own region) or "region" (its copy in another region, to outlive its region's loss)`, ErrBadRequest)
	}
	if body.Copy != "" && (body.Survive != global.SurviveRegion || !global.ValidName(body.Copy)) {
		return 0, nil, fmt.Errorf(`%w: "copy" names a node of another region, with "survive": "region" only`, ErrBadRequest)
	}
	ctx := c.r.Context()
	c.rt.opMu.Lock()
	defer c.rt.opMu.Unlock()
	at, err := s.GetTenant(ctx, name)
	if err != nil {
		return 0, nil, errNotFoundAs(err, ErrUnknownTenant)
	}
	if at.Value.HeldBy != "" {
		return 0, nil, &heldError{tenant: name, by: at.Value.HeldBy}
	}
	if body.Survive == global.SurviveRegion {
		if err := c.rt.globallyLeased(ctx, s, at.Value.Node); err != nil {
			return 0, nil, fmt.Errorf("%w: tenant %s: %w", ErrSurvive, name, err)
		}
		target := body.Copy
		if target == "" {
			t := at.Value
			t.Survive = global.SurviveRegion
			if target, err = c.rt.pickReplica(ctx, s, t, true); err != nil {
				return 0, nil, err
			}
			if target == "" {
				return 0, nil, fmt.Errorf("%w: no node of another region leased by the global tier can hold %s's copy: record one, or name it (\"copy\")", ErrSurvive, name)
			}
		}
		if err := c.rt.checkRegionCopy(ctx, s, at.Value, target); err != nil {
			return 0, nil, err
		}
		if at.Value.Replica != target {
			if err := c.rt.addReplica(ctx, s, name, target); err != nil {
				return 0, nil, err
			}
		}
	}
	now, err := s.GetTenant(ctx, name)
	if err != nil {
		return 0, nil, err
	}
	rec, err := s.UpdateTenant(ctx, name, now, func(t *global.Tenant) error {
		if body.Survive == global.SurviveZone {
			t.Survive = ""
		} else {
			t.Survive = global.SurviveRegion
		}
		return nil
	})
	if err != nil {
		return 0, nil, fmt.Errorf("record %s's survival: %w", name, err)
	}
	c.settle(rec.Rev)
	if body.Survive == global.SurviveZone {
		c.rt.homeCopy(ctx, s, name)
	}
	c.rt.log.Info("tenant survival set", "tenant", name, "survive", body.Survive, "replica", rec.Value.Replica)
	return http.StatusOK, surviveAnswer{Tenant: name, Survive: body.Survive, Node: rec.Value.Node, Replica: rec.Value.Replica}, nil
}

// checkRegionCopy refuses target as the voting copy of t, a tenant to
// survive its region: it must be a recorded node of another region than
// t's primary, leased by the global tier, holding no other copy of t.
func (rt *Router) checkRegionCopy(ctx context.Context, s *global.Store, t global.Tenant, target string) error {
	node, err := s.GetNode(ctx, target)
	if err != nil {
		return errNotFoundAs(err, ErrUnknownNode)
	}
	primary, err := s.GetNode(ctx, t.Node)
	if err != nil {
		return errNotFoundAs(err, ErrUnknownNode)
	}
	switch {
	case target == t.Node:
		return fmt.Errorf("%w: %s is the tenant's primary: name a node of another region", ErrSurvive, target)
	case node.Value.Region == primary.Value.Region:
		return fmt.Errorf("%w: %s is in the tenant's own region %q: a copy there does not outlive it; name a node of another region", ErrSurvive, target, node.Value.Region)
	case t.ReadCopies.Has(target):
		return fmt.Errorf("%w: %s holds the tenant's read copy, which is never promoted: drop it first, or name another node", ErrSurvive, target)
	}
	if err := rt.globallyLeased(ctx, s, target); err != nil {
		return fmt.Errorf("%w: %w", ErrSurvive, err)
	}
	return nil
}

// homeCopy brings the voting copy of tenant name, set to survive its zone
// only, back into its primary's region, where the router would place it;
// one that cannot be made is left to the repair (the copy it has stays).
func (rt *Router) homeCopy(ctx context.Context, s *global.Store, name string) {
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
	target, err := rt.pickReplica(ctx, s, at.Value, true)
	if err != nil || target == "" {
		rt.log.Warn("the copy of a tenant set to survive its zone stays in another region: no node of its own region can take it", "tenant", name, "replica", at.Value.Replica, "err", err)
		return
	}
	if err := rt.addReplica(ctx, s, name, target); err != nil {
		rt.log.Warn("copy not brought home", "tenant", name, "target", target, "err", err)
	}
}

// regionCandidates filters the nodes a copy of t may go to when t is to
// survive its region: nodes of other regions than primary's, leased by
// the global tier, neither standbys nor holding t's read copies.
func (rt *Router) regionCandidates(ctx context.Context, s *global.Store, t global.Tenant, primary global.Node, nodes map[string]global.Versioned[global.Node]) map[string]int {
	out := map[string]int{}
	owned := map[string]bool{}
	for name, n := range nodes {
		if name == t.Node || n.Value.Standby || n.Value.Region == primary.Region || t.ReadCopies.Has(name) {
			continue
		}
		ok, seen := owned[n.Value.Region]
		if !seen {
			_, err := rt.own(ctx, s, n.Value.Region)
			ok = err == nil
			owned[n.Value.Region] = ok
		}
		if ok {
			out[name] = 0
		}
	}
	return out
}

// refuseRegionalLeasing refuses a handoff of region r to its own leasing
// while tenants that must survive their region live in it, or keep their
// copy there: nobody outside a region that leases itself can fail its
// tenants over, so they would survive its loss no more.
func refuseRegionalLeasing(ctx context.Context, s *global.Store, r string) error {
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
		ErrSurvive, r, countedNames(names, "tenant", 10))
}
