package global

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fenec-go/fenec/lease"
)

// A region's leasing changes hands through states of its region record in
// the global directory (docs/regions.md): offered by the router asked,
// ready once the taker can take, given once the giver stopped granting,
// done once the taker took (the leaser flips and the epoch moves on), or
// rolled back. Each step is one compare-and-swap on the record's revision,
// so of two routers racing — a taker's done and a giver's rollback — one
// wins. The steps are pure functions of the record below; UpdateRegion and
// TakeHandoff write them.

// Handoff states (Handoff.State).
const (
	HandoffOffered    = "offered"
	HandoffReady      = "ready"
	HandoffGiven      = "given"
	HandoffDone       = "done"
	HandoffRolledBack = "rolled_back"
)

// DirGlobal names the global directory in grants and bindings; a region's
// directory is named by DirOfRegion.
const DirGlobal = "global"

// DirOfRegion names region r's directory ("region:<r>").
func DirOfRegion(r string) string { return "region:" + r }

// DirOf names the directory of side (LeaserGlobal or LeaserRegion) for
// region r.
func DirOf(side, r string) string {
	if side == LeaserRegion {
		return DirOfRegion(r)
	}
	return DirGlobal
}

// ErrHandoffState: the region record is not in the state a handoff step
// needs (one in flight already, none to take, the side asked leases it).
var ErrHandoffState = errors.New("region's handoff is not in the state this step needs")

// ErrEpochBound: a region's epoch would move past lease.MaxNumber, or a
// record names one more than lease.EpochMargin past the epoch the
// directory knows: refused, never wrapped nor adopted.
var ErrEpochBound = errors.New("region's epoch is past its bound")

// handoffErr says which step found which state.
func handoffErr(r Region, step string) error {
	state := "none"
	if r.Handoff != nil {
		state = r.Handoff.State + " (to " + r.Handoff.To + ")"
	}
	return fmt.Errorf("%s of region %s, leased by %s, handoff %s: %w", step, r.Name, r.Leaser, state, ErrHandoffState)
}

// LeasedBy is the side leasing the region's nodes now: LeaserGlobal (also
// for a region with no record yet), LeaserRegion, or "" while a handoff is
// given and not yet taken: nobody grants then.
func (r Region) LeasedBy() string {
	if r.Handoff != nil && r.Handoff.State == HandoffGiven {
		return ""
	}
	if r.Leaser == "" {
		return LeaserGlobal
	}
	return r.Leaser
}

// InFlight says whether a handoff is offered, ready or given.
func (r Region) InFlight() bool {
	if r.Handoff == nil {
		return false
	}
	switch r.Handoff.State {
	case HandoffOffered, HandoffReady, HandoffGiven:
		return true
	}
	return false
}

// OfferWait bounds how long an offer waits for its taker's ready: the
// giving side's leading router takes back an offer no one answered (the
// region has no leading router linked to the global tier, or the global
// tier has none leading), so a handoff never waits in offered for a taker
// that may come up hours later.
const OfferWait = 20 * time.Second

// Unanswered says whether h is an offer made wait or longer before now.
func (h *Handoff) Unanswered(now time.Time, wait time.Duration) bool {
	return h.State == HandoffOffered && now.Sub(h.At) >= wait
}

// GiveBound is how long a giver whose own lease is own waits for its
// given handoff to be taken before it rolls it back and grants the
// region's nodes again: its own lease (the nodes' leases run out about
// then), at least a second.
func GiveBound(own time.Duration) time.Duration { return max(own, time.Second) }

// HandoffState is the state of the region's last handoff ("": none).
func (r Region) HandoffState() string {
	if r.Handoff == nil {
		return ""
	}
	return r.Handoff.State
}

// Equal compares two region records as stored.
func (r Region) Equal(o Region) bool {
	if (r.Handoff == nil) != (o.Handoff == nil) || r.Handoff != nil && *r.Handoff != *o.Handoff {
		return false
	}
	r.Handoff, o.Handoff = nil, nil
	return r.Name == o.Name && r.Leaser == o.Leaser && r.Epoch == o.Epoch && r.Since.Equal(o.Since) &&
		r.Router == o.Router && r.Term == o.Term && r.LeaseRecordMS == o.LeaseRecordMS
}

// Offer records that an operator asked, through router by, for the
// region's leasing to go to side to.
func (r *Region) Offer(to, by string, now time.Time) error {
	if to != LeaserGlobal && to != LeaserRegion {
		return fmt.Errorf("handoff of %s to %q: %w", r.Name, to, ErrInvalidRecord)
	}
	if r.InFlight() || r.LeasedBy() == to {
		return handoffErr(*r, "offer to "+to)
	}
	from := r.LeasedBy()
	r.Leaser = from
	r.Handoff = &Handoff{From: from, To: to, State: HandoffOffered, Seq: r.seq() + 1, At: now, Updated: now, Asked: by}
	return nil
}

