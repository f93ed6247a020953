package global

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"iter"
	"maps"
	"slices"
	"strings"
	"sync"
)

// viewShards splits a view's tenants so that a change copies one shard's
// map, not every tenant's.
const viewShards = 256

var shardSeed = maphash.MakeSeed()

// View is an immutable copy of a directory at one revision, as a Watcher
// holds it. Its methods are safe for concurrent use; it never changes once
// published.
type View struct {
	Rev           int64  // the directory's revision this view is current to
	Term          uint64 // the directory's term (0: none yet)
	Leader        Leader // zero when no router leads
	LeaseRecordMS int64  // longest-lease record (0: none)

	regions map[string]Region
	nodes   map[string]Node
	quotas  map[string]Quota
	tenants [viewShards]map[string]Tenant
	byNode  *nodeIndex // built on first use

	// farTenants and farNodes are a region's directory's copies of far
	// records (far.go): kept apart from the region's own, so nothing that
	// leases, repairs or places the region's tenants sees them.
	farTenants map[string]Tenant
	farNodes   map[string]Node
}

// nodeIndex is a view's tenants by primary node, built once per view.
type nodeIndex struct {
	once sync.Once
	m    map[string][]string
}

// TenantsOn returns the names of the tenants whose primary is on node, sorted.
// The first call on a view scans it once; the slice is shared: do not
// modify it.
func (v *View) TenantsOn(node string) []string {
	v.byNode.once.Do(func() {
		m := map[string][]string{}
		for name, t := range v.Tenants() {
			m[t.Node] = append(m[t.Node], name)
		}
		for _, names := range m {
			slices.Sort(names)
		}
		v.byNode.m = m
	})
	return v.byNode.m[node]
}

func shardOf(name string) int {
	return int(maphash.String(shardSeed, name) % viewShards)
}

// Tenant returns tenant name's record.
func (v *View) Tenant(name string) (Tenant, bool) {
	t, ok := v.tenants[shardOf(name)][name]
	return t, ok
}

// Node returns node name's record.
func (v *View) Node(name string) (Node, bool) {
	n, ok := v.nodes[name]
	return n, ok
}

// FarTenant returns far tenant name's record: a tenant homed in another
// region with a copy in this directory's region (far.go).
func (v *View) FarTenant(name string) (Tenant, bool) {
	t, ok := v.farTenants[name]
	return t, ok
}

// FarNode returns far node name's record: the node of a far tenant's
// primary.
func (v *View) FarNode(name string) (Node, bool) {
	n, ok := v.farNodes[name]
	return n, ok
}

// FarTenants returns every far tenant's name and record, in no order.
func (v *View) FarTenants() iter.Seq2[string, Tenant] { return maps.All(v.farTenants) }

// NumFarTenants returns how many far tenants the view holds.
func (v *View) NumFarTenants() int { return len(v.farTenants) }

// Region returns region name's record.
func (v *View) Region(name string) (Region, bool) {
	r, ok := v.regions[name]
	return r, ok
}

// RegionRecord is region r's record, or, where v has none, that of a
// region the global tier leases (how a region starts out).
func (v *View) RegionRecord(r string) Region {
	if rec, ok := v.Region(r); ok {
		return rec
	}
	return Region{Name: r, Leaser: LeaserGlobal}
}

// Quota returns tenant name's quota.
func (v *View) Quota(name string) (Quota, bool) {
	q, ok := v.quotas[name]
	return q, ok
}

// Tenants yields every tenant, in no order.
func (v *View) Tenants() iter.Seq2[string, Tenant] {
	return func(yield func(string, Tenant) bool) {
		for _, shard := range v.tenants {
			for name, t := range shard {
				if !yield(name, t) {
					return
				}
			}
		}
	}
}

// NumTenants returns how many tenants the view holds.
func (v *View) NumTenants() int {
	n := 0
	for _, shard := range v.tenants {
		n += len(shard)
	}
	return n
}

