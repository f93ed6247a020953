package region

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/lease"
)

// A region's leading router started with --global links its region's
// directory to the global one (DESIGN.md §7, docs/regions.md). While the
// global tier leases the region, it copies the region's records down into
// its own directory, which the region's routers forward from: they go on
// forwarding, and see failovers the global tier makes, while the global
// directory cannot be reached; changes are refused there, naming the
// global tier. While the region leases its own nodes, its directory is
// written first and the link copies the region's records up into the
// global directory. Either way it keeps the region record of both
// directories in line and drives the region's side of a handoff
// (handoff.go).

// ErrGlobalUnreachable: a region's router cannot reach the global
// directory for a step that needs it (503).
var ErrGlobalUnreachable = errors.New("the global directory cannot be reached")

// ErrMirrored: a change sent to a router that serves a copy of the global
// directory.
var ErrMirrored = errors.New("this router serves its region from a copy of the global directory: placements change at the global tier's leading router; send the change there")

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

// mirror is a region's leading router's link to the global directory.
type mirror struct {
	rt     *Router
	region string
	urls   []string
	prefix string
	clock  lease.Clock
	// open opens the global directory (OpenEtcd; tests may replace it).
	open func(ctx context.Context) (global.Directory, error)
	poke chan struct{} // look again now

	mu      sync.Mutex
	synced  time.Time                       // guarded by mu: when the last sync landed
	rev     int64                           // guarded by mu: the global revision it read
	from    global.Directory                // guarded by mu: the global directory, once open
	gaveAt  time.Duration                   // guarded by mu: when this router gave its region to the global tier (0: it did not)
	ackedAt time.Duration                   // guarded by mu: when the global directory first showed a forced takeover (0: not yet)
	dgRec   global.Versioned[global.Region] // guarded by mu: the global directory's region record, as last read
	// answered is when the global directory last answered a step of the
	// link (a forced takeover is refused for forceGuard after it).
	// Guarded by mu.
	answered time.Time
	gapSeen  [2]uint64 // guarded by mu: the epochs of the last gap refused and audited

	// ls is what the link holds of both directories while it leads; only
	// run's goroutine touches it (nil: list them again).
	ls *linkState
	// lists counts the times the link listed both directories whole.
	lists atomic.Int64
}

func newMirror(rt *Router) *mirror {
	m := &mirror{rt: rt, region: rt.cfg.Region, urls: rt.cfg.GlobalURLs, prefix: rt.cfg.Prefix,
		clock: lease.NewMonoClock(), poke: make(chan struct{}, 1)}
	m.open = func(ctx context.Context) (global.Directory, error) {
		if rt.cfg.Global != nil {
			return global.Sealing(unclosed{rt.cfg.Global}, rt.keys), nil
		}
		d, err := global.OpenEtcd(ctx, m.urls, m.prefix, rt.etcdOptions(m.urls)...)
		if err != nil {
			return nil, err
		}
		return global.Sealing(d, rt.keys), nil
	}
	return m
}

// unclosed is a directory the router does not own: its Close does
// nothing.
type unclosed struct{ global.Directory }

func (unclosed) Close() error { return nil }

// register adds the link's gauges: how long ago the copy last matched
// the global directory, and the global revision it matched.
func (m *mirror) register(reg *prometheus.Registry) error {
	age := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fenec_router_mirror_age_seconds",
		Help: "Seconds since this region's directory and the global one last matched (-1: never).",
	}, func() float64 {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.synced.IsZero() {
			return -1
		}
		return time.Since(m.synced).Seconds()
	})
	rev := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fenec_router_mirror_global_revision",
		Help: "The global directory's revision this region's copy last matched.",
	}, func() float64 {
		m.mu.Lock()
		defer m.mu.Unlock()
		return float64(m.rev)
	})
	return errors.Join(reg.Register(age), reg.Register(rev))
}

// wake has the link look again at once.
func (m *mirror) wake() {
	select {
	case m.poke <- struct{}{}:
	default:
	}
}

// global returns the global directory's store, nil while it is not open.
func (m *mirror) global() *global.Store {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.from == nil {
		return nil
	}
	return global.NewStore(m.from)
}

