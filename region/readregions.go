package region

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/fenec-go/fenec/global"
)

// Read copies by region ({"regions": ["us", "ap"]} on PUT
// /_shard/tenants/<t>/read-copies): one read copy in each region named,
// on the node the router picks there — the copy the tenant has in that
// region already, else the node of the region with the fewest bytes on
// disk among those that can hold one (recorded taking leases, not a
// standby, not recorded lapsed, not holding the tenant already). Copies
// in regions not named are dropped, as with nodes.

// readCopyNodes picks, for tenant name (its record t), the node of each
// region of regions to hold its read copy, or refuses: a region no node
// or region record names (404, naming the known ones), the tenant's own
// region (400), a region with no node that can hold one (409).
func (rt *Router) readCopyNodes(ctx context.Context, s *global.Store, name string, t global.Tenant, regions []string) (*[]string, error) {
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
	want := []string{}
	for _, r := range regions {
		n, err := rt.readCopyNode(ctx, s, name, t, r, nodes)
		if err != nil {
			return nil, err
		}
		want = append(want, n)
	}
	return &want, nil
}

// readCopyNode is the node of region r to hold tenant name's read copy:
// the one already holding it there, else the fittest node of r.
func (rt *Router) readCopyNode(ctx context.Context, s *global.Store, name string, t global.Tenant, r string, nodes map[string]global.Versioned[global.Node]) (string, error) {
	for _, n := range t.ReadCopies.Names() {
		if rec, ok := nodes[n]; ok && rec.Value.Region == r && rec.Value.Lapsed.IsZero() {
			return n, nil
		}
	}
	if _, err := rt.own(ctx, s, r); err != nil {
		return "", fmt.Errorf("%w: region %s is not leased by the global tier, which places read copies: %w", ErrReadCopy, r, err)
	}
	cands := map[string]global.Node{}
	for n, rec := range nodes {
		v := rec.Value
		if v.Region != r || !v.Lease || v.Standby || !v.Lapsed.IsZero() || global.UsableNode(v) != nil ||
			n == t.Node || n == t.Replica || n == t.Target {
			continue
		}
		cands[n] = v
	}
	if len(cands) == 0 {
		return "", fmt.Errorf("%w: region %s has no node that can hold a read copy of %s (one taking leases, not a standby, not lapsed, not holding %s already): record one there (PUT /_shard/nodes/<n> {\"region\": %q, ...}, started with --lease), or name a node ({\"nodes\": [...]})",
			ErrReadCopy, r, name, name, r)
	}
	n, err := leastBytes(measureEach(ctx, rt.nodes, cands, rt.cfg.SizesParallel))
	if err != nil {
		return "", fmt.Errorf("%w: region %s: no node there answered its sizes: bring one back, or name a node ({\"nodes\": [...]}): %w", ErrReadCopy, r, err)
	}
	return n, nil
}