// Ready records that taker, the taking side's leading router, can lease
// the region's nodes and holds its records.
func (r *Region) Ready(taker string, now time.Time) error {
	if r.Handoff == nil || r.Handoff.State != HandoffOffered {
		return handoffErr(*r, "ready")
	}
	r.Handoff.State, r.Handoff.Taker, r.Handoff.Updated = HandoffReady, taker, now
	return nil
}

// Give records that giver, the giving side's leading router at term, has
// stopped granting the region's nodes (none of its grants to them is in
// flight), with the longest lease it may have granted and when it last
// granted.
func (r *Region) Give(giver string, term uint64, recordMS int64, lastGrant, now time.Time) error {
	if r.Handoff == nil || r.Handoff.State != HandoffReady {
		return handoffErr(*r, "give")
	}
	h := r.Handoff
	h.State, h.Giver, h.Term, h.LeaseRecordMS, h.LastGrant, h.Updated = HandoffGiven, giver, term, recordMS, lastGrant, now
	return nil
}

// Take records that the taker leases the region from now: the leaser
// flips, the epoch moves on by one.
func (r *Region) Take(now time.Time) error {
	if r.Handoff == nil || r.Handoff.State != HandoffGiven {
		return handoffErr(*r, "take")
	}
	epoch, err := lease.NextEpoch(r.Epoch, 1)
	if err != nil {
		return fmt.Errorf("take of region %s: %w: %w", r.Name, ErrEpochBound, err)
	}
	r.Leaser, r.Epoch, r.Since = r.Handoff.To, epoch, now
	r.Handoff.State, r.Handoff.Updated = HandoffDone, now
	return nil
}

// RollBack ends a handoff in flight where it began: the giver leases.
func (r *Region) RollBack(why string, now time.Time) error {
	if !r.InFlight() {
		return handoffErr(*r, "roll back")
	}
	r.Leaser = r.Handoff.From
	r.Handoff.State, r.Handoff.Why, r.Handoff.Updated = HandoffRolledBack, why, now
	return nil
}

// Force records that the region's leading router took the region's
// leasing without the global tier: the epoch moves two above the highest
// known (a planned handoff it could not see may have used the next),
// recordMS is the global record it waits out. A known epoch more than
// lease.EpochMargin past the record's is refused, not adopted: no handoff
// the region could not see moves the epoch so far, so the number came from
// a record or a node that is not to be believed; and an epoch past
// lease.MaxNumber is refused rather than wrapped.
func (r *Region) Force(router string, knownEpoch uint64, recordMS int64, by string, now time.Time) error {
	if r.LeasedBy() == LeaserRegion {
		return handoffErr(*r, "forced takeover")
	}
	if !lease.EpochWithin(r.Epoch, knownEpoch) && knownEpoch > r.Epoch {
		return fmt.Errorf("forced takeover of region %s: %w: the global record's epoch %d is more than %d past this directory's %d; look at both records (GET /_shard/regions) before forcing",
			r.Name, ErrEpochBound, knownEpoch, lease.EpochMargin, r.Epoch)
	}
	epoch, err := lease.NextEpoch(max(r.Epoch, knownEpoch), 2)
	if err != nil {
		return fmt.Errorf("forced takeover of region %s: %w: %w", r.Name, ErrEpochBound, err)
	}
	seq := r.seq() + 1
	r.Leaser, r.Epoch, r.Since = LeaserRegion, epoch, now
	r.Handoff = &Handoff{From: LeaserGlobal, To: LeaserRegion, State: HandoffDone, Force: true, Seq: seq,
		LeaseRecordMS: recordMS, At: now, Updated: now, Taker: router, Asked: by}
	return nil
}

// seq is the number of the region's last handoff (0: none).
func (r Region) seq() uint64 {
	if r.Handoff == nil {
		return 0
	}
	return r.Handoff.Seq
}

// Newer says whether r is a later state of the region's leasing than o:
// by epoch, then by handoff (a later one), then by the handoff's progress
// (a state the other has not reached).
func (r Region) Newer(o Region) bool {
	switch {
	case r.Epoch != o.Epoch:
		return r.Epoch > o.Epoch
	case r.seq() != o.seq():
		return r.seq() > o.seq()
	}
	return stateRank(r) > stateRank(o)
}

func stateRank(r Region) int {
	if r.Handoff == nil {
		return 0
	}
	switch r.Handoff.State {
	case HandoffOffered:
		return 1
	case HandoffReady:
		return 2
	case HandoffGiven:
		return 3
	case HandoffRolledBack, HandoffDone:
		return 4
	}
	return 0
}

