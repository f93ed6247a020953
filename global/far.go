package global

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"strings"
)

// Far tenants (docs/regions.md, "Far tenants"): a client uses its own
// region's routers for everything, so a region's routers know every
// tenant with a copy in their region, wherever its primary lives. A
// region's far tenants are those homed in another region (their primary
// on a node of another region) with a read copy, or a survive-region
// voting copy, on a node of the region. The region's directory holds a
// read-only copy of each one's record, and of the record of the node its
// primary is on: what a router needs to forward its writes and unbounded
// reads to the primary, and its bounded reads to the copy in the region
// (whose node record is the region's own). Quotas are not copied: a
// router forwards by the tenant's record and its node's alone.
//
// Why under prefixes of their own (PrefixFarTenants, PrefixFarNodes)
// rather than among the region's records: everything under nodes/ and
// tenants/ of a region's directory is the region's to lease, probe,
// repair, fail over, move, hand off and copy up to the global directory
// while the region leases itself. A far tenant is none of those: its
// placement is its home region's, changed only where that region's
// records are owned, and its primary's node is leased by its home
// region's side. Kept apart, no job of the region sees them (the View
// keeps them apart too: View.FarTenant, View.FarNode), the up-mirror
// never copies them (they are not mirrored records), and a region cannot
// write the global directory's records of another region by mistake. The
// link copies them down from the global directory on every step, whichever
// side leases the region, and never up; a change the region's own routers
// are asked for is refused, naming the global tier.

// Far copies region Region's far records from the global directory (or
// records held of it) into the region's directory.
type Far struct {
	// Region is the region whose directory is written.
	Region string
}

// Sync reads both directories whole and makes to's far records exactly
// those from names for the region: records that differ are written,
// records no longer far removed, each write conditioned on the record of
// to as read (and on whatever to is fenced and guarded on). A lost race
// is ErrConflict: call Sync again.
func (f Far) Sync(ctx context.Context, from Directory, to *Store) (MirrorResult, error) {
	kvs, rev, err := from.List(ctx, "")
	if err != nil {
		return MirrorResult{}, fmt.Errorf("far records: read the global directory: %w", err)
	}
	want, err := PickFar(kvs, f.Region)
	if err != nil {
		return MirrorResult{}, err
	}
	have := map[string]KV{}
	for _, p := range []string{PrefixFarTenants, PrefixFarNodes} {
		got, _, err := to.dir.List(ctx, p)
		if err != nil {
			return MirrorResult{}, fmt.Errorf("far records: read the region's directory: %w", err)
		}
		for _, kv := range got {
			have[kv.Key] = kv
		}
	}
	keys := func(yield func(string) bool) {
		for k := range want {
			if !yield(k) {
				return
			}
		}
		for k := range have {
			if _, dup := want[k]; !dup && !yield(k) {
				return
			}
		}
	}
	res := MirrorResult{Rev: rev}
	err = writeDiff(ctx, to, "far records: write the region's directory", keys, func(key string) ([]byte, bool) {
		v, ok := want[key]
		return v, ok
	}, func(key string) (KV, bool) {
		kv, ok := have[key]
		return kv, ok
	}, &res)
	return res, err
}

// SyncTracked is Sync from records held in memory, as a region's link
// holds them: src the global directory's, dst the region's, and only the
// far records the keys dirty names touch are looked at (all of them with
// dirty.All): a tenant's record touches its far record and those of the
// nodes its primary was and is on; a node's record, its far record and
// those of the tenants on it or with a copy on it. A dst behind the
// region's directory makes a write ErrConflict, never a lost one. The
// result's Written are the region directory's revisions of the writes;
// dirty is left as it was (the link's mirror sync resets it).
func (f Far) SyncTracked(ctx context.Context, to *Store, src, dst *Tracked, dirty *Dirty) (MirrorResult, error) {
	res := MirrorResult{Rev: src.Rev()}
	err := writeDiff(ctx, to, "far records: write the region's directory", f.touched(src, dst, dirty), func(key string) ([]byte, bool) {
		return src.far(key, f.Region)
	}, dst.Get, &res)
	return res, err
}

