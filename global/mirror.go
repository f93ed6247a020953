package global

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"strings"
)

// mirrorBatch bounds the writes of one mirror transaction (etcd refuses a
// transaction of more than 128 operations by default).
const mirrorBatch = 100

// mirroredPrefixes are the records the mirror copies between the global
// directory and a region's: the region's nodes, the tenants placed on
// them and their quotas. The region record is not among them: each side
// writes its own (handoff.go). The longest-lease record is copied down
// only, while the global tier leases the region: it is the longest lease
// the region's nodes may run, which the region's routers wait by, and
// what the region's router counts by when it takes the leasing over.
var mirroredPrefixes = []string{PrefixNodes, PrefixTenants, PrefixQuotas}

// Mirror copies one region's records (DESIGN.md §7, docs/regions.md)
// between the global directory and the region's own: down, from the
// global directory into the region's, while the global tier leases the
// region (its routers forward from that copy, so they go on forwarding
// while the global directory is unreachable); up, from the region's
// directory into the global one, while the region leases its nodes and
// owns its placements.
type Mirror struct {
	// From is the directory copied from: the global one going down, the
	// region's going up.
	From Directory
	// Region is the region copied.
	Region string
	// Up: From is the region's directory and the copy the global one.
	Up bool
}

// MirrorResult is what one Sync did.
type MirrorResult struct {
	// Rev is From's revision the copy was read at.
	Rev int64
	// Put and Deleted count the records written and removed.
	Put, Deleted int
	// Written are the copy's revisions of the transactions written, one
	// per batch (SyncTracked): the copy's watch shows them as changes.
	Written []int64
}

// Sync reads From once and makes to's records of the region exactly
// From's: records that differ are written, records no longer the region's
// removed, each batch conditioned on what it read of to (and on whatever
// to is fenced and guarded on: the term of a region's router, the region
// record of the side that owns it), so a router that lost the lead or the
// region writes nothing. Going down, every record of to under the
// mirrored prefixes is the region's; going up, to's records of the region
// are those its own nodes of the region name. A lost race is
// ErrConflict: call Sync again.
func (m Mirror) Sync(ctx context.Context, to *Store) (MirrorResult, error) {
	kvs, rev, err := m.From.List(ctx, "")
	if err != nil {
		return MirrorResult{}, fmt.Errorf("mirror: read the directory copied: %w", err)
	}
	return m.SyncListed(ctx, to, kvs, rev, nil)
}

// SyncListed is Sync over From's records as the caller listed them (all
// of them, at rev); toKVs, if not nil, are to's, listed whole by the
// caller too (a round trip saved across a wide-area link). Every write is
// still conditioned on the revision read.
func (m Mirror) SyncListed(ctx context.Context, to *Store, kvs []KV, rev int64, toKVs []KV) (MirrorResult, error) {
	want, err := pickRegion(kvs, m.Region, !m.Up)
	if err != nil {
		return MirrorResult{}, err
	}
	var have map[string]KV
	if toKVs != nil && m.Up {
		have, err = pickKVs(toKVs, m.Region, false)
	} else {
		have, err = m.have(ctx, to)
	}
	if err != nil {
		return MirrorResult{}, err
	}
	res := MirrorResult{Rev: rev}
	tx := to.Txn()
	n := 0
	flush := func() error {
		if n == 0 {
			return nil
		}
		if _, err := tx.Commit(ctx); err != nil {
			return fmt.Errorf("mirror: write the copy: %w", err)
		}
		tx, n = to.Txn(), 0
		return nil
	}
	add := func(c Cond, op Op) error {
		tx.conds = append(tx.conds, c)
		tx.ops = append(tx.ops, op)
		if n++; n == mirrorBatch {
			return flush()
		}
		return nil
	}
	for key, v := range want {
		cur, ok := have[key]
		if ok && bytes.Equal(cur.Value, v) {
			continue
		}
		res.Put++
		if err := add(IfModRev(key, cur.ModRev), OpPut(key, v)); err != nil {
			return res, err
		}
	}
	for key, cur := range have {
		if _, ok := want[key]; ok {
			continue
		}
		res.Deleted++
		if err := add(IfModRev(key, cur.ModRev), OpDelete(key)); err != nil {
			return res, err
		}
	}
	return res, flush()
}

// have reads the copy's records of the region: going down, every record
// under the mirrored prefixes (and the lease record); going up, the
// region's records as the copy's own nodes say.
func (m Mirror) have(ctx context.Context, to *Store) (map[string]KV, error) {
	if m.Up {
		kvs, _, err := to.dir.List(ctx, "")
		if err != nil {
			return nil, fmt.Errorf("mirror: read the copy: %w", err)
		}
		mine, err := pickKVs(kvs, m.Region, false)
		if err != nil {
			return nil, err
		}
		return mine, nil
	}
	have := map[string]KV{}
	for _, p := range append(mirroredPrefixes, KeyLeaseRecord) {
		got, _, err := to.dir.List(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("mirror: read the copy: %w", err)
		}
		for _, kv := range got {
			if _, _, known := splitKey(kv.Key); known {
				have[kv.Key] = kv
			}
		}
	}
	return have, nil
}