// UpdateRegion rewrites region name, read at at (Rev 0: absent, created),
// with fn applied to a copy of it, as one transaction conditioned on that
// revision: a stale reading is ErrConflict and changes nothing. fn may
// refuse with an error.
func (s *Store) UpdateRegion(ctx context.Context, name string, at Versioned[Region], fn func(*Region) error) (Versioned[Region], error) {
	r := at.Value
	r.Name = name
	if r.Leaser == "" {
		r.Leaser = LeaserGlobal
	}
	if r.Handoff != nil {
		h := *r.Handoff
		r.Handoff = &h
	}
	if err := fn(&r); err != nil {
		return Versioned[Region]{}, fmt.Errorf("update region %s: %w", name, err)
	}
	rev, err := s.Txn().PutRegion(at.Rev, r).Commit(ctx)
	if err != nil {
		return Versioned[Region]{}, fmt.Errorf("update region %s: %w", name, err)
	}
	return Versioned[Region]{Value: r, Rev: rev}, nil
}

// ReadRegion returns region name's record, a new one leased by the global
// tier at revision 0 when there is none.
func (s *Store) ReadRegion(ctx context.Context, name string) (Versioned[Region], error) {
	at, err := s.GetRegion(ctx, name)
	if errors.Is(err, ErrNotFound) {
		return Versioned[Region]{Value: Region{Name: name, Leaser: LeaserGlobal}}, nil
	}
	return at, err
}

// TakeHandoff takes region name's given handoff (read at at) in this
// directory, in one transaction conditioned on everything it read: the
// region flips to the taker (Take), and the longest-lease record is raised
// to at least the giver's, so a router leading this directory later counts
// nodes it never reached by it.
func (s *Store) TakeHandoff(ctx context.Context, name string, at Versioned[Region], now time.Time) (Versioned[Region], error) {
	rec, err := s.LeaseRecord(ctx)
	if err != nil {
		return Versioned[Region]{}, fmt.Errorf("take handoff of %s: %w", name, err)
	}
	r := at.Value
	if r.Handoff != nil {
		h := *r.Handoff
		r.Handoff = &h
	}
	if err := r.Take(now); err != nil {
		return Versioned[Region]{}, err
	}
	tx := s.Txn().PutRegion(at.Rev, r)
	if g := r.Handoff.LeaseRecordMS; g > rec.Value {
		tx.PutLeaseRecord(rec.Rev, g)
	} else {
		tx.Require(KeyLeaseRecord, rec.Rev)
	}
	rev, err := tx.Commit(ctx)
	if err != nil {
		return Versioned[Region]{}, fmt.Errorf("take handoff of %s: %w", name, err)
	}
	return Versioned[Region]{Value: r, Rev: rev}, nil
}

// AdoptRegion writes r as region name's record, read at at, and raises the
// longest-lease record to at least raiseMS, in one transaction: a
// region's router writing into its own directory what the global
// directory decided (the region taken over, at the giver's record).
func (s *Store) AdoptRegion(ctx context.Context, name string, at Versioned[Region], r Region, raiseMS int64) (Versioned[Region], error) {
	r.Name = name
	tx := s.Txn().PutRegion(at.Rev, r)
	if raiseMS > 0 {
		rec, err := s.LeaseRecord(ctx)
		if err != nil {
			return Versioned[Region]{}, fmt.Errorf("adopt region %s: %w", name, err)
		}
		if raiseMS > rec.Value {
			tx.PutLeaseRecord(rec.Rev, raiseMS)
		}
	}
	rev, err := tx.Commit(ctx)
	if err != nil {
		return Versioned[Region]{}, fmt.Errorf("adopt region %s: %w", name, err)
	}
	return Versioned[Region]{Value: r, Rev: rev}, nil
}

// ErrWrongDirectory: a router's flags name another directory than the one
// it opened (a region's router on the global directory, or the reverse).
var ErrWrongDirectory = errors.New("this directory is another's")

// ClaimName records name as the directory's own (meta/name) if it has
// none, and refuses a directory that names itself otherwise.
func (s *Store) ClaimName(ctx context.Context, name string) error {
	u := s.unfenced()
	for range casRetries {
		kv, err := u.dir.Get(ctx, KeyName)
		switch {
		case err == nil && string(kv.Value) == name:
			return nil
		case err == nil:
			return fmt.Errorf("directory is %q, not %q: %w", kv.Value, name, ErrWrongDirectory)
		case !errors.Is(err, ErrNotFound):
			return fmt.Errorf("read directory name: %w", err)
		}
		_, err = u.dir.Txn(ctx, []Cond{IfAbsent(KeyName)}, []Op{OpPut(KeyName, []byte(name))})
		if err == nil || !errors.Is(err, ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("name the directory: lost %d races: %w", casRetries, ErrConflict)
}
