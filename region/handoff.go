package region

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/lease"
)

// The handoff of a region's leasing (docs/regions.md): the states live in
// the region record of the global directory, each step a compare-and-swap
// there (global/handoff.go). The global tier's leading router takes its
// steps from its view of the global directory (globalHandoffs, below); a
// region's leading router from its link (mirror.go), which reads both
// directories and keeps the region's own record in line with the global
// one (reconcile). POST /_shard/regions/<r>/handoff asks for one, on
// either router, and waits for it to end.

// handoffWait bounds how long POST .../handoff waits for the handoff to
// end before answering 202 with where it stands; globalCallWait bounds a
// region's router's offer written into the global directory.
const (
	handoffWait    = 30 * time.Second
	globalCallWait = 3 * time.Second
)

// forceGuard is how long after the global directory last answered the
// region's link a forced takeover is refused (409) unless asked with
// "even_if_global_answers": a global tier that answers takes a planned
// handoff, which fences nobody by surprise.
const forceGuard = 10 * time.Second

// answeredAgo says, for the audit log, when the global directory last
// answered.
func answeredAgo(within bool, ago time.Duration) string {
	if ago == 0 && !within {
		return "never since this router led"
	}
	return fmt.Sprintf("%.1f s ago", ago.Seconds())
}

// handoffBound is how long a giver waits for its given handoff to be
// taken before it rolls it back and grants the region's nodes again: its
// own lease (the nodes' leases run out about then), at least a second.
func handoffBound(own time.Duration) time.Duration { return max(own, time.Second) }

// offerWait bounds how long an offer waits for its taker's ready: the
// giving side's leading router takes back an offer no one answered (the
// region has no leading router linked to the global tier, or the global
// tier has none leading), so a handoff never waits in offered for a taker
// that may come up hours later, and the route's answer is a refusal that
// says what to start. A variable for the tests alone.
var offerWait = 20 * time.Second

// unanswered is whether an offer made at at has waited past offerWait.
func unanswered(h *global.Handoff, now time.Time) bool {
	return h.State == global.HandoffOffered && now.Sub(h.At) >= offerWait
}

// linkRecords are the region record in the region's directory (de) and in
// the global one (dg), as the link last read or wrote them.
type linkRecords struct {
	de, dg global.Versioned[global.Region]
	snap   globalSnap // the global directory as this step found it
}

// reconcile reads the region record in both directories, brings them in
// line — the newer state wins (by epoch, then by the handoff's progress),
// and of two alike the owner's: the region's while it leases, else the
// global tier's — and takes the region's step of a handoff in flight.
func (m *mirror) reconcile(ctx context.Context, s, dgs *global.Store, snap globalSnap) (linkRecords, error) {
	rec := linkRecords{dg: snap.region, snap: snap}
	var err error
	if rec.de, err = s.ReadRegion(ctx, m.region); err != nil {
		return rec, err
	}
	m.mu.Lock()
	m.dgRec = rec.dg
	m.mu.Unlock()
	if rec, err = m.align(ctx, s, dgs, rec); err != nil {
		return rec, err
	}
	m.settleForce(rec)
	h := rec.de.Value.Handoff
	if h == nil {
		return rec, nil
	}
	switch {
	case h.To == global.LeaserGlobal && unanswered(h, m.rt.now()):
		why := fmt.Sprintf("the global tier's leading router did not take the offer within %v: start or promote one (fenec-shard --auto-failover S, POST /_shard/promote), then ask again", offerWait)
		rec.dg, err = m.rt.writeRegion(ctx, dgs, global.DirGlobal, m.region, rec.dg, func(r *global.Region) error { return r.RollBack(why, m.rt.now()) })
		return rec, err
	case h.State == global.HandoffOffered && h.To == global.LeaserRegion:
		return m.ready(ctx, s, dgs, rec)
	case h.State == global.HandoffReady && h.To == global.LeaserGlobal:
		return m.give(ctx, s, dgs, rec)
	case h.State == global.HandoffGiven && h.To == global.LeaserRegion:
		return m.take(ctx, s, dgs, rec)
	case h.State == global.HandoffGiven && h.To == global.LeaserGlobal:
		return m.awaitTaken(ctx, s, dgs, rec)
	}
	m.mu.Lock()
	m.gaveAt = 0
	m.mu.Unlock()
	return rec, nil
}