// Nodes yields every node, in no order.
func (v *View) Nodes() iter.Seq2[string, Node] { return maps.All(v.nodes) }

// Regions yields every region, in no order.
func (v *View) Regions() iter.Seq2[string, Region] { return maps.All(v.regions) }

// Quotas yields every quota by tenant, in no order.
func (v *View) Quotas() iter.Seq2[string, Quota] { return maps.All(v.quotas) }

// emptyView returns a view with no records.
func emptyView() *View {
	v := &View{regions: map[string]Region{}, nodes: map[string]Node{}, quotas: map[string]Quota{}, byNode: new(nodeIndex),
		farTenants: map[string]Tenant{}, farNodes: map[string]Node{}}
	for i := range v.tenants {
		v.tenants[i] = map[string]Tenant{}
	}
	return v
}

// viewBuilder makes the next view from the last one, copying only the maps
// a batch of events touches, and records the tenant changes it makes.
type viewBuilder struct {
	old, v  *View
	copied  map[any]bool
	changes []TenantChange
	bad     []string // keys whose value could not be decoded
}

func newViewBuilder(old *View) *viewBuilder {
	v := *old
	v.byNode = new(nodeIndex)
	return &viewBuilder{old: old, v: &v, copied: map[any]bool{}}
}

// cow returns m, copied first if this builder has not copied it yet.
func cow[V any](b *viewBuilder, id any, m *map[string]V) map[string]V {
	if !b.copied[id] {
		*m = maps.Clone(*m)
		if *m == nil {
			*m = map[string]V{}
		}
		b.copied[id] = true
	}
	return *m
}

type tenantShard int

// apply sets key to value (deleted when value is nil) at rev.
func (b *viewBuilder) apply(key string, value []byte, deleted bool, rev int64) {
	kind, name, ok := splitKey(key)
	if !ok {
		return
	}
	if rev > b.v.Rev {
		b.v.Rev = rev
	}
	switch kind {
	case KeyTerm:
		b.v.Term = 0
		b.decode(key, value, deleted, &b.v.Term)
	case KeyLeader:
		b.v.Leader = Leader{}
		b.decode(key, value, deleted, &b.v.Leader)
	case KeyLeaseRecord:
		b.v.LeaseRecordMS = 0
		b.decode(key, value, deleted, &b.v.LeaseRecordMS)
	case PrefixRegions:
		setRecord(b, cow(b, kind, &b.v.regions), key, name, value, deleted)
	case PrefixNodes:
		setRecord(b, cow(b, kind, &b.v.nodes), key, name, value, deleted)
	case PrefixQuotas:
		setRecord(b, cow(b, kind, &b.v.quotas), key, name, value, deleted)
	case PrefixFarTenants:
		m := cow(b, kind, &b.v.farTenants)
		prev, had := m[name]
		setRecord(b, m, key, name, value, deleted)
		now, has := m[name]
		b.changed(name, rev, true, prev, had, now, has)
	case PrefixFarNodes:
		setRecord(b, cow(b, kind, &b.v.farNodes), key, name, value, deleted)
	case PrefixTenants:
		i := shardOf(name)
		m := cow(b, tenantShard(i), &b.v.tenants[i])
		prev, had := m[name]
		setRecord(b, m, key, name, value, deleted)
		now, has := m[name]
		b.changed(name, rev, false, prev, had, now, has)
	}
}

// changed records a tenant's change from prev (had) to now (has), if it
// is one; far: of a far tenant's record.
func (b *viewBuilder) changed(name string, rev int64, far bool, prev Tenant, had bool, now Tenant, has bool) {
	if had == has && prev == now {
		return
	}
	c := TenantChange{Name: name, Rev: rev, Far: far}
	if had {
		c.Old = &prev
	}
	if has {
		c.New = &now
	}
	b.changes = append(b.changes, c)
}

