package global

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// casRetries bounds how often a read-decide-write loop retries after losing a
// race (ErrConflict) before it gives up.
const casRetries = 8

// unfenced returns the Store without its fence or guards (for the
// operations that move the term themselves and condition on it directly).
func (s *Store) unfenced() *Store {
	c := *s
	c.fence, c.termRev, c.guards = false, 0, nil
	return &c
}

// ClaimLeader makes router the leader at term. It succeeds only if there is
// no leader or term moves on past the leader's term, and term is not behind
// the directory's term (which it raises to term). The write is one
// transaction conditioned on the term and leader read; losing a race reads
// again and decides again. A router already leading at term succeeds
// without writing. ErrStaleTerm when the term does not move on.
func (s *Store) ClaimLeader(ctx context.Context, router string, term uint64) (Versioned[Leader], error) {
	if err := CheckName("router", router); err != nil {
		return Versioned[Leader]{}, err
	}
	if term == 0 {
		return Versioned[Leader]{}, fmt.Errorf("claim lead at term 0: %w", ErrStaleTerm)
	}
	u := s.unfenced()
	for range casRetries {
		cur, err := u.Term(ctx)
		if err != nil {
			return Versioned[Leader]{}, fmt.Errorf("claim lead: %w", err)
		}
		lead, err := u.Leader(ctx)
		if err != nil {
			return Versioned[Leader]{}, fmt.Errorf("claim lead: %w", err)
		}
		if term < cur.Value {
			return Versioned[Leader]{}, fmt.Errorf("claim lead at %d: directory term %d: %w", term, cur.Value, ErrStaleTerm)
		}
		if lead.Rev != 0 && lead.Value.Router == router && lead.Value.Term == term {
			return lead, nil
		}
		if lead.Rev != 0 && term <= lead.Value.Term {
			return Versioned[Leader]{}, fmt.Errorf("claim lead at %d: leader %s at %d, directory term %d: %w",
				term, lead.Value.Router, lead.Value.Term, cur.Value, ErrStaleTerm)
		}
		l := Leader{Router: router, Term: term, Since: s.now().UTC()}
		tx := u.Txn().PutLeader(lead.Rev, l)
		if term > cur.Value {
			tx.PutTerm(cur.Rev, term)
		} else {
			tx.Require(KeyTerm, cur.Rev)
		}
		rev, err := tx.Commit(ctx)
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return Versioned[Leader]{}, fmt.Errorf("claim lead: %w", err)
		}
		return Versioned[Leader]{Value: l, Rev: rev}, nil
	}
	return Versioned[Leader]{}, fmt.Errorf("claim lead: lost %d races: %w", casRetries, ErrConflict)
}

// Promote moves the directory's term on by one and makes router the leader
// at it, conditioned on the term and leader it read: a concurrent promotion
// makes this one fail with ErrConflict rather than promote twice. It returns
// the new term.
func (s *Store) Promote(ctx context.Context, router string) (uint64, error) {
	if err := CheckName("router", router); err != nil {
		return 0, err
	}
	u := s.unfenced()
	cur, err := u.Term(ctx)
	if err != nil {
		return 0, fmt.Errorf("promote %s: %w", router, err)
	}
	lead, err := u.Leader(ctx)
	if err != nil {
		return 0, fmt.Errorf("promote %s: %w", router, err)
	}
	term := max(cur.Value, lead.Value.Term) + 1
	l := Leader{Router: router, Term: term, Since: s.now().UTC()}
	if _, err := u.Txn().PutTerm(cur.Rev, term).PutLeader(lead.Rev, l).Commit(ctx); err != nil {
		return 0, fmt.Errorf("promote %s: %w", router, err)
	}
	return term, nil
}

// RaiseLeaseRecord makes the longest-lease record at least ms, durably, and
// returns the record as it now stands.
func (s *Store) RaiseLeaseRecord(ctx context.Context, ms int64) (int64, error) {
	return s.moveLeaseRecord(ctx, ms, func(cur int64) bool { return cur < ms })
}

// LowerLeaseRecord sets the longest-lease record to ms if it is above it
// (never raising it), and returns the record as it now stands.
func (s *Store) LowerLeaseRecord(ctx context.Context, ms int64) (int64, error) {
	return s.moveLeaseRecord(ctx, ms, func(cur int64) bool { return cur > ms })
}

func (s *Store) moveLeaseRecord(ctx context.Context, ms int64, change func(cur int64) bool) (int64, error) {
	for range casRetries {
		cur, err := s.LeaseRecord(ctx)
		if err != nil {
			return 0, fmt.Errorf("lease record: %w", err)
		}
		if !change(cur.Value) {
			return cur.Value, nil
		}
		_, err = s.Txn().PutLeaseRecord(cur.Rev, ms).Commit(ctx)
		if err == nil {
			return ms, nil
		}
		if !errors.Is(err, ErrConflict) || s.fenceBroken(ctx) {
			return 0, fmt.Errorf("lease record: %w", err)
		}
	}
	return 0, fmt.Errorf("lease record: lost %d races: %w", casRetries, ErrConflict)
}

// fenceBroken reports whether a fenced Store's term moved on (so retrying
// cannot succeed).
func (s *Store) fenceBroken(ctx context.Context) bool {
	if !s.fence {
		return false
	}
	cur, err := s.Term(ctx)
	return err != nil || cur.Rev != s.termRev
}

// LeaseRecordStore adapts the longest-lease record to durations: Get, Raise
// and Lower, as a router's leaser wants them.
type LeaseRecordStore struct{ S *Store }

// Get returns the record, 0 when there is none.
func (r LeaseRecordStore) Get(ctx context.Context) (time.Duration, error) {
	v, err := r.S.LeaseRecord(ctx)
	return time.Duration(v.Value) * time.Millisecond, err
}

// Raise makes the record at least d (rounded up to a millisecond).
func (r LeaseRecordStore) Raise(ctx context.Context, d time.Duration) error {
	_, err := r.S.RaiseLeaseRecord(ctx, (d + time.Millisecond - 1).Milliseconds())
	return err
}

// Lower sets the record to d (rounded up to a millisecond) if it is above.
func (r LeaseRecordStore) Lower(ctx context.Context, d time.Duration) error {
	_, err := r.S.LowerLeaseRecord(ctx, (d + time.Millisecond - 1).Milliseconds())
	return err
}
