package global

import (
	"context"
	"fmt"
)

// HoldMove is the HeldBy of a tenant being moved.
const HoldMove = "move"

// HoldFailover is the HeldBy of a tenant whose copy is being promoted.
const HoldFailover = "failover"

// PlaceTenant records a new tenant: it must be absent, and its node must be
// at nodeRev (as the caller read it when choosing it).
func (s *Store) PlaceTenant(ctx context.Context, name string, t Tenant, nodeRev int64) (Versioned[Tenant], error) {
	if nodeRev == 0 {
		return Versioned[Tenant]{}, fmt.Errorf("place %s on %s: node not read: %w", name, t.Node, ErrState)
	}
	rev, err := s.Txn().RequireNode(t.Node, nodeRev).PutTenant(name, 0, t).Commit(ctx)
	if err != nil {
		return Versioned[Tenant]{}, fmt.Errorf("place %s: %w", name, err)
	}
	return Versioned[Tenant]{Value: t, Rev: rev}, nil
}

// UpdateTenant rewrites tenant name, read at at.Rev, with fn applied to a
// copy of it, as one transaction conditioned on that revision: a stale
// reading is ErrConflict and changes nothing. fn may refuse with an error.
func (s *Store) UpdateTenant(ctx context.Context, name string, at Versioned[Tenant], fn func(*Tenant) error) (Versioned[Tenant], error) {
	if at.Rev == 0 {
		return Versioned[Tenant]{}, fmt.Errorf("update %s: %w", name, ErrNotFound)
	}
	t := at.Value
	if err := fn(&t); err != nil {
		return Versioned[Tenant]{}, fmt.Errorf("update %s: %w", name, err)
	}
	rev, err := s.Txn().PutTenant(name, at.Rev, t).Commit(ctx)
	if err != nil {
		return Versioned[Tenant]{}, fmt.Errorf("update %s: %w", name, err)
	}
	return Versioned[Tenant]{Value: t, Rev: rev}, nil
}

// Failover records that tenant name, read at at, now has its primary on
// node to (its promoted copy), whose history forked at forked: node=to,
// failed_from=the node it was on, forked_history=forked, and the copy on to
// is no longer counted as its replica. A held tenant is refused (ErrHeld):
// its failover waits for the operation holding it. An unfinished move is
// abandoned.
func (s *Store) Failover(ctx context.Context, name string, at Versioned[Tenant], to string, forked uint64) (Versioned[Tenant], error) {
	return s.UpdateTenant(ctx, name, at, func(t *Tenant) error { return failOver(name, t, to, forked) })
}

// failOver is Failover's change to the record.
func failOver(name string, t *Tenant, to string, forked uint64) error {
	if t.HeldBy != "" {
		return fmt.Errorf("failover of %s, held by %s: %w", name, t.HeldBy, ErrHeld)
	}
	if to == t.Node {
		return fmt.Errorf("failover of %s onto %s, where it is: %w", name, to, ErrState)
	}
	t.FailedFrom, t.Node = t.Node, to
	t.ForkedHistory = forked
	t.ReplicaBehind = 0
	if t.Replica == to {
		t.Replica = ""
	}
	t.State, t.Target, t.MoveStep, t.MoveSeq = StateActive, "", "", 0
	return nil
}

// BeginMove marks tenant name, read at at, as moving to node to and held
// by the move. A replica on to is dropped: the move replaces that node's
// file, so from then on the directory names no copy there, put back or
// flipped (the router gives the tenant another).
func (s *Store) BeginMove(ctx context.Context, name string, at Versioned[Tenant], to string) (Versioned[Tenant], error) {
	return s.UpdateTenant(ctx, name, at, func(t *Tenant) error {
		if t.HeldBy != "" {
			return fmt.Errorf("move of %s, held by %s: %w", name, t.HeldBy, ErrHeld)
		}
		if t.State != StateActive || to == t.Node {
			return fmt.Errorf("move of %s (%s on %s) to %s: %w", name, t.State, t.Node, to, ErrState)
		}
		t.State, t.Target, t.HeldBy = StateMoving, to, HoldMove
		if t.Replica == to {
			t.Replica, t.ReplicaBehind = "", 0
		}
		return nil
	})
}

// The steps of a move by following (Tenant.MoveStep), in order.
const (
	// MoveFollowing: the target's copy follows the source, which takes
	// writes. Recovery puts the move back.
	MoveFollowing = "following"
	// MoveSwitching: the source is frozen (recorded once it is) and the
	// copy catches up; the leasing names the tenant in its source's
	// grants no more. Recovery puts the move back.
	MoveSwitching = "switching"
	// MovePromoting: the copy held the frozen source's last seq (MoveSeq)
	// and is (being) promoted. Recovery finishes the move if the source
	// still holds no more than MoveSeq, else puts it back.
	MovePromoting = "promoting"
)

// FinishMove flips tenant name, read at at while moving, onto its move's
// target: node=target, active, no longer held, failed_from cleared (a move
// is not a failover). A replica that was the target is dropped.
func (s *Store) FinishMove(ctx context.Context, name string, at Versioned[Tenant]) (Versioned[Tenant], error) {
	return s.FinishMoveForked(ctx, name, at, 0)
}

