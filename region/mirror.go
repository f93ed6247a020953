package region

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenec-go/fenec/global"
)

// A region's leading router started with --global mirrors its region's
// records from the global directory into its own (DESIGN.md §7), and the
// region's routers forward from that copy: they go on forwarding, and
// see failovers the global tier makes, while the global directory cannot
// be reached. Placements change only at the global tier: a mirroring
// router refuses /_shard/ changes (promoting a standby router of the
// region excepted), leases no node and repairs nothing.

// ErrMirrored: a change sent to a router that serves a copy of the global
// directory.
var ErrMirrored = errors.New("this router serves its region from a copy of the global directory: placements change at the global tier's leading router; send the change there")

const (
	// mirrorResync is the longest a mirror waits for a change before it
	// reads the global directory again anyway.
	mirrorResync = 30 * time.Second
	// mirrorCallWait bounds one read or write of a sync.
	mirrorCallWait = 10 * time.Second
	// mirrorMaxBackoff bounds the wait between failed syncs.
	mirrorMaxBackoff = 2 * time.Second
)

// mirror keeps the router's directory a copy of its region's records in
// the global directory while the router leads it.
type mirror struct {
	rt     *Router
	region string
	urls   []string
	prefix string
	// open opens the global directory (OpenEtcd; tests may replace it).
	open func(ctx context.Context) (global.Directory, error)

	mu     sync.Mutex
	synced time.Time // guarded by mu: when the last sync landed
	rev    int64     // guarded by mu: the global revision it read
}

func newMirror(rt *Router) *mirror {
	m := &mirror{rt: rt, region: rt.cfg.Region, urls: rt.cfg.GlobalURLs, prefix: rt.cfg.Prefix}
	m.open = func(ctx context.Context) (global.Directory, error) {
		return global.OpenEtcd(ctx, m.urls, m.prefix)
	}
	return m
}

// register adds the mirror's gauges: how long ago the copy last matched
// the global directory, and the global revision it matched.
func (m *mirror) register(reg *prometheus.Registry) error {
	age := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fenec_router_mirror_age_seconds",
		Help: "Seconds since this region's copy last matched the global directory (-1: never).",
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

// run mirrors until ctx ends: a sync whenever this router leads, then a
// wait for the global directory's next change (or mirrorResync); a failed
// open or sync is tried again after a back-off, the copy left as it was.
func (m *mirror) run(ctx context.Context) {
	var from global.Directory
	defer func() {
		if from != nil {
			_ = from.Close()
		}
	}()
	backoff := 100 * time.Millisecond
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	failed := func(what string, err error) bool {
		m.rt.log.Warn("mirror: "+what+": the region forwards from its copy as it stands", "err", err, "retry", backoff)
		ok := wait(backoff)
		backoff = min(2*backoff, mirrorMaxBackoff)
		return ok
	}
	for ctx.Err() == nil {
		if leading, _ := m.rt.lead.status(); !leading {
			if !wait(time.Second) {
				return
			}
			continue
		}
		if from == nil {
			octx, cancel := context.WithTimeout(ctx, mirrorCallWait)
			d, err := m.open(octx)
			cancel()
			if err != nil {
				if !failed("open the global directory", err) {
					return
				}
				continue
			}
			from = d
		}
		rev, err := m.syncOnce(ctx, from)
		if err != nil {
			if !failed("sync", err) {
				return
			}
			continue
		}
		backoff = 100 * time.Millisecond
		m.awaitChange(ctx, from, rev)
	}
}

// syncOnce makes the copy match the global directory once.
func (m *mirror) syncOnce(ctx context.Context, from global.Directory) (int64, error) {
	sctx, cancel := context.WithTimeout(ctx, mirrorCallWait)
	defer cancel()
	s, err := m.rt.lead.changes(sctx)
	if err != nil {
		return 0, err
	}
	res, err := global.Mirror{From: from, Region: m.region}.Sync(sctx, s)
	if err != nil {
		m.rt.lead.lost(sctx, err)
		return 0, err
	}
	m.mu.Lock()
	m.synced, m.rev = time.Now(), res.Rev
	m.mu.Unlock()
	if res.Put+res.Deleted > 0 {
		m.rt.log.Info("mirror: region copy updated", "region", m.region, "global_rev", res.Rev,
			"put", res.Put, "deleted", res.Deleted)
	}
	return res.Rev, nil
}

// awaitChange returns once the global directory changed after rev, the
// watch failed, or mirrorResync passed.
func (m *mirror) awaitChange(ctx context.Context, from global.Directory, rev int64) {
	wctx, cancel := context.WithTimeout(ctx, mirrorResync)
	defer cancel()
	ch, err := from.Watch(wctx, "", rev)
	if err != nil {
		return
	}
	select {
	case <-ch:
	case <-wctx.Done():
	}
	// Changes come in bursts (a failover of a node's tenants): a moment's
	// pause lets one sync take the burst.
	t := time.NewTimer(20 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// mirroring says whether the router serves a copy of the global directory.
func (rt *Router) mirroring() bool { return len(rt.cfg.GlobalURLs) > 0 }

// refuseMirrored is the answer to a change sent to a mirroring router.
func (rt *Router) refuseMirrored() error {
	return fmt.Errorf("region %s: %w", rt.cfg.Region, ErrMirrored)
}
