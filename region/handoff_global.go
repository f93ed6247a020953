package region

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/lease"
)

// The global tier's side of a handoff (handoff.go says the whole): its
// leading router takes the global tier's steps of every region's handoff
// from its view of the global directory.

// handoffLook is how often the global tier's steps look at the view
// besides its changes (a region's link looks as often while a handoff is
// in flight).
const handoffLook = 50 * time.Millisecond

// globalHandoffs takes the global tier's steps of every region's handoff,
// from its view of the global directory, while this router leads.
type globalHandoffs struct {
	rt *Router

	mu        sync.Mutex
	givenSeen map[string]time.Duration // guarded by mu: when this router first saw its own given, per region
}

// run looks at the view whenever it changes (and every handoffLook)
// until ctx ends.
func (g *globalHandoffs) run(ctx context.Context) {
	t := time.NewTicker(handoffLook)
	defer t.Stop()
	for {
		if leading, _ := g.rt.lead.Status(); leading {
			g.step(ctx)
		}
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = g.rt.watcher.WaitRev(wctx, g.rt.watcher.Rev()+1)
		}()
		select {
		case <-ctx.Done():
		case <-done:
		case <-t.C:
		}
		cancel()
		<-done
		if ctx.Err() != nil {
			return
		}
	}
}

// step takes, for every region record, the global tier's step of its
// handoff, if any is due.
func (g *globalHandoffs) step(ctx context.Context) {
	v := g.rt.watcher.View()
	if v == nil {
		return
	}
	for name, rec := range v.Regions() {
		if err := g.stepRegion(ctx, name, rec); err != nil && !errors.Is(err, global.ErrConflict) {
			g.rt.log.Warn("handoff step", "region", name, "err", err)
		}
	}
}

func (g *globalHandoffs) stepRegion(ctx context.Context, name string, rec global.Region) error {
	h := rec.Handoff
	if h == nil || !rec.InFlight() {
		g.forget(name)
		g.rt.leasing.KeepOn(name)
		return nil
	}
	s, err := g.rt.lead.Changes(ctx)
	if err != nil {
		return err
	}
	at, err := s.ReadRegion(ctx, name)
	if err != nil || !at.Value.Equal(rec) {
		return err // the view is behind: the next look acts on what landed
	}
	switch {
	case h.To == global.LeaserRegion && h.Unanswered(g.rt.now(), offerWait):
		why := fmt.Sprintf("no leading router of region %s took the offer within %v: start one linked to the global tier (fenec-shard --region %s --global URLS --auto-failover S), then ask again", name, offerWait, name)
		_, err = g.rt.writeRegion(ctx, s, global.DirGlobal, name, at, func(r *global.Region) error { return r.RollBack(why, g.rt.now()) })
		return err
	case h.State == global.HandoffOffered && h.To == global.LeaserGlobal:
		if g.rt.cfg.AutoFailover <= 0 {
			why := fmt.Sprintf("the global tier's leading router %s runs without --auto-failover: it cannot take region %s's leasing", g.rt.id, name)
			_, err = g.rt.writeRegion(ctx, s, global.DirGlobal, name, at, func(r *global.Region) error { return r.RollBack(why, g.rt.now()) })
			return err
		}
		_, err = g.rt.writeRegion(ctx, s, global.DirGlobal, name, at, func(r *global.Region) error { return r.Ready(g.rt.id, g.rt.now()) })
		return err
	case h.State == global.HandoffReady && h.To == global.LeaserRegion:
		return g.give(ctx, s, name, at)
	case h.State == global.HandoffGiven && h.From == global.LeaserGlobal:
		return g.awaitTaken(ctx, s, name, at)
	case h.State == global.HandoffGiven && h.To == global.LeaserGlobal:
		return g.take(ctx, s, name, at)
	}
	return nil
}