// FinishMoveForked is FinishMove for a target promoted from a following
// copy, whose history forked at forked (recorded as a failover records
// it; 0 keeps the record's).
func (s *Store) FinishMoveForked(ctx context.Context, name string, at Versioned[Tenant], forked uint64) (Versioned[Tenant], error) {
	return s.UpdateTenant(ctx, name, at, func(t *Tenant) error {
		if t.State != StateMoving || t.HeldBy != HoldMove {
			return fmt.Errorf("finish move of %s (%s, held by %q): %w", name, t.State, t.HeldBy, ErrState)
		}
		t.Node, t.Target, t.State, t.HeldBy, t.FailedFrom = t.Target, "", StateActive, "", ""
		t.ReplicaBehind, t.MoveStep, t.MoveSeq = 0, "", 0
		if forked != 0 {
			t.ForkedHistory = forked
		}
		if t.Replica == t.Node {
			t.Replica = ""
		}
		return nil
	})
}

// StepMove records that tenant name's move, read at at, reached step,
// with seq the source's last (MovePromoting's; 0 otherwise).
func (s *Store) StepMove(ctx context.Context, name string, at Versioned[Tenant], step string, seq uint64) (Versioned[Tenant], error) {
	return s.UpdateTenant(ctx, name, at, func(t *Tenant) error {
		if t.State != StateMoving || t.HeldBy != HoldMove {
			return fmt.Errorf("move of %s to step %s (%s, held by %q): %w", name, step, t.State, t.HeldBy, ErrState)
		}
		t.MoveStep, t.MoveSeq = step, seq
		return nil
	})
}

// AbortMove leaves tenant name, read at at while moving, where it was.
func (s *Store) AbortMove(ctx context.Context, name string, at Versioned[Tenant]) (Versioned[Tenant], error) {
	return s.UpdateTenant(ctx, name, at, func(t *Tenant) error {
		if t.State != StateMoving || t.HeldBy != HoldMove {
			return fmt.Errorf("abort move of %s (%s, held by %q): %w", name, t.State, t.HeldBy, ErrState)
		}
		t.Target, t.State, t.HeldBy, t.MoveStep, t.MoveSeq = "", StateActive, "", "", 0
		return nil
	})
}

// Hold marks tenant name, read at at, as held by operation by.
func (s *Store) Hold(ctx context.Context, name string, at Versioned[Tenant], by string) (Versioned[Tenant], error) {
	return s.UpdateTenant(ctx, name, at, func(t *Tenant) error { return hold(name, t, by) })
}

// hold is Hold's change to the record.
func hold(name string, t *Tenant, by string) error {
	if by == "" {
		return fmt.Errorf("hold %s by no one: %w", name, ErrState)
	}
	if t.HeldBy != "" {
		return fmt.Errorf("hold %s by %s, held by %s: %w", name, by, t.HeldBy, ErrHeld)
	}
	t.HeldBy = by
	return nil
}

// Release ends operation by's hold on tenant name, read at at.
func (s *Store) Release(ctx context.Context, name string, at Versioned[Tenant], by string) (Versioned[Tenant], error) {
	return s.UpdateTenant(ctx, name, at, func(t *Tenant) error { return release(name, t, by) })
}

// release is Release's change to the record.
func release(name string, t *Tenant, by string) error {
	if t.HeldBy != by {
		return fmt.Errorf("release %s by %s, held by %q: %w", name, by, t.HeldBy, ErrState)
	}
	t.HeldBy = ""
	return nil
}

// The same changes as parts of a larger transaction, so that one
// directory write can carry many tenants' (a node's failover). Each
// returns the record as the transaction writes it; a change refused is
// the transaction's error (Commit reports it and writes nothing).

// HoldTenant adds Hold(name, at, by) to tx.
func (tx *Txn) HoldTenant(name string, at Versioned[Tenant], by string) (*Txn, Tenant) {
	t := at.Value
	if at.Rev == 0 {
		return tx.fail(fmt.Errorf("hold %s: %w", name, ErrNotFound)), t
	}
	if err := hold(name, &t, by); err != nil {
		return tx.fail(err), t
	}
	return tx.PutTenant(name, at.Rev, t), t
}

// ReleaseAndFailover adds to tx the end of operation by's hold on tenant
// name, read at at, and its Failover onto to, as one write: Release then
// Failover with nothing in between.
func (tx *Txn) ReleaseAndFailover(name string, at Versioned[Tenant], by, to string, forked uint64) (*Txn, Tenant) {
	t := at.Value
	if at.Rev == 0 {
		return tx.fail(fmt.Errorf("failover of %s: %w", name, ErrNotFound)), t
	}
	if err := release(name, &t, by); err != nil {
		return tx.fail(err), t
	}
	if err := failOver(name, &t, to, forked); err != nil {
		return tx.fail(err), t
	}
	return tx.PutTenant(name, at.Rev, t), t
}

// RemoveTenant forgets tenant name, read at at, and its quota, read at
// quotaRev (0: it has none), in one transaction.
func (s *Store) RemoveTenant(ctx context.Context, name string, at Versioned[Tenant], quotaRev int64) error {
	if at.Rev == 0 {
		return fmt.Errorf("remove %s: %w", name, ErrNotFound)
	}
	if _, err := s.Txn().DeleteTenant(name, at.Rev).DeleteQuota(name, quotaRev).Commit(ctx); err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	return nil
}