// touched yields, once each, the far keys a sync of dirty looks at.
func (f Far) touched(src, dst *Tracked, dirty *Dirty) iter.Seq[string] {
	return func(yield func(string) bool) {
		seen := map[string]bool{}
		emit := func(key string) bool {
			if seen[key] {
				return true
			}
			seen[key] = true
			return yield(key)
		}
		tenant := func(t string) bool {
			if !emit(FarTenantKey(t)) {
				return false
			}
			if n, ok := src.tenantNode[t]; ok && !emit(FarNodeKey(n)) {
				return false
			}
			if n, ok := farTenantNode(dst, t); ok && !emit(FarNodeKey(n)) {
				return false
			}
			return true
		}
		if dirty.all {
			for t := range src.copiesOf {
				if !tenant(t) {
					return
				}
			}
			for key := range dst.kvs {
				if strings.HasPrefix(key, PrefixFarTenants) || strings.HasPrefix(key, PrefixFarNodes) {
					if _, _, ok := splitKey(key); ok && !emit(key) {
						return
					}
				}
			}
			return
		}
		for key := range dirty.keys {
			kind, name, _ := splitKey(key)
			switch kind {
			case PrefixTenants, PrefixFarTenants:
				if !tenant(name) {
					return
				}
			case PrefixFarNodes:
				if !emit(key) {
					return
				}
			case PrefixNodes:
				if !emit(FarNodeKey(name)) {
					return
				}
				for _, idx := range []map[string]map[string]struct{}{src.byNode, src.byCopy} {
					for t := range idx[name] {
						if !tenant(t) {
							return
						}
					}
				}
			}
		}
	}
}

// farTenantNode is the node far tenant t's record names in the region's
// directory as held (the primary it was copied with).
func farTenantNode(dst *Tracked, t string) (string, bool) {
	kv, ok := dst.kvs[FarTenantKey(t)]
	if !ok {
		return "", false
	}
	var rec struct {
		Node string `json:"node"`
	}
	if json.Unmarshal(kv.Value, &rec) != nil || rec.Node == "" {
		return "", false
	}
	return rec.Node, true
}

// far is the value key, a far key of region r's directory, is to hold,
// from the global directory's records as held: tenant t's record while t
// is far for r, node n's while some far tenant of r has its primary on n.
func (t *Tracked) far(key, r string) ([]byte, bool) {
	kind, name, ok := splitKey(key)
	if !ok {
		return nil, false
	}
	switch kind {
	case PrefixFarTenants:
		kv, ok := t.kvs[TenantKey(name)]
		return kv.Value, ok && t.farFor(name, r)
	case PrefixFarNodes:
		kv, ok := t.kvs[NodeKey(name)]
		return kv.Value, ok && t.nodeRegion[name] != r && t.withCopyIn[name][r] > 0
	}
	return nil, false
}

// count adds tenant, indexed, to withCopyIn: one on its node for each
// region its copies are in.
func (t *Tracked) count(tenant string) {
	node := t.tenantNode[tenant]
	var regions []string
	for _, c := range t.copiesOf[tenant] {
		if r, ok := t.nodeRegion[c]; ok && !slices.Contains(regions, r) {
			regions = append(regions, r)
		}
	}
	if len(regions) == 0 {
		return
	}
	t.copyRegions[tenant] = regions
	in := t.withCopyIn[node]
	if in == nil {
		in = map[string]int{}
		t.withCopyIn[node] = in
	}
	for _, r := range regions {
		in[r]++
	}
}

// uncount takes tenant out of withCopyIn, as count put it in.
func (t *Tracked) uncount(tenant string) {
	regions, ok := t.copyRegions[tenant]
	if !ok {
		return
	}
	delete(t.copyRegions, tenant)
	node := t.tenantNode[tenant]
	in := t.withCopyIn[node]
	for _, r := range regions {
		if in[r]--; in[r] <= 0 {
			delete(in, r)
		}
	}
	if len(in) == 0 {
		delete(t.withCopyIn, node)
	}
}

