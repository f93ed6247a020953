package global

import (
	"encoding/json"
	"iter"
	"maps"
)

// Tracked is a whole directory's records in memory as a mirror follows
// them: listed once (NewTracked), then kept current by applying its
// watch's responses (Apply), each of which names the keys it changed. It
// indexes what the mirror picks a region's records by — each node's
// region, each tenant's node and the tenants on each node — so a change
// is mapped to the records it touches without a scan. A Tracked is not
// safe for concurrent use: one goroutine (a region's link) owns it.
type Tracked struct {
	kvs        map[string]KV
	rev        int64
	nodeRegion map[string]string              // node → its region
	tenantNode map[string]string              // tenant → its node
	byNode     map[string]map[string]struct{} // node → the tenants naming it
	copiesOf   map[string][]string            // tenant → the nodes of its copies (replica, read copies)
	byCopy     map[string]map[string]struct{} // node → the tenants with a copy on it
	// copyRegions and withCopyIn count, for far records (far.go), the
	// tenants on each node with a copy in each region, so whether a node
	// is a far tenant's costs a lookup, not a scan of its tenants.
	copyRegions map[string][]string       // tenant → its copies' regions, as counted in withCopyIn
	withCopyIn  map[string]map[string]int // node → region → the tenants on the node with a copy there
	bad         map[string]bool           // node and tenant records that do not decode
}

// NewTracked holds kvs, a whole directory as List("") returned it at rev.
func NewTracked(kvs []KV, rev int64) *Tracked {
	t := &Tracked{kvs: make(map[string]KV, len(kvs)), nodeRegion: map[string]string{},
		tenantNode: make(map[string]string, len(kvs)), byNode: map[string]map[string]struct{}{},
		copiesOf: map[string][]string{}, byCopy: map[string]map[string]struct{}{},
		copyRegions: map[string][]string{}, withCopyIn: map[string]map[string]int{}, bad: map[string]bool{}}
	for _, kv := range kvs {
		t.set(kv)
	}
	t.rev = rev
	return t
}

// Rev is the directory's revision the records are current to.
func (t *Tracked) Rev() int64 { return t.rev }

// Len is how many records it holds.
func (t *Tracked) Len() int { return len(t.kvs) }

// Get returns key's record as held.
func (t *Tracked) Get(key string) (KV, bool) {
	kv, ok := t.kvs[key]
	return kv, ok
}

// Keys yields every key held, in no order.
func (t *Tracked) Keys() iter.Seq[string] { return maps.Keys(t.kvs) }

// Apply folds in one watch response and calls changed with each key it
// changed and the revision of the change. An event older than the revision held is skipped (a watch
// opened again from an earlier revision sends it again); one of the
// revision held is applied again, which changes nothing.
func (t *Tracked) Apply(r WatchResponse, changed func(key string, rev int64)) {
	for _, ev := range r.Events {
		if ev.KV.ModRev < t.rev {
			continue
		}
		if ev.Type == EventDelete {
			t.del(ev.KV.Key)
		} else {
			t.set(ev.KV)
		}
		t.rev = max(t.rev, ev.KV.ModRev)
		if changed != nil {
			changed(ev.KV.Key, ev.KV.ModRev)
		}
	}
	t.rev = max(t.rev, r.Revision)
}

// set holds kv, indexing a node's region and a tenant's node.
func (t *Tracked) set(kv KV) {
	reg, had := t.regionOfNodeKey(kv.Key)
	t.unindex(kv.Key)
	t.kvs[kv.Key] = kv
	t.index(kv)
	t.nodeMoved(kv.Key, reg, had)
}

// index indexes kv, held already.
func (t *Tracked) index(kv KV) {
	kind, name, ok := splitKey(kv.Key)
	if !ok {
		return
	}
	switch kind {
	case PrefixNodes:
		var n struct {
			Region string `json:"region"`
		}
		if err := json.Unmarshal(kv.Value, &n); err != nil {
			t.bad[kv.Key] = true
			return
		}
		t.nodeRegion[name] = n.Region
	case PrefixTenants:
		var rec struct {
			Node       string   `json:"node"`
			Replica    string   `json:"replica"`
			ReadCopies NodeList `json:"read_copies"`
		}
		if err := json.Unmarshal(kv.Value, &rec); err != nil {
			t.bad[kv.Key] = true
			return
		}
		t.tenantNode[name] = rec.Node
		addTo(t.byNode, rec.Node, name)
		copies := rec.ReadCopies.Names()
		if rec.Replica != "" {
			copies = append(copies, rec.Replica)
		}
		if len(copies) > 0 {
			t.copiesOf[name] = copies
			for _, n := range copies {
				addTo(t.byCopy, n, name)
			}
			t.count(name)
		}
	}
}