// awaitGlobal returns the global directory's store once the link has
// opened it, nil if ctx ends first.
func (m *mirror) awaitGlobal(ctx context.Context) *global.Store {
	for {
		if s := m.global(); s != nil {
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

// run links until ctx ends: while this router leads, both directories are
// listed once and followed by their watches (link.go), and a step runs
// whenever either changed (or mirrorResync passed, or linkInFlight while a
// handoff is in flight); a failed open, list or step is tried again after
// a back-off, the copy left as it was.
func (m *mirror) run(ctx context.Context) {
	defer func() {
		m.drop()
		m.mu.Lock()
		from := m.from
		m.from = nil
		m.mu.Unlock()
		if from != nil {
			_ = from.Close()
		}
	}()
	backoff := 100 * time.Millisecond
	failed := func(what string, err error) bool {
		m.rt.log.Warn("link to the global directory: "+what+": the region forwards from its copy as it stands", "err", err, "retry", backoff)
		ok := m.sleep(ctx, backoff)
		backoff = min(2*backoff, mirrorMaxBackoff)
		return ok
	}
	for ctx.Err() == nil {
		if leading, _ := m.rt.lead.status(); !leading {
			m.drop()
			if !m.sleep(ctx, time.Second) {
				return
			}
			continue
		}
		if m.global() == nil {
			octx, cancel := context.WithTimeout(ctx, mirrorCallWait)
			d, err := m.open(octx)
			cancel()
			if err != nil {
				if !failed("open the global directory", err) {
					return
				}
				continue
			}
			m.mu.Lock()
			m.from = d
			m.mu.Unlock()
		}
		if m.ls == nil {
			if err := m.follow(ctx); err != nil {
				if !failed("list the directories", err) {
					return
				}
				continue
			}
		}
		inFlight, err := m.step(ctx)
		if err != nil {
			if !failed("sync", err) {
				return
			}
			continue
		}
		backoff = 100 * time.Millisecond
		m.awaitChange(ctx, inFlight)
	}
}

// sleep waits d or until ctx ends (false).
func (m *mirror) sleep(ctx context.Context, d time.Duration) bool {
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
func (m *mirror) step(ctx context.Context) (bool, error) {
	sctx, cancel := context.WithTimeout(ctx, mirrorCallWait)
	defer cancel()
	s, err := m.rt.lead.changes(sctx)
	if err != nil {
		return false, err
	}
	m.ls.drain(m) // what came before the step: changed from here on is what came during it
	if m.ls == nil {
		return false, errLinkLost
	}
	m.ls.changed = false
	dgs := m.global()
	snap, err := m.snapGlobal(sctx, dgs.Directory())
	if err != nil {
		return false, err
	}
	m.mu.Lock()
	m.answered = m.rt.now()
	m.mu.Unlock()
	rec, err := m.reconcile(sctx, s, dgs, snap)
	if err != nil {
		m.rt.lead.lost(sctx, err)
		return false, err
	}
	var res global.MirrorResult
	switch rec.de.Value.LeasedBy() {
	case global.LeaserGlobal:
		res, err = m.down(sctx, s, rec.de, rec.dg)
	case global.LeaserRegion:
		res, err = m.up(sctx, dgs, rec.de, rec.dg)
	}
	if err != nil {
		m.rt.lead.lost(sctx, err)
		return false, err
	}
	m.mu.Lock()
	m.synced, m.rev = time.Now(), res.Rev
	m.mu.Unlock()
	if res.Put+res.Deleted > 0 {
		m.rt.log.Info("link: region records copied", "region", m.region, "up", rec.de.Value.LeasedBy() == global.LeaserRegion,
			"rev", res.Rev, "put", res.Put, "deleted", res.Deleted)
	}
	return rec.de.Value.InFlight(), nil
}

// down copies the region's records from the global directory into the
// region's, guarded on the region's record as read (de), once the records
// held are as new as both region records (dg: the global one).
func (m *mirror) down(ctx context.Context, s *global.Store, de, dg global.Versioned[global.Region]) (global.MirrorResult, error) {
	if m.ls == nil {
		return global.MirrorResult{}, errLinkLost
	}
	guarded := s.Guarded(global.IfModRev(global.RegionKey(m.region), de.Rev))
	return m.ls.sync(ctx, m, false, guarded, de.Rev, dg.Rev)
}

// up copies the region's records from the region's directory into the
// global one, guarded on the global record as read (dg): once the global
// tier takes the region back, nothing more is copied up. The records held
// are first brought as new as both region records (de: the region's, the
// last the region wrote before asking for it).
func (m *mirror) up(ctx context.Context, dgs *global.Store, de, dg global.Versioned[global.Region]) (global.MirrorResult, error) {
	if m.ls == nil {
		return global.MirrorResult{}, errLinkLost
	}
	guarded := dgs.Guarded(global.IfModRev(global.RegionKey(m.region), dg.Rev))
	return m.ls.sync(ctx, m, true, guarded, de.Rev, dg.Rev)
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
func (m *mirror) snapGlobal(ctx context.Context, d global.Directory) (globalSnap, error) {
	kv, err := d.Get(ctx, global.RegionKey(m.region))
	if err != nil && !errors.Is(err, global.ErrNotFound) {
		return globalSnap{}, fmt.Errorf("read the global directory: %w", err)
	}
	if m.ls == nil {
		return globalSnap{}, errLinkLost
	}
	if err := m.ls.await(ctx, m, false, kv.ModRev); err != nil {
		return globalSnap{}, err
	}
	return m.ls.snap(m.region), nil
}

// awaitChange returns once either directory changed after the last step
// began (other than by the link's own copies), the link was poked, or mirrorResync
// (linkInFlight while a handoff is in flight) passed. A watch that ended
// drops what the link holds: the next step lists again.
func (m *mirror) awaitChange(ctx context.Context, inFlight bool) {
	ls := m.ls
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
			ls.take(m, false, r, ok)
		case r, ok := <-ls.rch:
			ls.take(m, true, r, ok)
		case <-m.poke:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	// Changes come in bursts (a failover of a node's tenants): one step
	// takes what has come so far, and what comes while it runs goes to the
	// next (a step costs what its changes do, not a read of everything,
	// so it no longer waits to gather more).
	if m.ls != nil {
		m.ls.drain(m)
	}
}

// mirroring says whether the router is a region's linked to the global
// directory.
func (rt *Router) mirroring() bool { return len(rt.cfg.GlobalURLs) > 0 || rt.cfg.Global != nil }

// ownsOwnRegion says whether a region's router owns its region's
// placements now (its region leases its nodes), by its view, or why not.
func (rt *Router) ownsOwnRegion() error {
	v := rt.watcher.View()
	if v == nil {
		return ErrNotReady
	}
	return rt.owns(v.RegionRecord(rt.cfg.Region))
}

// globalAnswered is when the global directory last answered a step of the
// link (zero: never since this router led).
func (m *mirror) globalAnswered() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.answered
}
