package global

import (
	"context"
	"errors"
	"fmt"
)

// AcceptHandoff records, in the taking side's directory, that its leading
// router takes over the leasing of a region (DESIGN.md §7), as one
// transaction conditioned on everything it read: the region's leaser becomes
// h.To with h recorded on it; the directory's term moves above both its own
// and the giver's (h.Term), with router leading at it; and the longest-lease
// record is raised to at least the giver's (h.LeaseRecordMS). It returns the
// new term. Losing a race reads again and decides again.
func (s *Store) AcceptHandoff(ctx context.Context, region, router string, h Handoff) (uint64, error) {
	if err := CheckName("router", router); err != nil {
		return 0, err
	}
	if h.To != LeaserGlobal && h.To != LeaserRegion || h.From == h.To {
		return 0, fmt.Errorf("handoff of %s from %q to %q: %w", region, h.From, h.To, ErrInvalidRecord)
	}
	u := s.unfenced()
	for range casRetries {
		term, err := u.acceptHandoffOnce(ctx, region, router, h)
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("accept handoff of %s: %w", region, err)
		}
		return term, nil
	}
	return 0, fmt.Errorf("accept handoff of %s: lost %d races: %w", region, casRetries, ErrConflict)
}

func (s *Store) acceptHandoffOnce(ctx context.Context, region, router string, h Handoff) (uint64, error) {
	r, err := s.GetRegion(ctx, region)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return 0, err
	}
	cur, err := s.Term(ctx)
	if err != nil {
		return 0, err
	}
	lead, err := s.Leader(ctx)
	if err != nil {
		return 0, err
	}
	rec, err := s.LeaseRecord(ctx)
	if err != nil {
		return 0, err
	}
	term := max(cur.Value, lead.Value.Term, h.Term) + 1
	reg := r.Value
	reg.Name, reg.Leaser, reg.Handoff = region, h.To, &h
	tx := s.Txn().
		PutRegion(r.Rev, reg).
		PutTerm(cur.Rev, term).
		PutLeader(lead.Rev, Leader{Router: router, Term: term, Since: s.now().UTC()})
	if h.LeaseRecordMS > rec.Value {
		tx.PutLeaseRecord(rec.Rev, h.LeaseRecordMS)
	} else {
		tx.Require(KeyLeaseRecord, rec.Rev)
	}
	if _, err := tx.Commit(ctx); err != nil {
		return 0, err
	}
	return term, nil
}
