package copies

import (
	"context"
	"fmt"

	"github.com/fenec-go/fenec/global"
)

// Read copies by region ({"regions": ["us", "ap"]} on PUT
// /_shard/tenants/<t>/read-copies): one read copy in each region named,
// on the node the router picks there — the copy the tenant has in that
// region already, else the node of the region with the fewest bytes on
// disk among those that can hold one (recorded taking leases, not a
// standby, not recorded lapsed, not holding the tenant already). Copies
// in regions not named are dropped, as with nodes.

// ByRegion picks, for tenant name (its record t), the node of each region
// of regions to hold its read copy, among nodes (the directory's): a
// region with no node that can hold one is ErrReadCopy. The router has
// checked that each region is known and not the tenant's own.
func (c *Copies) ByRegion(ctx context.Context, s *global.Store, name string, t global.Tenant, regions []string, nodes map[string]global.Versioned[global.Node]) ([]string, error) {
	want := []string{}
	for _, r := range regions {
		n, err := c.regionNode(ctx, s, name, t, r, nodes)
		if err != nil {
			return nil, err
		}
		want = append(want, n)
	}
	return want, nil
}

// regionNode is the node of region r to hold tenant name's read copy: the
// one already holding it there, else the fittest node of r.
func (c *Copies) regionNode(ctx context.Context, s *global.Store, name string, t global.Tenant, r string, nodes map[string]global.Versioned[global.Node]) (string, error) {
	for _, n := range t.ReadCopies.Names() {
		if rec, ok := nodes[n]; ok && rec.Value.Region == r && rec.Value.Lapsed.IsZero() {
			return n, nil
		}
	}
	if _, err := c.deps.Own(ctx, s, r); err != nil {
		return "", fmt.Errorf("%w: region %s is not leased by the global tier, which places read copies: %w", ErrReadCopy, r, err)
	}
	cands := readCandidates(t, r, nodes)
	if len(cands) == 0 {
		return "", fmt.Errorf("%w: region %s has no node that can hold a read copy of %s (one taking leases, not a standby, not lapsed, not holding %s already): record one there (PUT /_shard/nodes/<n> {\"region\": %q, ...}, started with --lease), or name a node ({\"nodes\": [...]})",
			ErrReadCopy, r, name, name, r)
	}
	n, err := c.deps.Fittest(ctx, cands)
	if err != nil {
		return "", fmt.Errorf("%w: region %s: no node there answered its sizes: bring one back, or name a node ({\"nodes\": [...]}): %w", ErrReadCopy, r, err)
	}
	return n, nil
}

// readCandidates are the nodes of region r that can hold a read copy of
// t: recorded taking leases, not a standby, not recorded lapsed, usable
// by the router, holding no other copy of t.
func readCandidates(t global.Tenant, r string, nodes map[string]global.Versioned[global.Node]) map[string]global.Node {
	cands := map[string]global.Node{}
	for n, rec := range nodes {
		v := rec.Value
		if v.Region != r || !v.Lease || v.Standby || !v.Lapsed.IsZero() || global.UsableNode(v) != nil ||
			n == t.Node || n == t.Replica || n == t.Target {
			continue
		}
		cands[n] = v
	}
	return cands
}