// align makes the two records one: adopted into the region's directory
// (decorated with the global tier's leader, term and record while it
// leases), or pushed up into the global one (decorated with this router,
// its term and its record while the region leases).
func (m *mirror) align(ctx context.Context, s, dgs *global.Store, rec linkRecords) (linkRecords, error) {
	de, dg := rec.de.Value, rec.dg.Value
	if err := epochGap(de, dg); err != nil {
		m.refuseGap(de, dg, err)
		return rec, err
	}
	push := de.Newer(dg) || (!dg.Newer(de) && de.LeasedBy() == global.LeaserRegion)
	if push {
		want, err := m.decorate(ctx, s, de, true)
		if err != nil {
			return rec, err
		}
		if !sameRegion(want, de) {
			if rec.de, err = m.rt.writeRegion(ctx, s, global.DirOfRegion(m.region), m.region, rec.de, func(r *global.Region) error { *r = want; return nil }); err != nil {
				return rec, err
			}
		}
		if !sameRegion(want, dg) {
			if rec.dg, err = m.rt.writeRegion(ctx, dgs, global.DirGlobal, m.region, rec.dg, func(r *global.Region) error { *r = want; return nil }); err != nil {
				return rec, err
			}
			m.rt.log.Info("link: region record written into the global directory", "region", m.region,
				"leaser", want.LeasedBy(), "epoch", want.Epoch, "state", stateOf(want))
		}
		return rec, nil
	}
	want := m.decorateGlobal(dg, rec.snap.view)
	if sameRegion(want, de) {
		return rec, nil
	}
	raise := int64(0)
	if h := want.Handoff; h != nil && h.State == global.HandoffDone && h.To == global.LeaserRegion {
		raise = h.LeaseRecordMS // the region takes: count by the giver's record
	}
	var err error
	was := rec.de.Value
	if rec.de, err = s.AdoptRegion(ctx, m.region, rec.de, want, raise); err != nil {
		return rec, err
	}
	m.rt.auditRegion(global.DirOfRegion(m.region), was, want)
	m.rt.settleTo(ctx, rec.de.Rev) // the leasing's scope reads the view
	m.rt.leasing.Poke()
	m.rt.log.Info("link: region record taken from the global directory", "region", m.region,
		"leaser", want.LeasedBy(), "epoch", want.Epoch, "state", stateOf(want))
	return rec, nil
}

// epochGap refuses two region records whose epochs are more than
// lease.EpochMargin apart: no handoff moves an epoch so far while one
// directory looked away, so the larger number is not to be adopted into
// the other directory — it came from a record written by hand, or by a
// router that believed a forged grant. The operator looks at both
// records (GET /_shard/regions on each tier) and corrects the wrong one.
func epochGap(de, dg global.Region) error {
	lo, hi := min(de.Epoch, dg.Epoch), max(de.Epoch, dg.Epoch)
	if lease.EpochWithin(lo, hi) {
		return nil
	}
	return fmt.Errorf("%w: region %s's record is at epoch %d in its own directory and %d in the global one, more than %d apart: neither is adopted; correct the wrong record",
		global.ErrEpochBound, de.Name, de.Epoch, dg.Epoch, lease.EpochMargin)
}

// refuseGap logs and audits, once for each pair of epochs, the link
// refusing to bring two records epochs apart in line.
func (m *mirror) refuseGap(de, dg global.Region, err error) {
	m.mu.Lock()
	seen := m.gapSeen == [2]uint64{de.Epoch, dg.Epoch}
	m.gapSeen = [2]uint64{de.Epoch, dg.Epoch}
	m.mu.Unlock()
	if seen {
		return
	}
	m.rt.log.Error("link: region records not brought in line", "region", m.region, "err", err)
	m.rt.auditControl("region_record_refused", "", err.Error())
}

// decorate sets this router, its directory's term and longest-lease
// record (read from s, the region's directory) on r: the leasing side's,
// while the region leases.
func (m *mirror) decorate(ctx context.Context, s *global.Store, r global.Region, _ bool) (global.Region, error) {
	r = copyRegion(r, m.region)
	term, err := s.Term(ctx)
	if err != nil {
		return r, err
	}
	rec, err := s.LeaseRecord(ctx)
	if err != nil {
		return r, err
	}
	r.Term, r.LeaseRecordMS, r.Router = term.Value, rec.Value, m.rt.id
	return r, nil
}

// decorateGlobal sets the global tier's leading router, term and
// longest-lease record, as v (the global directory) has them, on r: the
// leasing side's while the global tier leases.
func (m *mirror) decorateGlobal(r global.Region, v *global.View) global.Region {
	r = copyRegion(r, m.region)
	r.Term, r.LeaseRecordMS, r.Router = v.Term, v.LeaseRecordMS, v.Leader.Router
	return r
}

