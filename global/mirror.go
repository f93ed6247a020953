package global

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