// give stops granting region name's nodes (waiting until none of its
// grants to them is in flight) and records the handoff given, with this
// router's term, its record and the moment. It waits while a tenant of
// the region is held by another operation (a move, a delete, a quota),
// whose later writes the region could not see.
func (g *globalHandoffs) give(ctx context.Context, s *global.Store, name string, at global.Versioned[global.Region]) error {
	v := g.rt.watcher.View()
	for _, n := range nodesOf(v, name) {
		for _, t := range v.TenantsOn(n) {
			if rec, ok := v.Tenant(t); ok && rec.HeldBy != "" {
				return nil // asked again at the next look
			}
		}
	}
	g.rt.leasing.GiveUp(name)
	_, term := g.rt.lead.Status()
	lr, err := s.LeaseRecord(ctx)
	if err != nil {
		g.rt.leasing.KeepOn(name)
		return err
	}
	now := g.rt.now()
	if _, err := g.rt.writeRegion(ctx, s, global.DirGlobal, name, at, func(r *global.Region) error {
		return r.Give(g.rt.id, term, lr.Value, now, now)
	}); err != nil {
		g.rt.leasing.KeepOn(name)
		return err
	}
	g.mu.Lock()
	g.givenSeen[name] = g.rt.clock.Now()
	g.mu.Unlock()
	g.rt.log.Info("handoff: stopped granting the region's nodes", "region", name, "term", term, "record_ms", lr.Value)
	return nil
}

// awaitTaken waits, as the giver, for the region to take its leasing;
// past the bound it rolls the handoff back (if the region's done won the
// race, it is done) and leases the region's nodes again.
func (g *globalHandoffs) awaitTaken(ctx context.Context, s *global.Store, name string, at global.Versioned[global.Region]) error {
	now := g.rt.clock.Now()
	g.mu.Lock()
	seen, ok := g.givenSeen[name]
	if !ok {
		seen = now // given before this router led: its wait starts now
		g.givenSeen[name] = now
	}
	g.mu.Unlock()
	if !g.rt.leasing.Giving(name) {
		g.rt.leasing.GiveUp(name) // led since: never granting the region while it is given
	}
	bound := global.GiveBound(g.rt.cfg.AutoFailover)
	if now-seen < bound {
		return nil
	}
	why := fmt.Sprintf("region %s's leading router did not take its leasing within %v", name, bound)
	if _, err := g.rt.writeRegion(ctx, s, global.DirGlobal, name, at, func(r *global.Region) error { return r.RollBack(why, g.rt.now()) }); err != nil {
		return err
	}
	g.forget(name)
	g.rt.leasing.KeepOn(name)
	g.rt.log.Warn("handoff rolled back: leasing the region's nodes again", "region", name, "why", why)
	return nil
}

// take takes region name's leasing the region gave: done, with the
// directory's record raised to the giver's in the same transaction; the
// leasing counts the region's nodes by it until each ran a lease of ours.
func (g *globalHandoffs) take(ctx context.Context, s *global.Store, name string, at global.Versioned[global.Region]) error {
	done, err := s.TakeHandoff(ctx, name, at, g.rt.now())
	if err != nil {
		return err
	}
	g.rt.auditRegion(global.DirGlobal, at.Value, done.Value)
	g.rt.settleTo(ctx, done.Rev)
	h := done.Value.Handoff
	g.rt.leasing.ExtendRecord(time.Duration(h.LeaseRecordMS) * time.Millisecond)
	g.rt.leasing.KeepOn(name)
	g.rt.leasing.Resync()
	g.rt.log.Info("handoff: the global tier leases the region", "region", name, "epoch", done.Value.Epoch,
		"giver_term", h.Term, "giver_record_ms", h.LeaseRecordMS)
	return nil
}

func (g *globalHandoffs) forget(name string) {
	g.mu.Lock()
	delete(g.givenSeen, name)
	g.mu.Unlock()
}

// nodesOf names region r's nodes in v.
func nodesOf(v *global.View, r string) []string {
	var out []string
	for name, n := range v.Nodes() {
		if n.Region == r {
			out = append(out, name)
		}
	}
	return out
}

// leasedElsewhere is the leasing's word that a node of region refused this
// router's grants for another binding. It is written to the audit log and
// costs that node alone (the leasing counts it as not answering); the
// region record is not touched: who leases a region changes only by a
// handoff state the routers wrote (a region's own router's forced takeover
// reaches the global directory through its link). A region's router has
// its link read the global directory again.
func (rt *Router) leasedElsewhere(_ context.Context, node, region string, refusal *lease.DirectoryError) {
	detail := fmt.Sprintf("node %s of region %s refused this router's grants: it says it is leased by %s at epoch %d (term %d); counted as not answering, the region record is unchanged",
		node, region, refusal.Dir, refusal.Epoch, refusal.Term)
	rt.auditControl("lease_refused", node, detail)
	if rt.sides.mirroring() && rt.link != nil {
		rt.link.Wake()
	}
}