// copyRegion is r named name, its handoff its own copy.
func copyRegion(r global.Region, name string) global.Region {
	r.Name = name
	if r.Handoff != nil {
		h := *r.Handoff
		r.Handoff = &h
	}
	return r
}

// sameRegion compares two region records as stored.
func sameRegion(a, b global.Region) bool {
	if (a.Handoff == nil) != (b.Handoff == nil) || a.Handoff != nil && *a.Handoff != *b.Handoff {
		return false
	}
	a.Handoff, b.Handoff = nil, nil
	return a.Name == b.Name && a.Leaser == b.Leaser && a.Epoch == b.Epoch && a.Since.Equal(b.Since) &&
		a.Router == b.Router && a.Term == b.Term && a.LeaseRecordMS == b.LeaseRecordMS
}

func stateOf(r global.Region) string {
	if r.Handoff == nil {
		return ""
	}
	return r.Handoff.State
}

// ready is the region's answer to an offer of its leasing: with its
// records copied down, it writes ready into the global directory; a router
// that cannot lease (no --auto-failover) rolls the offer back saying so.
func (m *mirror) ready(ctx context.Context, s, dgs *global.Store, rec linkRecords) (linkRecords, error) {
	var err error
	if m.rt.cfg.AutoFailover <= 0 {
		why := fmt.Sprintf("region %s's leading router %s runs without --auto-failover: start it with --auto-failover to take its region's leasing", m.region, m.rt.id)
		rec.dg, err = m.rt.writeRegion(ctx, dgs, global.DirGlobal, m.region, rec.dg, func(r *global.Region) error { return r.RollBack(why, m.rt.now()) })
		return rec, err
	}
	if _, err := m.down(ctx, s, rec.de, rec.dg); err != nil {
		return rec, err
	}
	rec.dg, err = m.rt.writeRegion(ctx, dgs, global.DirGlobal, m.region, rec.dg, func(r *global.Region) error { return r.Ready(m.rt.id, m.rt.now()) })
	if err == nil {
		m.rt.log.Info("handoff: ready to lease the region", "region", m.region)
	}
	return rec, err
}

// give hands the region's leasing to the global tier, which is ready to
// take it: it records the handoff given in its own directory first (its
// own changes for the region are refused from then on), stops granting
// the region's nodes — none of its grants is in flight once the leasing
// resynced — copies the region's records up one last time, and writes
// given into the global directory with its term and record.
func (m *mirror) give(ctx context.Context, s, dgs *global.Store, rec linkRecords) (linkRecords, error) {
	_, term := m.rt.lead.status()
	lr, err := s.LeaseRecord(ctx)
	if err != nil {
		return rec, err
	}
	now := m.rt.now()
	if rec.de, err = m.rt.writeRegion(ctx, s, global.DirOfRegion(m.region), m.region, rec.de, func(r *global.Region) error {
		return r.Give(m.rt.id, term, lr.Value, now, now)
	}); err != nil {
		return rec, err
	}
	m.mu.Lock()
	m.gaveAt = m.clock.Now()
	m.mu.Unlock()
	m.rt.settleTo(ctx, rec.de.Rev)
	m.rt.leasing.Resync() // the region's nodes leave the leasing: no grant to them is out from here
	m.rt.log.Info("handoff: stopped granting the region's nodes", "region", m.region, "term", term)
	if _, err := m.up(ctx, dgs, rec.de, rec.dg); err != nil {
		return rec, err
	}
	want := rec.de.Value
	rec.dg, err = m.rt.writeRegion(ctx, dgs, global.DirGlobal, m.region, rec.dg, func(r *global.Region) error { *r = want; return nil })
	return rec, err
}

// awaitTaken waits, as the giver, for the global tier to take the region;
// past the bound it rolls the handoff back in the global directory (if
// the global tier's done won the race, it is done) and leases again.
func (m *mirror) awaitTaken(ctx context.Context, s, dgs *global.Store, rec linkRecords) (linkRecords, error) {
	now := m.clock.Now()
	m.mu.Lock()
	if m.gaveAt == 0 {
		m.gaveAt = now // given before this router led: its wait starts now
	}
	since := now - m.gaveAt
	m.mu.Unlock()
	bound := handoffBound(m.rt.cfg.AutoFailover)
	if since < bound {
		return rec, nil
	}
	why := fmt.Sprintf("the global tier did not take region %s within %v", m.region, bound)
	dg, err := m.rt.writeRegion(ctx, dgs, global.DirGlobal, m.region, rec.dg, func(r *global.Region) error { return r.RollBack(why, m.rt.now()) })
	if err != nil {
		return rec, err
	}
	rec.dg = dg
	m.rt.log.Warn("handoff rolled back: leasing the region again", "region", m.region, "why", why)
	return m.align(ctx, s, dgs, rec)
}

