package region

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
	// reads both directories again anyway.
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
}

func newMirror(rt *Router) *mirror {
	m := &mirror{rt: rt, region: rt.cfg.Region, urls: rt.cfg.GlobalURLs, prefix: rt.cfg.Prefix,
		clock: lease.NewMonoClock(), poke: make(chan struct{}, 1)}
	m.open = func(ctx context.Context) (global.Directory, error) {
		d, err := global.OpenEtcd(ctx, m.urls, m.prefix, rt.etcdOptions(m.urls)...)
		if err != nil {
			return nil, err
		}
		return global.Sealing(d, rt.keys), nil
	}
	return m
}

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

// run links until ctx ends: a step whenever this router leads, then a wait
// for a change of either directory (or mirrorResync, or linkInFlight
// while a handoff is in flight); a failed open or step is tried again
// after a back-off, the copy left as it was.
func (m *mirror) run(ctx context.Context) {
	defer func() {
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
		rev, inFlight, err := m.step(ctx)
		if err != nil {
			if !failed("sync", err) {
				return
			}
			continue
		}
		backoff = 100 * time.Millisecond
		m.awaitChange(ctx, rev, inFlight)
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
// goes: down while the global tier leases, up while the region does. It
// returns the global revision read and whether a handoff is in flight.
func (m *mirror) step(ctx context.Context) (int64, bool, error) {
	sctx, cancel := context.WithTimeout(ctx, mirrorCallWait)
	defer cancel()
	s, err := m.rt.lead.changes(sctx)
	if err != nil {
		return 0, false, err
	}
	dgs := m.global()
	snap, err := snapGlobal(sctx, dgs.Directory(), m.region)
	if err != nil {
		return 0, false, err
	}
	rec, err := m.reconcile(sctx, s, dgs, snap)
	if err != nil {
		m.rt.lead.lost(sctx, err)
		return 0, false, err
	}
	res := global.MirrorResult{Rev: snap.rev}
	switch rec.de.Value.LeasedBy() {
	case global.LeaserGlobal:
		res, err = m.down(sctx, s, rec.de, snap)
	case global.LeaserRegion:
		res, err = m.up(sctx, s, dgs, rec.dg, snap)
	}
	if err != nil {
		m.rt.lead.lost(sctx, err)
		return 0, false, err
	}
	m.mu.Lock()
	m.synced, m.rev = time.Now(), res.Rev
	m.mu.Unlock()
	if res.Put+res.Deleted > 0 {
		m.rt.log.Info("link: region records copied", "region", m.region, "up", rec.de.Value.LeasedBy() == global.LeaserRegion,
			"rev", res.Rev, "put", res.Put, "deleted", res.Deleted)
	}
	return res.Rev, rec.de.Value.InFlight(), nil
}

// down copies the region's records from the global directory, as snap
// listed it, into the region's, guarded on the region's record as read
// (de).
func (m *mirror) down(ctx context.Context, s *global.Store, de global.Versioned[global.Region], snap globalSnap) (global.MirrorResult, error) {
	guarded := s.Guarded(global.IfModRev(global.RegionKey(m.region), de.Rev))
	return global.Mirror{Region: m.region}.SyncListed(ctx, guarded, snap.kvs, snap.rev, nil)
}

// up copies the region's records from the region's directory into the
// global one (whose records snap listed), guarded on the global record as
// read (dg): once the global tier takes the region back, nothing more is
// copied up.
func (m *mirror) up(ctx context.Context, s *global.Store, dgs *global.Store, dg global.Versioned[global.Region], snap globalSnap) (global.MirrorResult, error) {
	kvs, rev, err := s.Directory().List(ctx, "")
	if err != nil {
		return global.MirrorResult{}, err
	}
	guarded := dgs.Guarded(global.IfModRev(global.RegionKey(m.region), dg.Rev))
	res, err := global.Mirror{Region: m.region, Up: true}.SyncListed(ctx, guarded, kvs, rev, snap.kvs)
	res.Rev = snap.rev // the link waits on the global directory's revision
	return res, err
}

// globalSnap is the global directory as one list read it: every record,
// the view of them, and the region record with its revision. A step of
// the link reads the global directory once (it may be a wide-area round
// trip away).
type globalSnap struct {
	kvs    []global.KV
	rev    int64
	view   *global.View
	region global.Versioned[global.Region]
}

func snapGlobal(ctx context.Context, d global.Directory, r string) (globalSnap, error) {
	kvs, rev, err := d.List(ctx, "")
	if err != nil {
		return globalSnap{}, fmt.Errorf("read the global directory: %w", err)
	}
	snap := globalSnap{kvs: kvs, rev: rev}
	snap.view, _ = global.ViewOf(kvs, rev)
	snap.region = global.Versioned[global.Region]{Value: regionRecord(snap.view, r)}
	for _, kv := range kvs {
		if kv.Key == global.RegionKey(r) {
			snap.region.Rev = kv.ModRev
		}
	}
	return snap, nil
}

// awaitChange returns once either directory changed after what was read,
// the link was poked, or mirrorResync (linkInFlight while a handoff is in
// flight) passed.
func (m *mirror) awaitChange(ctx context.Context, rev int64, inFlight bool) {
	wait := mirrorResync
	if inFlight {
		wait = linkInFlight
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var gch <-chan global.WatchResponse
	if from := m.global(); from != nil {
		if ch, err := from.Directory().Watch(wctx, "", rev); err == nil {
			gch = ch
		}
	}
	var lch <-chan global.WatchResponse
	if ch, err := m.rt.dir.Watch(wctx, "", m.rt.watcher.Rev()); err == nil {
		lch = ch
	}
	select {
	case <-gch:
	case <-lch:
	case <-m.poke:
	case <-wctx.Done():
	}
	// Changes come in bursts (a failover of a node's tenants): a moment's
	// pause lets one sync take the burst.
	m.sleep(ctx, 20*time.Millisecond)
}

// mirroring says whether the router is a region's linked to the global
// directory.
func (rt *Router) mirroring() bool { return len(rt.cfg.GlobalURLs) > 0 }

// ownsOwnRegion says whether a region's router owns its region's
// placements now (its region leases its nodes), by its view, or why not.
func (rt *Router) ownsOwnRegion() error {
	v := rt.watcher.View()
	if v == nil {
		return ErrNotReady
	}
	return rt.owns(regionRecord(v, rt.cfg.Region))
}
