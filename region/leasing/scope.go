package leasing

import (
	"context"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/lease"
)

// leaseScope is which nodes a router leases and on what terms: the global
// tier's leading router leases the nodes of every region its directory
// says the global tier leases; a region's leading router, its region's
// nodes while its own directory says the region leases them.
type leaseScope struct {
	// active: a Leaser runs at all (a region's router runs none while the
	// global tier leases its region: it would raise a record it copies).
	active bool
	// terms names each node leased, with its epoch and handoff.
	terms map[string]lease.NodeTerms
}

// scopeState is what a router's scope depends on besides its view:
// regions it is handing over (the global tier stops granting them before
// it records the handoff given), and, for a region's router, whether the
// global tier has learned of a forced takeover. A node refusing the
// router's grants for another binding changes no region's scope: it costs
// that node alone (the Leaser counts it as not answering).
type scopeState struct {
	giving map[string]bool // regions whose nodes this router stopped granting to give them
	// settledAt, on a region's router after a forced takeover, is the
	// moment (leasing clock) from which every lease the global tier may
	// have granted has run out since it learned of the takeover: from
	// then on a node never reached is failed over like any other. Zero:
	// not settled.
	settledAt time.Duration
}

// globalScope is the global tier's: every node of a region the global
// directory says the global tier leases, not being given.
func globalScope(v *global.View, st scopeState) leaseScope {
	sc := leaseScope{active: true, terms: map[string]lease.NodeTerms{}}
	if v == nil {
		return sc
	}
	for name, n := range v.Nodes() {
		rec := v.RegionRecord(n.Region)
		if rec.LeasedBy() != global.LeaserGlobal || st.giving[n.Region] {
			continue
		}
		sc.terms[name] = nodeTerms(rec, global.LeaserGlobal, false)
	}
	return sc
}

// regionScope is region r's router's: every node of r, while r's
// directory says the region leases them. After a forced takeover, until
// the global tier is known to have stopped, a node is failed over only
// once it ran one of this router's leases (hard case 3 of DESIGN.md §7).
func regionScope(v *global.View, r string, st scopeState, now time.Duration) leaseScope {
	sc := leaseScope{terms: map[string]lease.NodeTerms{}}
	if v == nil {
		return sc
	}
	rec := v.RegionRecord(r)
	if rec.LeasedBy() != global.LeaserRegion {
		return sc
	}
	sc.active = true
	unsettled := st.settledAt == 0 || now < st.settledAt
	for name, n := range v.Nodes() {
		if n.Region == r {
			sc.terms[name] = nodeTerms(rec, global.LeaserRegion, unsettled)
		}
	}
	return sc
}

// regionRecord is region r's record in v, a region leased by the global
// tier when v has none.
func regionRecord(v *global.View, r string) global.Region {
	if rec, ok := v.Region(r); ok {
		return rec
	}
	return global.Region{Name: r, Leaser: global.LeaserGlobal}
}

// nodeTerms are the terms side's grants carry to a node of the region rec
// records: the region's epoch, and, while the last handoff that gave the
// region to side is the one in force, that handoff — so a node still bound
// to the giver takes the grant — counting the node by the giver's record
// until it runs one of side's leases. A forced takeover not yet settled
// fails a node over only once it ran one of side's leases.
func nodeTerms(rec global.Region, side string, unsettled bool) lease.NodeTerms {
	nt := lease.NodeTerms{Epoch: rec.Epoch}
	h := rec.Handoff
	if h == nil || h.State != global.HandoffDone || h.To != side {
		return nt
	}
	nt.Handoff = &lease.Handoff{From: global.DirOf(h.From, rec.Name), Term: h.Term, Force: h.Force}
	nt.Floor = time.Duration(h.LeaseRecordMS) * time.Millisecond
	nt.MustRun = h.Force && unsettled
	return nt
}

// scopeLocked is the leasing's scope over v, now.
func (l *Leasing) scopeLocked(v *global.View) leaseScope {
	st := l.scope
	if l.deps.Region != "" {
		return regionScope(v, l.deps.Region, st, l.deps.Clock.Now())
	}
	return globalScope(v, st)
}

// GiveUp stops leasing region r's nodes, to hand the region over, and
// returns once none of them is leased (no grant to one is in flight).
func (l *Leasing) GiveUp(r string) {
	l.mu.Lock()
	l.scope.giving[r] = true
	l.mu.Unlock()
	l.resync()
}

// KeepOn leases region r's nodes again after a handoff of it ended without
// this router giving it (rolled back, or never given).
func (l *Leasing) KeepOn(r string) {
	l.mu.Lock()
	was := l.scope.giving[r]
	delete(l.scope.giving, r)
	l.mu.Unlock()
	if was {
		l.resync()
	}
}

// Giving says whether this router stopped leasing r's nodes to give r.
func (l *Leasing) Giving(r string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.scope.giving[r]
}

// SettleForce has a region's router fail over, from at on, a node it took
// by force and never reached like any other: the global tier learned of
// the takeover and every lease it may have granted has run out by then.
// Zero unsettles.
func (l *Leasing) SettleForce(at time.Duration) {
	l.mu.Lock()
	changed := l.scope.settledAt != at
	l.scope.settledAt = at
	l.mu.Unlock()
	if changed {
		l.Poke()
	}
}

// refusedElsewhere is the Leaser's Elsewhere callback: a node refused this
// router's grants for another binding (another directory, a later epoch,
// or an epoch past its bound). It costs that node alone: the Leaser counts
// it as not answering, so it lapses and is failed over as one that does
// not answer; no other node's lease and no region record changes. Who
// leases a region changes only by a handoff state the routers wrote — a
// node's word is what a stolen admin token or a compromised node can
// forge. The router logs and audits it, and tells the router.
func (l *Leasing) refusedElsewhere(ctx context.Context, node string, refusal *lease.DirectoryError) {
	v := l.deps.View()
	if v == nil {
		return
	}
	n, ok := v.Node(node)
	if !ok {
		return
	}
	l.log.Warn("a node refuses our grants for another binding: counted as not answering; its region's record is unchanged",
		"node", node, "region", n.Region, "leased_by", refusal.Dir, "epoch", refusal.Epoch, "record_epoch", v.RegionRecord(n.Region).Epoch)
	if l.deps.Elsewhere != nil {
		l.deps.Elsewhere(ctx, node, n.Region, refusal)
	}
}