// take takes the region's leasing the global tier gave: its records
// copied down one last time (the global tier changes none of them once it
// gave), the decisive done written into the global directory, then the
// region record into its own directory with the giver's record; the
// leasing starts from its view.
func (m *mirror) take(ctx context.Context, s, dgs *global.Store, rec linkRecords) (linkRecords, error) {
	var err error
	if m.rt.cfg.AutoFailover <= 0 {
		return rec, nil // it said ready only with --auto-failover; a router restarted without waits for the rollback
	}
	if _, err := m.down(ctx, s, rec.de, rec.dg); err != nil {
		return rec, err
	}
	if rec.dg, err = m.rt.writeRegion(ctx, dgs, global.DirGlobal, m.region, rec.dg, func(r *global.Region) error { return r.Take(m.rt.now()) }); err != nil {
		return rec, err
	}
	h := rec.dg.Value.Handoff
	m.rt.log.Info("handoff: the region leases its nodes", "region", m.region, "epoch", rec.dg.Value.Epoch,
		"giver_term", h.Term, "giver_record_ms", h.LeaseRecordMS)
	return m.align(ctx, s, dgs, rec)
}

// settleForce tells the leasing when a forced takeover is settled: once
// the global directory shows the region leasing at its epoch, and the
// global record and a tenth have passed since.
func (m *mirror) settleForce(rec linkRecords) {
	de, dg := rec.de.Value, rec.dg.Value
	forced := de.Handoff != nil && de.Handoff.Force && de.LeasedBy() == global.LeaserRegion
	if !forced {
		m.mu.Lock()
		m.ackedAt = 0
		m.mu.Unlock()
		m.rt.leasing.SettleForce(0)
		return
	}
	if dg.LeasedBy() != global.LeaserRegion || dg.Epoch < de.Epoch {
		return
	}
	m.mu.Lock()
	if m.ackedAt == 0 {
		m.ackedAt = m.clock.Now()
	}
	rl := time.Duration(rec.snap.view.LeaseRecordMS) * time.Millisecond
	at := m.ackedAt + rl + rl/10
	m.mu.Unlock()
	m.rt.leasing.SettleForce(at)
}

// globalHandoffs takes the global tier's steps of every region's handoff,
// from its view of the global directory, while this router leads.
type globalHandoffs struct {
	rt *Router

	mu        sync.Mutex
	givenSeen map[string]time.Duration // guarded by mu: when this router first saw its own given, per region
}

