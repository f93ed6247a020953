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

// mirroredPrefixes are the records a region's directory copies from the
// global one. Its term and leader are its own. The longest-lease record
// is copied: the global tier leases the region's nodes (leasing from a
// region's directory is not built), so the longest lease they may run is
// the global record, which the region's routers wait by when a new
// primary refuses a write unrun.
var mirroredPrefixes = []string{PrefixRegions, PrefixNodes, PrefixTenants, PrefixQuotas, KeyLeaseRecord}

// Mirror copies one region's records from the global directory into the
// region's own (DESIGN.md §7): the region's record, its nodes, the tenants
// placed on them and their quotas, and the longest-lease record. A
// region's routers forward from that
// copy, so they go on forwarding while the global directory is
// unreachable.
type Mirror struct {
	// From is the global directory.
	From Directory
	// Region is the region copied.
	Region string
}

// MirrorResult is what one Sync did.
type MirrorResult struct {
	// Rev is the global directory's revision the copy was read at.
	Rev int64
	// Put and Deleted count the region directory's records written and
	// removed.
	Put, Deleted int
}

// Sync reads the global directory once and makes to's mirrored records
// exactly the region's: records that differ are written, records no longer
// the region's removed, each batch conditioned on what it read of to (and
// on to's term when to is fenced), so a deposed region router writes
// nothing. A lost race is ErrConflict: call Sync again.
func (m Mirror) Sync(ctx context.Context, to *Store) (MirrorResult, error) {
	kvs, rev, err := m.From.List(ctx, "")
	if err != nil {
		return MirrorResult{}, fmt.Errorf("mirror: read the global directory: %w", err)
	}
	want, err := m.pick(kvs)
	if err != nil {
		return MirrorResult{}, err
	}
	have := map[string]KV{}
	for _, p := range mirroredPrefixes {
		got, _, err := to.dir.List(ctx, p)
		if err != nil {
			return MirrorResult{}, fmt.Errorf("mirror: read the region's directory: %w", err)
		}
		for _, kv := range got {
			have[kv.Key] = kv
		}
	}
	res := MirrorResult{Rev: rev}
	tx := to.Txn()
	n := 0
	flush := func() error {
		if n == 0 {
			return nil
		}
		if _, err := tx.Commit(ctx); err != nil {
			return fmt.Errorf("mirror: write the region's directory: %w", err)
		}
		tx, n = to.Txn(), 0
		return nil
	}
	for key, v := range want {
		cur, ok := have[key]
		if ok && bytes.Equal(cur.Value, v) {
			continue
		}
		tx.conds = append(tx.conds, IfModRev(key, cur.ModRev))
		tx.ops = append(tx.ops, OpPut(key, v))
		res.Put++
		if n++; n == mirrorBatch {
			if err := flush(); err != nil {
				return res, err
			}
		}
	}
	for key, cur := range have {
		if _, ok := want[key]; ok {
			continue
		}
		if _, _, known := splitKey(key); !known {
			continue // not a record of the layout: left alone
		}
		tx.conds = append(tx.conds, IfModRev(key, cur.ModRev))
		tx.ops = append(tx.ops, OpDelete(key))
		res.Deleted++
		if n++; n == mirrorBatch {
			if err := flush(); err != nil {
				return res, err
			}
		}
	}
	return res, flush()
}

// pick picks the region's records from the global directory's: its
// region record, the nodes recorded in it, the tenants whose primary is
// one of those nodes, and those tenants' quotas.
func (m Mirror) pick(kvs []KV) (map[string][]byte, error) {
	want := map[string][]byte{}
	nodes := map[string]bool{}
	var tenants, quotas []KV
	for _, kv := range kvs {
		kind, name, ok := splitKey(kv.Key)
		if !ok {
			continue
		}
		switch kind {
		case KeyLeaseRecord:
			want[kv.Key] = kv.Value
		case PrefixRegions:
			if name == m.Region {
				want[kv.Key] = kv.Value
			}
		case PrefixNodes:
			var n Node
			if err := json.Unmarshal(kv.Value, &n); err != nil {
				return nil, fmt.Errorf("mirror: %s: %w: %w", kv.Key, ErrInvalidRecord, err)
			}
			if n.Region == m.Region {
				nodes[name] = true
				want[kv.Key] = kv.Value
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
			want[kv.Key] = kv.Value
		}
	}
	for _, kv := range quotas {
		if placed[strings.TrimPrefix(kv.Key, PrefixQuotas)] {
			want[kv.Key] = kv.Value
		}
	}
	return want, nil
}
