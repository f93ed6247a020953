package region

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/region/copies"
)

// A tenant's copies in other regions than its primary's — read copies, and
// the voting copy of a tenant to survive its region — are package
// region/copies', wired here over the router's node client, ownership,
// identity check, voting copies and view; PUT
// /_shard/tenants/<t>/read-copies and /survive check their bodies here
// and call into it.

// wireCopies builds the router's copies over its node client and its
// placement of voting copies (rt.repair, built first).
func (rt *Router) wireCopies() {
	rt.copies = copies.New(copies.Deps{
		Nodes:         rt.nodes,
		Own:           rt.sides.own,
		Apart:         rt.apart,
		Fittest:       fittest(rt),
		PickReplica:   rt.repair.PickReplica,
		AddReplica:    rt.repair.AddReplica,
		RecordLineage: rt.repair.RecordLineage,
		AwaitCopy:     rt.repair.AwaitCopy,
		RemoveStale:   rt.repair.RemoveStale,
		Settle:        rt.settleTo,
		UnknownNode:   func(err error) error { return errNotFoundAs(err, ErrUnknownNode) },
		UnknownTenant: func(err error) error { return errNotFoundAs(err, ErrUnknownTenant) },
		Held:          func(tenant, by string) error { return &heldError{tenant: tenant, by: by} },
		Log:           rt.log,
	})
}

// readCopiesBody is PUT /_shard/tenants/<t>/read-copies: the nodes that
// are to hold the tenant's read copies, all of them (an empty list drops
// every one), or the regions to hold one each (the router picks the node:
// copies.ByRegion).
type readCopiesBody struct {
	Nodes   *[]string `json:"nodes"`
	Regions *[]string `json:"regions"`
}

// putReadCopies sets tenant name's read copies to the nodes the body
// lists, or to one node of each region it lists (copies.Set).
func (c *shardCall) putReadCopies(s *global.Store, name string) (int, any, error) {
	if c.rt.sides.mirroring() {
		return 0, nil, fmt.Errorf("%w: read copies are set on the global tier's leading router", ErrMirrored)
	}
	var body readCopiesBody
	if err := c.decode(&body); err != nil {
		return 0, nil, err
	}
	switch {
	case body.Nodes != nil && body.Regions != nil:
		return 0, nil, fmt.Errorf(`%w: name the nodes to hold the tenant's read copies ({"nodes": ["us1"]}) or the regions to hold one each ({"regions": ["us"]}), not both`, ErrBadRequest)
	case body.Nodes == nil && body.Regions == nil:
		return 0, nil, fmt.Errorf(`%w: the body names the nodes to hold the tenant's read copies: {"nodes": ["us1"]}, or the regions to hold one each: {"regions": ["us"]} ({"nodes": []} drops them all)`, ErrBadRequest)
	}
	want, what := body.Nodes, "node"
	if body.Regions != nil {
		want, what = body.Regions, "region"
	}
	if err := checkNames(*want, what); err != nil {
		return 0, nil, err
	}
	ctx := c.r.Context()
	at, err := s.GetTenant(ctx, name)
	if err != nil {
		return 0, nil, errNotFoundAs(err, ErrUnknownTenant)
	}
	if err := c.rt.copies.GloballyLeased(ctx, s, at.Value.Node); err != nil {
		return 0, nil, fmt.Errorf("%w: tenant %s: %w", ErrReadCopy, name, err)
	}
	if body.Regions != nil {
		nodes, err := readCopyRegions(ctx, s, name, at.Value, *body.Regions)
		if err != nil {
			return 0, nil, err
		}
		byRegion, err := c.rt.copies.ByRegion(ctx, s, name, at.Value, *body.Regions, nodes)
		if err != nil {
			return 0, nil, err
		}
		want = &byRegion
	}
	ans, err := c.rt.copies.Set(ctx, s, name, at, *want)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, ans, nil
}

// checkNames refuses a list of read copies' nodes or regions that is too
// long, holds something not a name, or names one twice.
func checkNames(names []string, what string) error {
	if len(names) > global.MaxReadCopies {
		return fmt.Errorf("%w: %d read copies asked, at most %d", ErrBadRequest, len(names), global.MaxReadCopies)
	}
	for i, n := range names {
		if !global.ValidName(n) {
			return fmt.Errorf("%w: %s name %q is not a name", ErrBadRequest, what, n)
		}
		if slices.Contains(names[:i], n) {
			return fmt.Errorf("%w: %s %s listed twice", ErrBadRequest, what, n)
		}
	}
	return nil
}

// readCopyRegions refuses regions, those to hold tenant name's (its record
// t) read copies, that name a region no node or region record names (404,
// naming the known ones) or the tenant's own region (400); it answers the
// directory's nodes.
func readCopyRegions(ctx context.Context, s *global.Store, name string, t global.Tenant, regions []string) (map[string]global.Versioned[global.Node], error) {
	nodes, _, err := s.ListNodes(ctx)
	if err != nil {
		return nil, err
	}
	recs, _, err := s.ListRegions(ctx)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for r := range recs {
		known[r] = true
	}
	for _, n := range nodes {
		known[n.Value.Region] = true
	}
	home := nodes[t.Node].Value.Region
	for _, r := range regions {
		switch {
		case !known[r]:
			return nil, fmt.Errorf("%w: region %q: no node or region record names it; known regions: %s", ErrUnknownRegion, r,
				strings.Join(slices.Sorted(maps.Keys(known)), ", "))
		case r == home:
			return nil, fmt.Errorf("%w: region %s is tenant %s's home region, where its primary and voting copy serve its readers: a read copy serves readers of another region; name other regions", ErrBadRequest, r, name)
		}
	}
	return nodes, nil
}

// surviveBody is PUT /_shard/tenants/<t>/survive.
type surviveBody struct {
	Survive string `json:"survive"`
	// Copy names the node of another region to hold the voting copy of a
	// tenant set to survive its region (none: the router picks one).
	Copy string `json:"copy"`
}

// putSurvive sets tenant name's survival (copies.SetSurvive), under the
// operations' lock.
func (c *shardCall) putSurvive(s *global.Store, name string) (int, any, error) {
	if c.rt.sides.mirroring() {
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
	c.rt.opMu.Lock()
	defer c.rt.opMu.Unlock()
	ans, err := c.rt.copies.SetSurvive(c.r.Context(), s, name, body.Survive, body.Copy)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, ans, nil
}