// run looks at the view whenever it changes (and every linkInFlight)
// until ctx ends.
func (g *globalHandoffs) run(ctx context.Context) {
	t := time.NewTicker(linkInFlight)
	defer t.Stop()
	for {
		if leading, _ := g.rt.lead.status(); leading {
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
	s, err := g.rt.lead.changes(ctx)
	if err != nil {
		return err
	}
	at, err := s.ReadRegion(ctx, name)
	if err != nil || !sameRegion(at.Value, rec) {
		return err // the view is behind: the next look acts on what landed
	}
	switch {
	case h.To == global.LeaserRegion && unanswered(h, g.rt.now()):
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
	_, term := g.rt.lead.status()
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
	bound := handoffBound(g.rt.cfg.AutoFailover)
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
	if rt.mirroring() && rt.link != nil {
		rt.link.wake()
	}
}

// handoffAnswer is what POST .../handoff answers: the region record.
type handoffAnswer struct {
	Region  string          `json:"region"`
	Leaser  string          `json:"leaser"`
	Epoch   uint64          `json:"epoch"`
	State   string          `json:"state"`
	Handoff *global.Handoff `json:"handoff,omitempty"`
}

func answerOf(r global.Region) handoffAnswer {
	return handoffAnswer{Region: r.Name, Leaser: r.Leaser, Epoch: r.Epoch, State: stateOf(r), Handoff: r.Handoff}
}

// postHandoff serves POST /_shard/regions/<r>/handoff {"to", "force"}
// [?wait=S]: on the global tier's leading router or region r's, a planned
// handoff offered in the global directory and waited for (S seconds,
// handoffWait at most and by default); on region r's, with force, the
// forced takeover.
func (c *shardCall) postHandoff(s *global.Store, region string) (int, any, error) {
	if err := global.CheckName("region", region); err != nil {
		return 0, nil, err
	}
	wait, err := handoffWaitOf(c.r.URL.Query())
	if err != nil {
		return 0, nil, err
	}
	var req struct {
		To    string `json:"to"`
		Force bool   `json:"force"`
		// EvenIfGlobalAnswers forces a takeover although the global
		// directory answered within forceGuard.
		EvenIfGlobalAnswers bool `json:"even_if_global_answers"`
	}
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	if req.To != global.LeaserGlobal && req.To != global.LeaserRegion {
		return 0, nil, fmt.Errorf("%w: \"to\" is \"global\" or \"region\"", ErrBadRequest)
	}
	rt := c.rt
	if rt.mirroring() && region != rt.cfg.Region {
		return 0, nil, fmt.Errorf("%w: this router serves region %s; send the handoff of region %s to the global tier's leading router or to that region's", ErrNotOwner, rt.cfg.Region, region)
	}
	if req.EvenIfGlobalAnswers && !req.Force {
		return 0, nil, fmt.Errorf("%w: \"even_if_global_answers\" goes with \"force\": true only", ErrBadRequest)
	}
	if req.Force {
		if req.To == global.LeaserRegion {
			// The region's own copy of its records says which of its
			// tenants must survive it: the global one may be out of reach.
			if err := refuseRegionalLeasing(c.r.Context(), s, region); err != nil {
				return 0, nil, err
			}
		}
		return c.forceTakeover(s, region, req.To, req.EvenIfGlobalAnswers)
	}
	if rt.mirroring() && req.To == global.LeaserRegion && rt.cfg.AutoFailover <= 0 {
		return 0, nil, fmt.Errorf("%w: this router runs without --auto-failover: it cannot lease region %s's nodes; restart it with --auto-failover S", ErrBadRequest, region)
	}
	offerTo := s
	octx, cancel := context.WithTimeout(c.r.Context(), globalCallWait)
	defer cancel()
	if rt.mirroring() {
		if offerTo = rt.link.awaitGlobal(octx); offerTo == nil {
			return 0, nil, fmt.Errorf("%w: its link has not opened it (yet): a planned handoff needs it; {\"force\": true} takes the region over without it (docs/regions.md)", ErrGlobalUnreachable)
		}
	} else if v := rt.watcher.View(); len(nodesOf(v, region)) == 0 {
		if _, ok := v.Region(region); !ok {
			return 0, nil, fmt.Errorf("%w: region %s has no node and no record", ErrNoRoute, region)
		}
	}
	at, err := offerTo.ReadRegion(octx, region)
	if err == nil && req.To == global.LeaserRegion {
		// A global tier that does not answer is told below as such.
		if err = refuseRegionalLeasing(octx, offerTo, region); errors.Is(err, ErrSurvive) {
			return 0, nil, err
		}
	}
	if err == nil {
		var offered global.Versioned[global.Region]
		offered, err = c.rt.writeRegion(octx, offerTo, global.DirGlobal, region, at, func(r *global.Region) error { return r.Offer(req.To, rt.id, rt.now()) })
		at = offered
	}
	if err != nil {
		if rt.mirroring() && octx.Err() != nil {
			return 0, nil, fmt.Errorf("%w: it did not answer within %v: a planned handoff needs it; {\"force\": true} takes the region over without it (docs/regions.md)", ErrGlobalUnreachable, globalCallWait)
		}
		return 0, nil, err
	}
	offered := at
	if rt.mirroring() {
		rt.link.wake()
	}
	return c.awaitHandoff(region, offered.Value, wait)
}

// handoffWaitOf reads ?wait=S, how long POST .../handoff waits for the
// handoff to end before it answers 202 with the state it is in: from 0 to
// handoffWait, which is also the default. A client whose own timeout is
// shorter asks for less, so it hears where the handoff stands.
func handoffWaitOf(q url.Values) (time.Duration, error) {
	if !q.Has("wait") {
		return handoffWait, nil
	}
	s, err := strconv.ParseFloat(q.Get("wait"), 64)
	if err != nil || !(s >= 0 && s <= handoffWait.Seconds()) { // NaN too
		return 0, fmt.Errorf("%w: ?wait is a number of seconds from 0 to %v", ErrBadRequest, handoffWait.Seconds())
	}
	return time.Duration(s * float64(time.Second)), nil
}

// awaitHandoff waits, within wait, for the handoff offered to be done or
// rolled back, as this router's view shows it; still in flight, it
// answers 202 with the record as the view has it (as offered, should the
// view not show the offer yet).
func (c *shardCall) awaitHandoff(region string, offered global.Region, wait time.Duration) (int, any, error) {
	at := offered.Handoff.At
	ctx, cancel := context.WithTimeout(c.r.Context(), wait)
	defer cancel()
	for {
		if v := c.rt.watcher.View(); v != nil {
			if rec, ok := v.Region(region); ok && rec.Handoff != nil && rec.Handoff.At.Equal(at) {
				switch rec.Handoff.State {
				case global.HandoffDone:
					return http.StatusOK, answerOf(rec), nil
				case global.HandoffRolledBack:
					return 0, nil, fmt.Errorf("%w: handoff of region %s rolled back: %s", global.ErrState, region, rec.Handoff.Why)
				}
			}
		}
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			rec := c.rt.watcher.View().RegionRecord(region)
			if rec.Handoff == nil || !rec.Handoff.At.Equal(at) {
				rec = offered
			}
			return http.StatusAccepted, answerOf(rec), nil
		case <-t.C:
		}
	}
}

// forceTakeover serves a forced takeover: on region r's leading router,
// to the region, written into its own directory alone (the audit log has
// it, as every change).
func (c *shardCall) forceTakeover(s *global.Store, region, to string, evenIfGlobalAnswers bool) (int, any, error) {
	rt := c.rt
	ago, answers := time.Duration(0), false
	if rt.mirroring() && rt.link != nil {
		if at := rt.link.globalAnswered(); !at.IsZero() {
			ago = rt.now().Sub(at)
			answers = ago < forceGuard
		}
	}
	switch {
	case !rt.mirroring():
		return 0, nil, fmt.Errorf("%w: a forced takeover is made on region %s's leading router (fenec-shard --region %s --global ...), when the global tier cannot be reached", ErrNotOwner, region, region)
	case to != global.LeaserRegion:
		return 0, nil, fmt.Errorf("%w: only a region takes its leasing by force: hand it back to the global tier with {\"to\": \"global\"}", ErrBadRequest)
	case rt.cfg.AutoFailover <= 0:
		return 0, nil, fmt.Errorf("%w: this router runs without --auto-failover: it cannot lease region %s's nodes; restart it with --auto-failover S", ErrBadRequest, region)
	case answers && !evenIfGlobalAnswers:
		return 0, nil, fmt.Errorf("%w: the global directory answered this router %.1f s ago (within %v): use a planned handoff ({\"to\": \"region\"} without force; fenec handoff %s --to region); to force anyway while it answers, add \"even_if_global_answers\": true (fenec handoff %s --to region --force --even-if-global-answers)",
			ErrGlobalAnswers, ago.Seconds(), forceGuard, region, region)
	}
	ctx := c.r.Context()
	at, err := s.ReadRegion(ctx, region)
	if err != nil {
		return 0, nil, err
	}
	lr, err := s.LeaseRecord(ctx)
	if err != nil {
		return 0, nil, err
	}
	known := at.Value.Epoch
	rt.link.mu.Lock()
	known = max(known, rt.link.dgRec.Value.Epoch)
	rt.link.mu.Unlock()
	forced, err := c.rt.writeRegion(ctx, s, global.DirOfRegion(region), region, at, func(r *global.Region) error {
		return r.Force(rt.id, known, lr.Value, c.r.RemoteAddr, rt.now())
	})
	if err != nil {
		return 0, nil, err
	}
	c.settle(forced.Rev)
	fenced := nodesOf(rt.watcher.View(), region)
	slices.Sort(fenced)
	rt.log.Warn("forced takeover: the region leases its nodes without the global tier", "region", region,
		"epoch", forced.Value.Epoch, "global_record_ms", lr.Value, "nodes", fenced, "even_if_global_answers", evenIfGlobalAnswers)
	rt.auditControl("forced_takeover", "", fmt.Sprintf("region %s force true epoch %d even_if_global_answers %v (global directory last answered %s); nodes fenced: %s",
		region, forced.Value.Epoch, evenIfGlobalAnswers, answeredAgo(answers, ago), strings.Join(fenced, ",")))
	rt.link.wake()
	return http.StatusOK, answerOf(forced.Value), nil
}
