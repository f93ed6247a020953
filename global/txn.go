package global

import (
	"context"
	"fmt"
)

// Txn gathers conditions and writes of typed records and commits them as one
// directory transaction: every record written is conditioned on the revision
// the caller read it at (0: it was absent), and Require adds conditions on
// records read but not written. Nothing else changes. The first invalid
// name or record is reported by Commit, which then writes nothing.
type Txn struct {
	s     *Store
	conds []Cond
	ops   []Op
	err   error
}

// Txn starts a transaction on the Store (fenced if the Store is).
func (s *Store) Txn() *Txn {
	tx := &Txn{s: s}
	if s.fence {
		tx.conds = append(tx.conds, IfModRev(KeyTerm, s.termRev))
	}
	tx.conds = append(tx.conds, s.guards...)
	return tx
}

func (tx *Txn) fail(err error) *Txn {
	if tx.err == nil {
		tx.err = err
	}
	return tx
}

func (tx *Txn) put(key string, rev int64, v any) *Txn {
	b, err := encode(v)
	if err != nil {
		return tx.fail(fmt.Errorf("%s: %w", key, err))
	}
	tx.conds = append(tx.conds, IfModRev(key, rev))
	tx.ops = append(tx.ops, OpPut(key, b))
	return tx
}

func (tx *Txn) del(key string, rev int64) *Txn {
	tx.conds = append(tx.conds, IfModRev(key, rev))
	tx.ops = append(tx.ops, OpDelete(key))
	return tx
}

func (tx *Txn) named(what, name string) bool {
	if err := CheckName(what, name); err != nil {
		tx.fail(err)
		return false
	}
	return true
}

// Require conditions the transaction on key being at revision rev (0:
// absent) without writing it.
func (tx *Txn) Require(key string, rev int64) *Txn {
	if key == "" {
		return tx.fail(ErrInvalidKey)
	}
	tx.conds = append(tx.conds, IfModRev(key, rev))
	return tx
}

// RequireTenant conditions the transaction on tenant t being at rev.
func (tx *Txn) RequireTenant(t string, rev int64) *Txn {
	if !tx.named("tenant", t) {
		return tx
	}
	return tx.Require(TenantKey(t), rev)
}

// RequireNode conditions the transaction on node n being at rev.
func (tx *Txn) RequireNode(n string, rev int64) *Txn {
	if !tx.named("node", n) {
		return tx
	}
	return tx.Require(NodeKey(n), rev)
}

// PutTerm writes the term, which was at rev.
func (tx *Txn) PutTerm(rev int64, term uint64) *Txn {
	if tx.s.fence {
		// The fence already conditions the term key; a second, different
		// condition would make the transaction unable to succeed.
		return tx.fail(fmt.Errorf("a fenced store cannot move the term: %w", ErrInvalidKey))
	}
	return tx.put(KeyTerm, rev, term)
}

// PutLeader writes the leader record, which was at rev.
func (tx *Txn) PutLeader(rev int64, l Leader) *Txn { return tx.put(KeyLeader, rev, l) }

// PutLeaseRecord writes the longest-lease record, which was at rev.
func (tx *Txn) PutLeaseRecord(rev int64, ms int64) *Txn {
	if ms < 0 {
		return tx.fail(fmt.Errorf("lease record %d ms: %w", ms, ErrInvalidRecord))
	}
	return tx.put(KeyLeaseRecord, rev, ms)
}

// PutRegion writes region r (whose Name must be r), which was at rev.
func (tx *Txn) PutRegion(rev int64, r Region) *Txn {
	if !tx.named("region", r.Name) {
		return tx
	}
	return tx.put(RegionKey(r.Name), rev, r)
}

// DeleteRegion removes region r, which was at rev.
func (tx *Txn) DeleteRegion(r string, rev int64) *Txn {
	if !tx.named("region", r) {
		return tx
	}
	return tx.del(RegionKey(r), rev)
}

// PutNode writes node n, which was at rev.
func (tx *Txn) PutNode(n string, rev int64, node Node) *Txn {
	if !tx.named("node", n) {
		return tx
	}
	return tx.put(NodeKey(n), rev, node)
}

// DeleteNode removes node n, which was at rev.
func (tx *Txn) DeleteNode(n string, rev int64) *Txn {
	if !tx.named("node", n) {
		return tx
	}
	return tx.del(NodeKey(n), rev)
}

// PutTenant writes tenant t, which was at rev.
func (tx *Txn) PutTenant(t string, rev int64, tenant Tenant) *Txn {
	if !tx.named("tenant", t) {
		return tx
	}
	return tx.put(TenantKey(t), rev, tenant)
}

// DeleteTenant removes tenant t, which was at rev.
func (tx *Txn) DeleteTenant(t string, rev int64) *Txn {
	if !tx.named("tenant", t) {
		return tx
	}
	return tx.del(TenantKey(t), rev)
}

// PutQuota writes tenant t's quota, which was at rev.
func (tx *Txn) PutQuota(t string, rev int64, q Quota) *Txn {
	if !tx.named("tenant", t) {
		return tx
	}
	return tx.put(QuotaKey(t), rev, q)
}

// DeleteQuota removes tenant t's quota, which was at rev.
func (tx *Txn) DeleteQuota(t string, rev int64) *Txn {
	if !tx.named("tenant", t) {
		return tx
	}
	return tx.del(QuotaKey(t), rev)
}

// PutStandby records standby as node n's standby, which was at rev.
func (tx *Txn) PutStandby(n string, rev int64, standby string) *Txn {
	if !tx.named("node", n) || !tx.named("standby", standby) {
		return tx
	}
	return tx.put(StandbyKey(n), rev, standby)
}

// DeleteStandby removes node n's standby, which was at rev.
func (tx *Txn) DeleteStandby(n string, rev int64) *Txn {
	if !tx.named("node", n) {
		return tx
	}
	return tx.del(StandbyKey(n), rev)
}

// Commit applies the transaction: every write or none. A condition that no
// longer holds is ErrConflict. It returns the revision of the writes.
func (tx *Txn) Commit(ctx context.Context) (int64, error) {
	if tx.err != nil {
		return 0, tx.err
	}
	return tx.s.dir.Txn(ctx, tx.conds, tx.ops)
}
