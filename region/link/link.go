package link

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/lease"
)

const (
	// mirrorResync is the longest the link waits for a change before it
	// steps anyway (the region records in line, a handoff's step; the
	// records are copied from its watches, not read again).
	mirrorResync = 30 * time.Second
	// mirrorCallWait bounds one read or write of a sync.
	mirrorCallWait = 10 * time.Second
	// mirrorMaxBackoff bounds the wait between failed syncs.
	mirrorMaxBackoff = 2 * time.Second
	// linkInFlight is how often the link looks while a handoff is in
	// flight (it also wakes at every change of either directory).
	linkInFlight = 50 * time.Millisecond
)

// Lead is what the link asks of the router's lead.
type Lead interface {
	// Status says whether this router leads, and at which term.
	Status() (leading bool, term uint64)
	// Changes returns the region's directory fenced on the term, or why
	// not.
	Changes(ctx context.Context) (*global.Store, error)
	// Lost is told of a fenced write that failed.
	Lost(ctx context.Context, err error)
}

// Leasing is what the link tells the router's leasing of a handoff's
// steps (package region/leasing's Leasing).
type Leasing interface {
	// Poke has the leasing look at the region's record again.
	Poke()
	// Resync has the leasing set its nodes from the view now, so no grant
	// to a node it no longer leases is out once it returns.
	Resync()
	// SettleForce says when a forced takeover is settled, on Deps.Clock
	// (0: none is in flight).
	SettleForce(at time.Duration)
}

// Deps are everything the link uses of the router.
type Deps struct {
	// ID is the router's name: the region's router while it leases.
	ID string
	// Region is the region the router serves.
	Region string
	// Own is the router's lease (--auto-failover); 0: it cannot lease the
	// region's nodes, and answers an offer of them with a rollback.
	Own time.Duration
	// OfferWait bounds how long an offer to the global tier waits for its
	// ready (0: global.OfferWait).
	OfferWait time.Duration
	// Dir is the region's directory, unfenced: the link lists and watches
	// it; it writes through Lead.Changes.
	Dir global.Directory
	// Open opens the global directory; Run closes what it returns.
	Open func(ctx context.Context) (global.Directory, error)
	// Lead is the router's lead: the link runs while it leads.
	Lead Lead
	// Leasing is the router's leasing.
	Leasing Leasing
	// Settle waits (bounded) until the router's view holds revision rev
	// of the region's directory.
	Settle func(ctx context.Context, rev int64)
	// AuditRegion records a region record the link wrote into dir (the
	// directory's name), as it was and as it is now; AuditControl one
	// line of the link's doing.
	AuditRegion  func(dir string, was, now global.Region)
	AuditControl func(what, detail string)
	// Clock is the router's monotonic clock, the leasing's: a handoff's
	// waits and a forced takeover's settling are read from it.
	Clock lease.Clock
	// Now is the wall clock a handoff's steps are dated by.
	Now func() time.Time
	Log *slog.Logger
}

// Link is a region's leading router's link to the global directory.
type Link struct {
	deps   Deps
	region string
	log    *slog.Logger
	poke   chan struct{} // look again now

	mu      sync.Mutex
	synced  time.Time                       // guarded by mu: when the last sync landed
	rev     int64                           // guarded by mu: the global revision it read
	from    global.Directory                // guarded by mu: the global directory, once open
	gaveAt  time.Duration                   // guarded by mu: when this router gave its region to the global tier (0: it did not)
	ackedAt time.Duration                   // guarded by mu: when the global directory first showed a forced takeover (0: not yet)
	dgRec   global.Versioned[global.Region] // guarded by mu: the global directory's region record, as last read
	// answered is when the global directory last answered a step of the
	// link. Guarded by mu.
	answered time.Time
	gapSeen  [2]uint64 // guarded by mu: the epochs of the last gap refused and audited

	// ls is what the link holds of both directories while it leads; only
	// Run's goroutine touches it (nil: list them again).
	ls *linkState
	// lists counts the times the link listed both directories whole.
	lists atomic.Int64
}

// New returns the link over deps, not running: Run runs it.
func New(deps Deps) *Link {
	if deps.Clock == nil {
		deps.Clock = lease.NewMonoClock()
	}
	if deps.Now == nil {
		deps.Now = func() time.Time { return time.Now().UTC() }
	}
	if deps.OfferWait <= 0 {
		deps.OfferWait = global.OfferWait
	}
	if deps.Log == nil {
		deps.Log = slog.New(slog.DiscardHandler)
	}
	return &Link{deps: deps, region: deps.Region, log: deps.Log, poke: make(chan struct{}, 1)}
}