// pickRegion picks region r's records from a whole directory's, by value.
func pickRegion(kvs []KV, r string, leaseRecord bool) (map[string][]byte, error) {
	picked, err := pickKVs(kvs, r, leaseRecord)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]byte, len(picked))
	for k, kv := range picked {
		out[k] = kv.Value
	}
	return out, nil
}

// pickKVs picks region r's records from a whole directory's: the nodes
// recorded in it, the tenants whose primary is one of those nodes, those
// tenants' quotas, and (leaseRecord) the longest-lease record.
func pickKVs(kvs []KV, r string, leaseRecord bool) (map[string]KV, error) {
	want := map[string]KV{}
	nodes := map[string]bool{}
	var tenants, quotas []KV
	for _, kv := range kvs {
		kind, name, ok := splitKey(kv.Key)
		if !ok {
			continue
		}
		switch kind {
		case KeyLeaseRecord:
			if leaseRecord {
				want[kv.Key] = kv
			}
		case PrefixNodes:
			var n Node
			if err := json.Unmarshal(kv.Value, &n); err != nil {
				return nil, fmt.Errorf("mirror: %s: %w: %w", kv.Key, ErrInvalidRecord, err)
			}
			if n.Region == r {
				nodes[name] = true
				want[kv.Key] = kv
			}
		case PrefixTenants:
			tenants = append(tenants, kv)
		case PrefixQuotas:
			quotas = append(quotas, kv)
		}
	}
	placed := map[string]bool{}
	for _, kv := range tenants {
		var t Tenant
		if err := json.Unmarshal(kv.Value, &t); err != nil {
			return nil, fmt.Errorf("mirror: %s: %w: %w", kv.Key, ErrInvalidRecord, err)
		}
		if nodes[t.Node] {
			placed[strings.TrimPrefix(kv.Key, PrefixTenants)] = true
			want[kv.Key] = kv
		}
	}
	for _, kv := range quotas {
		if placed[strings.TrimPrefix(kv.Key, PrefixQuotas)] {
			want[kv.Key] = kv
		}
	}
	return want, nil
}

// SyncTracked is Sync from records held in memory: src holds From's
// records and dst the copy's (to's), each as current as its watch made it,
// and only the keys dirty names are looked at, with the records they
// touch — a tenant's quota, and every tenant on a node whose record
// changed — so a change costs the same whatever the directories hold.
// With dirty.All every record is looked at: the whole of Sync, without
// reading either directory again. The rules are Sync's; each write is
// conditioned on the copy's record as dst holds it (a dst behind the copy
// makes it ErrConflict, never a lost write), and on whatever to is fenced
// and guarded on. The result's Written are the copy's revisions of the
// writes, those made before an error included; dirty is left as it was.
func (m Mirror) SyncTracked(ctx context.Context, to *Store, src, dst *Tracked, dirty *Dirty) (MirrorResult, error) {
	res := MirrorResult{Rev: src.Rev()}
	for _, t := range []*Tracked{src, dst} {
		if t == dst && !m.Up {
			break // going down, every mirrored record of the copy is the region's: none decoded
		}
		for key := range t.bad {
			return res, fmt.Errorf("mirror: %s: %w", key, ErrInvalidRecord)
		}
	}
	want := func(key string) (KV, bool) { return src.ofRegion(key, m.Region, !m.Up) }
	have := func(key string) (KV, bool) {
		if m.Up {
			return dst.ofRegion(key, m.Region, false)
		}
		kv, ok := dst.Get(key)
		return kv, ok && mirrored(key, true)
	}
	err := writeDiff(ctx, to, "mirror: write the copy", m.touched(src, dst, dirty), func(key string) ([]byte, bool) {
		kv, ok := want(key)
		return kv.Value, ok
	}, have, &res)
	return res, err
}

// touched yields, once each, the keys a sync of dirty looks at: every
// mirrored key of either side with dirty.All, else the keys marked, a
// tenant's quota with the tenant, and with a node every tenant either
// side holds on it (its region may have changed) and their quotas.
func (m Mirror) touched(src, dst *Tracked, dirty *Dirty) iter.Seq[string] {
	lease := !m.Up
	return func(yield func(string) bool) {
		if dirty.all {
			for key := range src.kvs {
				if mirrored(key, lease) && !yield(key) {
					return
				}
			}
			for key := range dst.kvs {
				if _, dup := src.kvs[key]; !dup && mirrored(key, lease) && !yield(key) {
					return
				}
			}
			return
		}
		seen := map[string]bool{}
		emit := func(key string) bool {
			if seen[key] || !mirrored(key, lease) {
				return true
			}
			seen[key] = true
			return yield(key)
		}
		for key := range dirty.keys {
			if !emit(key) {
				return
			}
			kind, name, _ := splitKey(key)
			switch kind {
			case PrefixTenants:
				if !emit(QuotaKey(name)) {
					return
				}
			case PrefixNodes:
				for _, t := range []*Tracked{src, dst} {
					for tenant := range t.tenantsOn(name) {
						if !emit(TenantKey(tenant)) || !emit(QuotaKey(tenant)) {
							return
						}
					}
				}
			}
		}
	}
}