// regionOfNodeKey is the region held for the node key names, if it is a
// node's and one is held.
func (t *Tracked) regionOfNodeKey(key string) (string, bool) {
	kind, name, ok := splitKey(key)
	if !ok || kind != PrefixNodes {
		return "", false
	}
	r, ok := t.nodeRegion[name]
	return r, ok
}

// nodeMoved counts again the tenants with a copy on the node key names
// when its region is no longer the one it was (before, had).
func (t *Tracked) nodeMoved(key, before string, had bool) {
	now, has := t.regionOfNodeKey(key)
	if now == before && has == had {
		return
	}
	_, name, _ := splitKey(key)
	for tenant := range t.byCopy[name] {
		t.uncount(tenant)
		t.count(tenant)
	}
}

// farFor says whether tenant is far for region r: its primary is not on a
// node of r, and one of its copies is.
func (t *Tracked) farFor(tenant, r string) bool {
	copies := t.copiesOf[tenant]
	if len(copies) == 0 || t.nodeRegion[t.tenantNode[tenant]] == r {
		return false
	}
	for _, n := range copies {
		if t.nodeRegion[n] == r {
			return true
		}
	}
	return false
}

// PickFar picks region r's far records from a whole global directory's
// records, keyed as the region's directory holds them: the record of
// every tenant whose primary is not on a node of r with a read copy or
// its replica on one, and the record of each such tenant's primary's
// node.
func PickFar(kvs []KV, r string) (map[string][]byte, error) {
	nodes := map[string]KV{}
	regionOf := map[string]string{}
	var tenants []KV
	for _, kv := range kvs {
		kind, name, ok := splitKey(kv.Key)
		if !ok {
			continue
		}
		switch kind {
		case PrefixNodes:
			var n Node
			if err := json.Unmarshal(kv.Value, &n); err != nil {
				return nil, fmt.Errorf("far records: %s: %w: %w", kv.Key, ErrInvalidRecord, err)
			}
			nodes[name], regionOf[name] = kv, n.Region
		case PrefixTenants:
			tenants = append(tenants, kv)
		}
	}
	want := map[string][]byte{}
	for _, kv := range tenants {
		var t Tenant
		if err := json.Unmarshal(kv.Value, &t); err != nil {
			return nil, fmt.Errorf("far records: %s: %w: %w", kv.Key, ErrInvalidRecord, err)
		}
		if regionOf[t.Node] == r {
			continue
		}
		copies := t.ReadCopies.Names()
		if t.Replica != "" {
			copies = append(copies, t.Replica)
		}
		for _, c := range copies {
			if regionOf[c] == r {
				want[FarTenantKey(strings.TrimPrefix(kv.Key, PrefixTenants))] = kv.Value
				if n, ok := nodes[t.Node]; ok {
					want[FarNodeKey(t.Node)] = n.Value
				}
				break
			}
		}
	}
	return want, nil
}

// writeDiff writes to the keys yields whose value want differs from what
// have holds (a put, or a delete of a key want lacks), in transactions of
// at most mirrorBatch writes, each conditioned on the revision have holds,
// counting them in res; a failed write's error starts with what. The
// mirror and the far records both sync by it.
func writeDiff(ctx context.Context, to *Store, what string, keys iter.Seq[string], want func(string) ([]byte, bool),
	have func(string) (KV, bool), res *MirrorResult) error {
	var conds []Cond
	var ops []Op
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		tx := to.Txn()
		tx.conds, tx.ops = append(tx.conds, conds...), ops
		rev, err := tx.Commit(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		res.Written = append(res.Written, rev)
		conds, ops = nil, nil
		return nil
	}
	for key := range keys {
		w, wok := want(key)
		h, hok := have(key)
		switch {
		case wok && hok && bytes.Equal(w, h.Value), !wok && !hok:
			continue
		case wok:
			res.Put++
			conds, ops = append(conds, IfModRev(key, h.ModRev)), append(ops, OpPut(key, w))
		default:
			res.Deleted++
			conds, ops = append(conds, IfModRev(key, h.ModRev)), append(ops, OpDelete(key))
		}
		if len(ops) == mirrorBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}