// decode parses value into dst; a bad value leaves dst zero and is noted.
func (b *viewBuilder) decode(key string, value []byte, deleted bool, dst any) bool {
	if deleted {
		return false
	}
	if err := json.Unmarshal(value, dst); err != nil {
		b.bad = append(b.bad, key)
		return false
	}
	return true
}

// setRecord puts name's decoded value in m, or removes it (deleted, or a
// value that does not decode: the router then treats it as absent).
func setRecord[V any](b *viewBuilder, m map[string]V, key, name string, value []byte, deleted bool) {
	var r V
	if !b.decode(key, value, deleted, &r) {
		delete(m, name)
		return
	}
	m[name] = r
}

// diffTenants records, for a relist, every tenant that differs between the
// old view and the new one.
func (b *viewBuilder) diffTenants(rev int64) {
	for i := range viewShards {
		b.diff(b.old.tenants[i], b.v.tenants[i], rev, false)
	}
	b.diff(b.old.farTenants, b.v.farTenants, rev, true)
}

// diff records every tenant that differs between oldm and newm.
func (b *viewBuilder) diff(oldm, newm map[string]Tenant, rev int64, far bool) {
	for name, o := range oldm {
		n, ok := newm[name]
		b.changed(name, rev, far, o, true, n, ok)
	}
	for name, n := range newm {
		if _, ok := oldm[name]; !ok {
			b.changed(name, rev, far, Tenant{}, false, n, true)
		}
	}
}

// viewFromList builds a whole view from a list of the directory.
func viewFromList(kvs []KV, rev int64) (*View, []string) {
	b := newViewBuilder(emptyView())
	for _, kv := range kvs {
		b.apply(kv.Key, kv.Value, false, kv.ModRev)
	}
	b.v.Rev = rev
	return b.v, b.bad
}

// TenantChange is one tenant's record before and after a change the
// Watcher saw. Old is nil for a tenant created, New for one deleted. After a
// relist (the watch's history was compacted) the change spans everything
// missed in between.
type TenantChange struct {
	Name     string
	Old, New *Tenant
	Rev      int64
	// Far: the change is of a far tenant's record (a region's directory's
	// copy of a tenant of another region with a copy in it: far.go), not
	// of a tenant of the directory's own.
	Far bool
}

// FailedOver reports whether the change is a failover off a node (as
// opposed to a move or a placement): the new record names the node the
// tenant was on as the one a failover took it off.
func (c TenantChange) FailedOver() (from string, ok bool) {
	if c.Old == nil || c.New == nil || c.New.FailedFrom == "" {
		return "", false
	}
	if c.New.FailedFrom != c.Old.Node || c.New.Node == c.Old.Node {
		return "", false
	}
	return c.Old.Node, true
}

// String describes the change for logs.
func (c TenantChange) String() string {
	var sb strings.Builder
	sb.WriteString(c.Name)
	switch {
	case c.Old == nil && c.New != nil:
		sb.WriteString(": placed on " + c.New.Node)
	case c.New == nil:
		sb.WriteString(": removed")
	default:
		sb.WriteString(": " + c.Old.Node + " -> " + c.New.Node)
	}
	return sb.String()
}

// LoadView lists the whole directory once and returns it as a View (for a
// one-off read, such as an operator's; a router keeps a Watcher instead).
// Records that do not decode are left out and their keys returned.
func LoadView(ctx context.Context, d Directory) (*View, []string, error) {
	kvs, rev, err := d.List(ctx, "")
	if err != nil {
		return nil, nil, fmt.Errorf("load view: %w", err)
	}
	v, bad := viewFromList(kvs, rev)
	return v, bad, nil
}

// ViewOf is the View of a whole directory's records listed at rev (as
// List("") returns them). Records that do not decode are left out and
// their keys returned.
func ViewOf(kvs []KV, rev int64) (*View, []string) { return viewFromList(kvs, rev) }
