package lead

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/fenec-go/fenec/global"
)

// readyWait bounds how long a change waits for the router's copy of the
// directory to arrive before it is refused 503.
const readyWait = 5 * time.Second

// Deps are everything the lead uses of the router.
type Deps struct {
	// ID is the router's name, written in the leader record it claims.
	ID string
	// Name is the directory's name (global.DirGlobal, or a region's),
	// claimed before leading it; "": none is claimed.
	Name string
	// Store is the directory, unfenced: reads, and the claims themselves.
	Store *global.Store
	// View is the router's copy of its directory (nil before it arrived);
	// Ready is closed once it has.
	View  func() *global.View
	Ready func() <-chan struct{}
	// Now is the wall clock a claim's record is stamped with (its Since),
	// never decided by; nil: time.Now.
	Now func() time.Time
	Log *slog.Logger
}

// Lead is whether this router takes changes. It leads once it has claimed
// the leader record (at start) or been promoted, and writes every change
// through a Store fenced on the term it read then: a promotion of another
// router moves the term on, and every write of this one fails. It stops
// leading at once when its view shows a later term or leader. It is the
// leasing's and the link's Lead (leasing.Lead, link.Lead).
type Lead struct {
	id    string
	name  string
	store *global.Store
	view  func() *global.View
	ready func() <-chan struct{}
	now   func() time.Time
	log   *slog.Logger

	mu      sync.Mutex
	leading bool          // guarded by mu
	term    uint64        // guarded by mu: the term this router leads at
	fenced  *global.Store // guarded by mu: writes conditioned on the term key
}

// New returns the lead over d, not leading until Claim or Promote.
func New(d Deps) *Lead {
	now := d.Now
	if now == nil {
		now = time.Now
	}
	return &Lead{id: d.ID, name: d.Name, store: d.Store, view: d.View, ready: d.Ready, now: now, log: d.Log}
}

// Claim takes the lead at start, always at a new term: when no router
// leads, by a transaction conditioned on the leader record being absent
// and the term unchanged (of routers starting together, one wins); when
// this router led before it stopped, by one conditioned on the record
// still naming it. Every claim moves the term on, a restart's included, so
// a node takes the first grants of the router restarted as newer than the
// lease it holds from the router before: a restart with a shorter lease
// shortens the node's with its first acknowledged grant, and a tenant
// placed at once takes writes at once. When another router holds the
// record, this one does not take it (a promotion is a decision someone
// makes): it forwards and refuses changes naming that router. It reports
// whether this router now leads.
func (l *Lead) Claim(ctx context.Context) (bool, error) {
	if err := l.claimName(ctx); err != nil {
		return false, err
	}
	for range claimRetries {
		lead, err := l.store.Leader(ctx)
		if err != nil {
			return false, fmt.Errorf("read leader: %w", err)
		}
		cur, err := l.store.Term(ctx)
		if err != nil {
			return false, fmt.Errorf("read term: %w", err)
		}
		switch {
		case lead.Rev != 0 && lead.Value.Router == l.id:
			term := max(cur.Value, lead.Value.Term) + 1
			rec := global.Leader{Router: l.id, Term: term, Since: l.now().UTC()}
			_, err := l.store.Txn().PutLeader(lead.Rev, rec).PutTerm(cur.Rev, term).Commit(ctx)
			if errors.Is(err, global.ErrConflict) {
				continue // promoted over meanwhile, or the term moved: read again
			}
			if err != nil {
				return false, fmt.Errorf("claim lead again: %w", err)
			}
			return l.fenceClaimed(ctx, term)
		case lead.Rev != 0:
			l.log.Warn("another router leads: not claiming the lead", "leader", lead.Value.Router, "term", lead.Value.Term)
			return false, nil
		}
		term := cur.Value + 1
		rec := global.Leader{Router: l.id, Term: term, Since: l.now().UTC()}
		_, err = l.store.Txn().PutLeader(0, rec).PutTerm(cur.Rev, term).Commit(ctx)
		if errors.Is(err, global.ErrConflict) {
			continue // another router claimed or the term moved: read again
		}
		if err != nil {
			return false, fmt.Errorf("claim lead: %w", err)
		}
		return l.fenceClaimed(ctx, term)
	}
	return false, fmt.Errorf("claim lead: lost %d races: %w", claimRetries, global.ErrConflict)
}