// Register adds the link's gauges: how long ago the copy last matched
// the global directory, and the global revision it matched.
func (l *Link) Register(reg prometheus.Registerer) error {
	age := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fenec_router_mirror_age_seconds",
		Help: "Seconds since this region's directory and the global one last matched (-1: never).",
	}, func() float64 {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.synced.IsZero() {
			return -1
		}
		return time.Since(l.synced).Seconds()
	})
	rev := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fenec_router_mirror_global_revision",
		Help: "The global directory's revision this region's copy last matched.",
	}, func() float64 {
		l.mu.Lock()
		defer l.mu.Unlock()
		return float64(l.rev)
	})
	return errors.Join(reg.Register(age), reg.Register(rev))
}

// Wake has the link look again at once.
func (l *Link) Wake() {
	select {
	case l.poke <- struct{}{}:
	default:
	}
}

// Global returns the global directory's store, nil while it is not open.
func (l *Link) Global() *global.Store {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.from == nil {
		return nil
	}
	return global.NewStore(l.from)
}

// AwaitGlobal returns the global directory's store once the link has
// opened it, nil if ctx ends first.
func (l *Link) AwaitGlobal(ctx context.Context) *global.Store {
	for {
		if s := l.Global(); s != nil {
			return s
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// GlobalAnswered is when the global directory last answered a step of
// the link (zero: never since this router led).
func (l *Link) GlobalAnswered() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.answered
}

// GlobalEpoch is the epoch of the global directory's record of the
// region, as the link last read it (0: not read).
func (l *Link) GlobalEpoch() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dgRec.Value.Epoch
}

// Run links until ctx ends: while this router leads, both directories are
// listed once and followed by their watches (follow.go), and a step runs
// whenever either changed (or mirrorResync passed, or linkInFlight while a
// handoff is in flight); a failed open, list or step is tried again after
// a back-off, the copy left as it was. It closes the global directory
// before it returns.
func (l *Link) Run(ctx context.Context) {
	defer func() {
		l.drop()
		l.mu.Lock()
		from := l.from
		l.from = nil
		l.mu.Unlock()
		if from != nil {
			_ = from.Close()
		}
	}()
	backoff := 100 * time.Millisecond
	failed := func(what string, err error) bool {
		l.log.Warn("link to the global directory: "+what+": the region forwards from its copy as it stands", "err", err, "retry", backoff)
		ok := sleep(ctx, backoff)
		backoff = min(2*backoff, mirrorMaxBackoff)
		return ok
	}
	for ctx.Err() == nil {
		if leading, _ := l.deps.Lead.Status(); !leading {
			l.drop()
			if !sleep(ctx, time.Second) {
				return
			}
			continue
		}
		if l.Global() == nil {
			octx, cancel := context.WithTimeout(ctx, mirrorCallWait)
			d, err := l.deps.Open(octx)
			cancel()
			if err != nil {
				if !failed("open the global directory", err) {
					return
				}
				continue
			}
			l.mu.Lock()
			l.from = d
			l.mu.Unlock()
		}
		if l.ls == nil {
			if err := l.follow(ctx); err != nil {
				if !failed("list the directories", err) {
					return
				}
				continue
			}
		}
		inFlight, err := l.step(ctx)
		if err != nil {
			if !failed("sync", err) {
				return
			}
			continue
		}
		backoff = 100 * time.Millisecond
		l.awaitChange(ctx, inFlight)
	}
}

// sleep waits d or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// step brings the two region records in line, takes the region's side of
// a handoff in flight, and copies the region's records the way its leasing
// goes: down while the global tier leases, up while the region does —
// those the watches changed since the last step, or all of them after a
// list. It returns whether a handoff is in flight.
func (l *Link) step(ctx context.Context) (bool, error) {
	sctx, cancel := context.WithTimeout(ctx, mirrorCallWait)
	defer cancel()
	s, err := l.deps.Lead.Changes(sctx)
	if err != nil {
		return false, err
	}
	l.ls.drain(l) // what came before the step: changed from here on is what came during it
	if l.ls == nil {
		return false, errLinkLost
	}
	l.ls.changed = false
	dgs := l.Global()
	snap, err := l.snapGlobal(sctx, dgs.Directory())
	if err != nil {
		return false, err
	}
	l.mu.Lock()
	l.answered = l.deps.Now()
	l.mu.Unlock()
	rec, err := l.reconcile(sctx, s, dgs, snap)
	if err != nil {
		l.deps.Lead.Lost(sctx, err)
		return false, err
	}
	// The far records (global.Far) are copied down whichever side leases.
	if l.ls == nil {
		return false, errLinkLost
	}
	far, err := l.ls.syncFar(sctx, l, s, rec.de.Rev, rec.dg.Rev)
	if err != nil {
		l.deps.Lead.Lost(sctx, err)
		return false, err
	}
	if far.Put+far.Deleted > 0 {
		l.log.Info("link: far records copied", "region", l.region, "put", far.Put, "deleted", far.Deleted)
	}
	var res global.MirrorResult
	switch rec.de.Value.LeasedBy() {
	case global.LeaserGlobal:
		res, err = l.down(sctx, s, rec.de, rec.dg)
	case global.LeaserRegion:
		res, err = l.up(sctx, dgs, rec.de, rec.dg)
	}
	if err != nil {
		l.deps.Lead.Lost(sctx, err)
		return false, err
	}
	l.mu.Lock()
	l.synced, l.rev = time.Now(), res.Rev
	l.mu.Unlock()
	if res.Put+res.Deleted > 0 {
		l.log.Info("link: region records copied", "region", l.region, "up", rec.de.Value.LeasedBy() == global.LeaserRegion,
			"rev", res.Rev, "put", res.Put, "deleted", res.Deleted)
	}
	return rec.de.Value.InFlight(), nil
}

// down copies the region's records from the global directory into the
// region's, guarded on the region's record as read (de), once the records
// held are as new as both region records (dg: the global one).
func (l *Link) down(ctx context.Context, s *global.Store, de, dg global.Versioned[global.Region]) (global.MirrorResult, error) {
	if l.ls == nil {
		return global.MirrorResult{}, errLinkLost
	}
	guarded := s.Guarded(global.IfModRev(global.RegionKey(l.region), de.Rev))
	return l.ls.sync(ctx, l, false, guarded, de.Rev, dg.Rev)
}

// up copies the region's records from the region's directory into the
// global one, guarded on the global record as read (dg): once the global
// tier takes the region back, nothing more is copied up. The records held
// are first brought as new as both region records (de: the region's, the
// last the region wrote before asking for it).
func (l *Link) up(ctx context.Context, dgs *global.Store, de, dg global.Versioned[global.Region]) (global.MirrorResult, error) {
	if l.ls == nil {
		return global.MirrorResult{}, errLinkLost
	}
	guarded := dgs.Guarded(global.IfModRev(global.RegionKey(l.region), dg.Rev))
	return l.ls.sync(ctx, l, true, guarded, de.Rev, dg.Rev)
}

// globalSnap is what a step reads of the global directory: the region
// record with its revision, and the view of the directory's own records
// (its term, leader and longest-lease record), as the records held show
// them once they are as new as the global directory's region record.
type globalSnap struct {
	view   *global.View
	region global.Versioned[global.Region]
}

// snapGlobal reads the global directory's region record (one small read:
// it says the global tier answers, and how new the records held must be)
// and returns the snap from the records held, once they are that new.
func (l *Link) snapGlobal(ctx context.Context, d global.Directory) (globalSnap, error) {
	kv, err := d.Get(ctx, global.RegionKey(l.region))
	if err != nil && !errors.Is(err, global.ErrNotFound) {
		return globalSnap{}, fmt.Errorf("read the global directory: %w", err)
	}
	if l.ls == nil {
		return globalSnap{}, errLinkLost
	}
	if err := l.ls.await(ctx, l, false, kv.ModRev); err != nil {
		return globalSnap{}, err
	}
	return l.ls.snap(l.region), nil
}

// awaitChange returns once either directory changed after the last step
// began (other than by the link's own copies), the link was woken, or
// mirrorResync (linkInFlight while a handoff is in flight) passed. A watch
// that ended drops what the link holds: the next step lists again.
func (l *Link) awaitChange(ctx context.Context, inFlight bool) {
	ls := l.ls
	if ls == nil {
		return
	}
	if !ls.changed && ls.dirty.Empty() {
		wait := mirrorResync
		if inFlight {
			wait = linkInFlight
		}
		t := time.NewTimer(wait)
		select {
		case r, ok := <-ls.gch:
			ls.take(l, false, r, ok)
		case r, ok := <-ls.rch:
			ls.take(l, true, r, ok)
		case <-l.poke:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	// Changes come in bursts (a failover of a node's tenants): one step
	// takes what has come so far, and what comes while it runs goes to the
	// next (a step costs what its changes do, not a read of everything,
	// so it no longer waits to gather more).
	if l.ls != nil {
		l.ls.drain(l)
	}
}