// addTo adds tenant to idx[node].
func addTo(idx map[string]map[string]struct{}, node, tenant string) {
	on := idx[node]
	if on == nil {
		on = map[string]struct{}{}
		idx[node] = on
	}
	on[tenant] = struct{}{}
}

// removeFrom removes tenant from idx[node].
func removeFrom(idx map[string]map[string]struct{}, node, tenant string) {
	if on := idx[node]; on != nil {
		delete(on, tenant)
		if len(on) == 0 {
			delete(idx, node)
		}
	}
}

func (t *Tracked) del(key string) {
	reg, had := t.regionOfNodeKey(key)
	t.unindex(key)
	delete(t.kvs, key)
	t.nodeMoved(key, reg, had)
}

// unindex forgets what the index holds of key's record.
func (t *Tracked) unindex(key string) {
	delete(t.bad, key)
	kind, name, ok := splitKey(key)
	if !ok {
		return
	}
	switch kind {
	case PrefixNodes:
		delete(t.nodeRegion, name)
	case PrefixTenants:
		t.uncount(name)
		for _, n := range t.copiesOf[name] {
			removeFrom(t.byCopy, n, name)
		}
		delete(t.copiesOf, name)
		node, had := t.tenantNode[name]
		if !had {
			return
		}
		delete(t.tenantNode, name)
		removeFrom(t.byNode, node, name)
	}
}

// tenantsOn yields the tenants naming node.
func (t *Tracked) tenantsOn(node string) iter.Seq[string] { return maps.Keys(t.byNode[node]) }

// ofRegion says whether key is one of region r's records as this
// directory holds them (pickKVs, for one key): a node of r, a tenant on
// one, that tenant's quota, and (leaseRecord) the longest-lease record.
func (t *Tracked) ofRegion(key, r string, leaseRecord bool) (KV, bool) {
	kv, ok := t.kvs[key]
	if !ok {
		return KV{}, false
	}
	kind, name, known := splitKey(key)
	if !known {
		return KV{}, false
	}
	switch kind {
	case KeyLeaseRecord:
		return kv, leaseRecord
	case PrefixNodes:
		reg, ok := t.nodeRegion[name]
		return kv, ok && reg == r
	case PrefixTenants:
		return kv, t.tenantOfRegion(name, r)
	case PrefixQuotas:
		_, placed := t.kvs[TenantKey(name)]
		return kv, placed && t.tenantOfRegion(name, r)
	}
	return KV{}, false
}

func (t *Tracked) tenantOfRegion(name, r string) bool {
	node, ok := t.tenantNode[name]
	if !ok {
		return false
	}
	reg, ok := t.nodeRegion[node]
	return ok && reg == r
}

// mirrored says whether key is a record the mirror copies (going down,
// the longest-lease record too).
func mirrored(key string, leaseRecord bool) bool {
	kind, _, ok := splitKey(key)
	if !ok {
		return false
	}
	switch kind {
	case PrefixNodes, PrefixTenants, PrefixQuotas:
		return true
	case KeyLeaseRecord:
		return leaseRecord
	}
	return false
}

// Dirty is the set of keys a mirror has to look at again: the keys the
// watches of either directory changed since the last sync, or all of them
// (after a directory was listed again, or the mirror's direction turned).
type Dirty struct {
	all  bool
	keys map[string]struct{}
}

// Mark adds key.
func (d *Dirty) Mark(key string) {
	if d.keys == nil {
		d.keys = map[string]struct{}{}
	}
	d.keys[key] = struct{}{}
}

// MarkAll has the next sync look at every key.
func (d *Dirty) MarkAll() { d.all = true }

// All says whether every key is to be looked at.
func (d *Dirty) All() bool { return d.all }

// Len is how many keys are marked (0 with All).
func (d *Dirty) Len() int { return len(d.keys) }

// Empty says whether nothing is to be looked at.
func (d *Dirty) Empty() bool { return !d.all && len(d.keys) == 0 }

// Reset empties the set.
func (d *Dirty) Reset() { d.all, d.keys = false, nil }

// Merge adds o's keys to d.
func (d *Dirty) Merge(o *Dirty) {
	if o.all {
		d.all = true
	}
	for k := range o.keys {
		d.Mark(k)
	}
}
