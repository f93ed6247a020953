package leasing

import (
	"maps"
	"slices"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/lease"
)

// leaseLists is the list each leased node of v should hold: the tenants
// placed there, less those a failover holds, those waiting (before now)
// for a held failover and those a move is switching off the node
// (switching), with the copies the directory counts on (in
// step: a replica not recorded behind) and those recorded behind. Only
// nodes recorded with lease:true and in scope are leased. It is pure: v,
// scope, held and now decide it.
func leaseLists(v *global.View, scope map[string]lease.NodeTerms, held map[string]heldWait, now time.Duration) map[string]lease.List {
	out := map[string]lease.List{}
	if v == nil {
		return out
	}
	for name, n := range v.Nodes() {
		if _, in := scope[name]; n.Lease && in {
			out[name] = lease.List{Tenants: []string{}}
		}
	}
	for name, rec := range v.Tenants() {
		list, leased := out[rec.Node]
		if !leased || rec.HeldBy == global.HoldFailover || switching(rec) {
			continue
		}
		if w, ok := held[name]; ok && w.node == rec.Node && now < w.until {
			continue
		}
		list.Tenants = append(list.Tenants, name)
		if rec.Replica != "" {
			if list.Replicas == nil {
				list.Replicas = map[string]string{}
			}
			list.Replicas[name] = rec.Replica
		}
		switch {
		case rec.ReplicaBehind > 0:
			if list.Behind == nil {
				list.Behind = map[string]uint64{}
			}
			list.Behind[name] = rec.ReplicaBehind
		case rec.Replica != "":
			list.InStep = append(list.InStep, name)
		}
		out[rec.Node] = list
	}
	for _, list := range out {
		slices.Sort(list.Tenants)
		slices.Sort(list.InStep)
	}
	return out
}

// switching says whether rec's move has frozen its source for the switch
// (global.MoveSwitching, MovePromoting): the source's grants name the
// tenant no more, so a source started again meanwhile — its freeze
// forgotten — never takes its writes while its copy is promoted and the
// directory flipped. A move put back names it again.
func switching(rec global.Tenant) bool {
	return rec.State == global.StateMoving && (rec.MoveStep == global.MoveSwitching || rec.MoveStep == global.MovePromoting)
}

// listsLocked is leaseLists over the scope sc and the leasing's held
// tenants, now.
func (l *Leasing) listsLocked(v *global.View, sc leaseScope) map[string]lease.List {
	return leaseLists(v, sc.terms, l.held, l.deps.Clock.Now())
}

// sync sets every leased node's list from the router's view, grants at
// once a node that gained a tenant, stops leasing nodes the directory
// forgot or no longer leases, and probes nodes not yet known to take
// leases. A node failed over is given its list back only once its
// failover ended.
func (l *Leasing) sync() {
	// One sync at a time, whole: once one returns, every node out of
	// scope when it began has been removed from the Leaser, its last grant
	// ended (a handoff gives a region only then).
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	v := l.deps.View()
	l.mu.Lock()
	lsr := l.leaser
	if lsr == nil || v == nil {
		l.mu.Unlock()
		return
	}
	failedOver := map[string]bool{}
	answered := map[string]bool{} // since the node's last failover
	for _, st := range lsr.Nodes() {
		failedOver[st.Node] = st.FailedOver
		answered[st.Node] = st.Answered && !st.FailedOver
		if !st.FailedOver {
			delete(l.settled, st.Node)
		}
	}
	// A node recorded lapsed that answers again is cleared.
	l.clearAnsweredLocked(lsr, v, answered)
	if l.dropHeldLocked(v) {
		l.dirty = true // a tenant waiting off its node's list goes back on it
	}
	if v.Rev == l.lastRev && maps.Equal(failedOver, l.lastFO) && len(l.held) == 0 && !l.dirty {
		l.mu.Unlock()
		l.probeNodes(v)
		return
	}
	l.lastRev, l.lastFO, l.dirty = v.Rev, failedOver, false
	sc := l.scopeLocked(v)
	want := l.listsLocked(v, sc)
	var grant, gone []string
	for node, list := range want {
		lsr.SetTerms(node, sc.terms[node])
		if l.failing[node] || (failedOver[node] && !l.settled[node]) {
			continue
		}
		old, known := l.lists[node]
		if known && old.Equal(list) {
			continue
		}
		lsr.SetList(node, list)
		l.lists[node] = list
		if gained(old.Tenants, list.Tenants) || !maps.Equal(old.Behind, list.Behind) {
			// A tenant gained, or a copy recorded behind: the node's
			// held writes wait on this list.
			grant = append(grant, node)
		}
	}
	// Out of scope: every node the Leaser leases that want lacks, whether
	// or not a list of it is kept here (a failover forgets the node's list
	// as it ends; a scope that changed meanwhile must still let it go).
	for node := range failedOver {
		if _, ok := want[node]; !ok {
			gone = append(gone, node)
		}
	}
	for node := range l.lists {
		if _, ok := want[node]; !ok {
			if _, listed := failedOver[node]; !listed {
				gone = append(gone, node)
			}
			delete(l.lists, node)
		}
	}
	l.mu.Unlock()
	for _, node := range gone {
		lsr.RemoveNode(node)
	}
	for _, node := range grant {
		lsr.GrantNow(node)
	}
	l.probeNodes(v)
}

// Resync sets every list again from the directory and returns once they
// are set: a node out of scope (a region given, fenced) is no longer
// leased, no grant to it in flight.
func (l *Leasing) Resync() { l.resync() }

// resync sets every list again from the directory and returns the
// running Leaser (nil when not leasing).
func (l *Leasing) resync() *lease.Leaser {
	l.mu.Lock()
	l.dirty = true
	l.mu.Unlock()
	l.sync()
	return l.running()
}

// gained reports whether list names a tenant old does not.
func gained(old, list []string) bool {
	for _, t := range list {
		if _, ok := slices.BinarySearch(old, t); !ok {
			return true
		}
	}
	return false
}

// dropHeldLocked forgets the held tenants that no longer wait: failed
// over, moved or deleted, or past the failover's wait. It says whether it
// forgot any.
func (l *Leasing) dropHeldLocked(v *global.View) bool {
	now := l.deps.Clock.Now()
	dropped := false
	for name, w := range l.held {
		rec, ok := v.Tenant(name)
		if !ok || rec.Node != w.node || now >= w.until {
			delete(l.held, name)
			dropped = true
		}
	}
	return dropped
}