// fenceClaimed fences on a term just claimed; a promotion of another
// router in between leaves this one following, not failing.
func (l *Lead) fenceClaimed(ctx context.Context, term uint64) (bool, error) {
	err := l.fence(ctx, term)
	if errors.Is(err, ErrNotLeader) {
		l.log.Warn("the lead moved on as it was claimed", "err", err)
		return false, nil
	}
	return err == nil, err
}

// claimRetries bounds how often a claim reads again after losing a race.
const claimRetries = 8

// claimName names the directory this router's, or refuses one named
// another's: a region's router on the global directory, or the reverse,
// would lease nodes with the other's terms.
func (l *Lead) claimName(ctx context.Context) error {
	if l.name == "" {
		return nil
	}
	if err := l.store.ClaimName(ctx, l.name); err != nil {
		return fmt.Errorf("this router leads %s's directory (--region, --global): %w", l.name, err)
	}
	return nil
}

// Promote moves the directory's term on and takes the lead at it.
func (l *Lead) Promote(ctx context.Context) (uint64, error) {
	if err := l.claimName(ctx); err != nil {
		return 0, err
	}
	term, err := l.store.Promote(ctx, l.id)
	if err != nil {
		return 0, err
	}
	return term, l.fence(ctx, term)
}

// fence reads the term key and leader record and, if they still say this
// router leads at term, leads with a Store fenced on the term's revision.
func (l *Lead) fence(ctx context.Context, term uint64) error {
	cur, err := l.store.Term(ctx)
	if err != nil {
		return fmt.Errorf("read term: %w", err)
	}
	lead, err := l.store.Leader(ctx)
	if err != nil {
		return fmt.Errorf("read leader: %w", err)
	}
	if cur.Value != term || lead.Value.Router != l.id || lead.Value.Term != term {
		return &NotLeaderError{Leader: lead.Value.Router, Term: lead.Value.Term}
	}
	l.mu.Lock()
	l.leading, l.term, l.fenced = true, term, l.store.Fenced(cur.Rev)
	l.mu.Unlock()
	l.log.Info("leading", "router", l.id, "term", term)
	return nil
}

// Changes returns the fenced Store to write a change with, or a
// NotLeaderError naming the leader. A view showing a later term or another
// leader ends this router's lead first. It waits (within ctx) for the
// view's first list, so a refusal can name the leader.
func (l *Lead) Changes(ctx context.Context) (*global.Store, error) {
	ctx, cancel := context.WithTimeout(ctx, readyWait)
	defer cancel()
	select {
	case <-l.ready():
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", ErrNotReady, ctx.Err())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checkViewLocked()
	if !l.leading {
		return nil, l.notLeaderLocked()
	}
	return l.fenced, nil
}

// checkViewLocked steps down when the view has moved past this router's
// term (another router was promoted).
func (l *Lead) checkViewLocked() {
	if !l.leading {
		return
	}
	v := l.view()
	if v == nil {
		return
	}
	if v.Term > l.term || v.Leader.Term > l.term || (v.Leader.Term == l.term && v.Leader.Router != l.id) {
		l.leading = false
		if v.Leader.Router == l.id {
			l.log.Info("this router was promoted again: it takes changes once it holds the new term", "term", v.Leader.Term, "our_term", l.term)
			return
		}
		l.log.Warn("another router took the lead: no more changes here", "leader", v.Leader.Router, "term", v.Leader.Term, "our_term", l.term)
	}
}

// Lost is told that a fenced write failed on a condition: when the term
// key has moved on, this router no longer leads.
func (l *Lead) Lost(ctx context.Context, err error) {
	if !errors.Is(err, global.ErrConflict) {
		return
	}
	cur, rerr := l.store.Term(ctx)
	if rerr != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.leading && cur.Value != l.term {
		l.leading = false
		l.log.Warn("the term moved on: no more changes here", "term", cur.Value, "our_term", l.term)
	}
}

// notLeaderLocked names the leader as this router's view has it.
func (l *Lead) notLeaderLocked() error {
	e := &NotLeaderError{}
	if v := l.view(); v != nil {
		e.Leader, e.Term = v.Leader.Router, v.Leader.Term
	}
	return e
}

// Status reports whether this router leads, and at which term.
func (l *Lead) Status() (bool, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checkViewLocked()
	return l.leading, l.term
}

// StepDown ends this router's lead at once: a node fenced its term, so a
// router was promoted over it.
func (l *Lead) StepDown(highest uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.leading {
		l.leading = false
		l.log.Warn("a node took a higher term: no more changes here", "highest", highest, "our_term", l.term)
	}
}
