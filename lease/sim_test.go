package lease

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The simulation below plays one router's Tracker against one node's
// NodeLease over a network that delays, reorders and drops grants and
// answers, with a node that stalls (or is suspended: on the boot clock the
// two look alike) and restarts. It checks the protocol's promise: once the
// router fails the node over, the node never again writes the tenant the
// failover took away — not from the lease it held, and not from any grant
// it reads late.

type simEvent struct {
	at  time.Duration
	seq int
	fn  func()
}

type simQueue []simEvent

func (q simQueue) Len() int { return len(q) }
func (q simQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q simQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x any)   { *q = append(*q, x.(simEvent)) }
func (q *simQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// simNet is how hostile the network and the node are.
type simNet struct {
	drop      float64 // chance a grant or an answer is lost
	slow      float64 // chance one is held up to a lease
	late      float64 // chance one is held up to five leases
	stallRate float64 // chance per second the node stalls, for up to 3 leases
	restart   float64 // chance per second the node restarts
}

type sim struct {
	t     testing.TB
	rng   *rand.Rand
	net   simNet
	lease time.Duration

	now   time.Duration
	seq   int
	queue simQueue

	routers  []*simRouter
	taker    *simRouter    // the router a handoff started (nil: none)
	handedAt time.Duration // when the node first took the taker's grant (0: never)
	failedAt time.Duration // when the leading router failed the node over (0: never)
	failedBy *simRouter
	moveAt   time.Duration // when the router takes x off the list while the node answers (0: never)
	cut      bool          // the node is cut off: every message is lost
	stopAt   time.Duration // with a cut: when the node's lease on x ran out
	movedAt  time.Duration // when an answer said the node runs a lease naming no x

	// node
	rate       float64 // the node's boot clock runs at this rate of the router's clock
	bound      Binding // persisted binding
	node       *NodeLease
	epoch      int // node incarnation: messages to an earlier one are lost
	stallUntil time.Duration
	writes     int // grants after which the node could write x
}

// simRouter is one router leasing the node, as the Leaser does: one grant
// out at a time, bounded by a third of the lease.
type simRouter struct {
	tr          *Tracker
	leads       bool // its failovers count (a deposed router's are refused by the directory)
	stopped     bool // the process ended: it sends nothing more
	outstanding *Grant
	atOnce      int
	nextSend    time.Duration
	judged      bool // it judged the node lapsed
	grants      int
}

func (s *sim) at(d time.Duration, fn func()) {
	s.seq++
	heap.Push(&s.queue, simEvent{at: s.now + d, seq: s.seq, fn: fn})
}

// delay is one message's time on the wire; ok false when it is lost.
func (s *sim) delay() (time.Duration, bool) {
	if s.cut {
		return 0, false
	}
	r := s.rng.Float64()
	switch {
	case r < s.net.drop:
		return 0, false
	case r < s.net.drop+s.net.late:
		return time.Duration(s.rng.Int64N(int64(5 * s.lease))), true
	case r < s.net.drop+s.net.late+s.net.slow:
		return time.Duration(s.rng.Int64N(int64(s.lease))), true
	}
	return time.Duration(s.rng.Int64N(int64(30 * time.Millisecond))), true
}

// nodeNow is the node's boot clock: its own origin, its own rate.
func (s *sim) nodeNow() time.Duration {
	return 17*time.Hour + time.Duration(float64(s.now)*s.rate)
}

func (r *simRouter) bound() time.Duration { return r.tr.Leases().Grant / 3 }

// send is the router's round.
func (s *sim) send(r *simRouter) {
	if r.stopped || r.outstanding != nil || s.now < r.nextSend {
		return
	}
	g := r.tr.Next(s.now)
	r.grants++
	r.outstanding = &g
	if d, ok := s.delay(); ok {
		epoch := s.epoch
		s.at(d, func() { s.nodeReceives(r, epoch, g) })
	}
	s.at(r.bound(), func() {
		if r.outstanding != nil && r.outstanding.N == g.N {
			r.outstanding = nil
			r.tr.GaveUp(g)
			s.afterCall(r)
		}
	})
}

// afterCall judges the lapse and schedules the next grant.
func (s *sim) afterCall(r *simRouter) {
	s.judge(r)
	sent, _ := r.tr.LastSent()
	if r.tr.NeedsGrantNow() && r.atOnce < maxAtOnce {
		r.atOnce++
		r.nextSend = s.now
	} else {
		r.atOnce = 0
		r.nextSend = max(sent+r.bound(), s.now)
	}
	s.at(r.nextSend-s.now, func() { s.send(r) })
	if !r.judged {
		s.at(max(r.tr.LapseAt()-s.now, 0), func() { s.judge(r) })
	}
}

func (s *sim) judge(r *simRouter) {
	if r.judged || r.outstanding != nil || !r.tr.Lapsed(s.now) {
		return
	}
	r.judged = true
	if !r.leads || s.failedAt != 0 {
		return
	}
	s.failedAt, s.failedBy = s.now, r
	r.tr.SetTenants(nil) // x is promoted elsewhere
	if ok, _ := s.node.Writable(s.nodeNow(), "x"); ok {
		s.t.Fatalf("failed over at %v while the node could still write x", s.now)
	}
}

func (s *sim) nodeReceives(r *simRouter, epoch int, g Grant) {
	if epoch != s.epoch {
		return // sent to a process that is gone
	}
	if s.now < s.stallUntil {
		// Read once the stall ends, in some order among the others.
		wait := s.stallUntil - s.now + time.Duration(s.rng.Int64N(int64(time.Millisecond)))
		s.at(wait, func() { s.nodeReceives(r, epoch, g) })
		return
	}
	a, err := s.node.Handle(s.nodeNow(), g)
	ok, _ := s.node.Writable(s.nodeNow(), "x")
	if s.taker != nil && err == nil {
		if r == s.taker && s.handedAt == 0 {
			s.handedAt = s.now
		}
		if r != s.taker && s.handedAt != 0 {
			s.t.Fatalf("at %v the node took the first directory's grant %+v after it took the taker's at %v", s.now, g, s.handedAt)
		}
	}
	if ok {
		s.writes++
		if s.failedAt != 0 {
			s.t.Fatalf("at %v, after the failover at %v, grant %+v let the node write x again", s.now, s.failedAt, g)
		}
		if s.movedAt != 0 {
			s.t.Fatalf("at %v, after the node ran a lease without x from %v, grant %+v let it write x again", s.now, s.movedAt, g)
		}
	}
	d, delivered := s.delay()
	if !delivered {
		return
	}
	s.at(d, func() {
		if r.outstanding == nil || r.outstanding.N != g.N {
			return // the router gave up on it: counts nothing
		}
		r.outstanding = nil
		if err != nil {
			r.tr.Refused(g, err)
		} else {
			r.tr.Answered(s.now, g, a)
			if s.moveAt != 0 && s.movedAt == 0 && a.Took && a.LeftMS > 0 && g.List == ListID([]string{"y"}) {
				s.movedAt = s.now
			}
		}
		s.afterCall(r)
	})
}

// nodeChaos stalls and restarts the node now and then.
func (s *sim) nodeChaos() {
	if s.rng.Float64() < s.net.stallRate {
		s.stallUntil = max(s.stallUntil, s.now+time.Duration(s.rng.Int64N(int64(3*s.lease))))
	}
	if s.rng.Float64() < s.net.restart {
		s.epoch++
		s.node = NewNodeLease(s.bound, func(b Binding) error { s.bound = b; return nil })
	}
	s.at(time.Second, s.nodeChaos)
}

// startRouter has a router start leasing the node now, counting it as
// granted at this first round.
func (s *sim) startRouter(name string, term uint64, ls Leases, list []string) *simRouter {
	r := &simRouter{tr: NewTracker("n", name, term, ls, s.now), leads: true}
	r.tr.SetDir("global") // a router of the global directory, unless handOff says otherwise
	r.tr.SetTenants(list)
	s.routers = append(s.routers, r)
	s.at(0, func() { s.send(r) })
	return r
}

// handOff starts a router of another directory leasing the node with a
// handoff from the first's, as a region's router does taking its region's
// leasing over.
func (s *sim) handOff(first *simRouter, force bool) {
	first.leads = false // its directory no longer owns the region's placements
	first.stopped = !force
	list := []string{"x"}
	if s.failedAt != 0 {
		list = nil
	}
	taker := s.startRouter("region-r", 1, Leases{Own: s.lease, Record: s.lease, Grant: s.lease}, list)
	taker.tr.SetDir("region:eu")
	taker.tr.SetTerms(NodeTerms{Epoch: 1, Handoff: &Handoff{From: "global", Term: 1, Force: force},
		Floor: s.lease, MustRun: force}, s.now)
	s.taker = taker
}

type simPlan struct {
	net    simNet
	length time.Duration
	moveAt time.Duration // take x off a live node's list then (0: never)
	// promoteAt: a standby is promoted then, at term 2 with a lease of
	// promoteLease, while the first router (not knowing) keeps granting.
	promoteAt    time.Duration
	promoteLease time.Duration
	promoteTerm  uint64 // 2 for a promotion; 1 for the router restarted at its term
	// cutAt: the node is cut off the network then, for good (0: never).
	cutAt time.Duration
	// handoffAt: the node's region is handed to another directory then
	// (0: never): planned, the first router stops granting and the taker
	// counts the node by the first's record; forced, the first router
	// goes on granting, not knowing, and the taker fails the node over
	// only once it ran one of its leases.
	handoffAt    time.Duration
	handoffForce bool
	lease        time.Duration // 0: 3s
}

func runSim(t testing.TB, seed uint64, p simPlan) *sim {
	t.Helper()
	s := &sim{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), net: p.net, lease: 3 * time.Second, moveAt: p.moveAt}
	if p.lease > 0 {
		s.lease = p.lease
	}
	// The clocks drift apart by up to 5%, which the tenth covers.
	s.rate = 0.95 + 0.1*s.rng.Float64()
	s.node = NewNodeLease(Binding{}, func(b Binding) error { s.bound = b; return nil })
	first := s.startRouter("r1", 1, Leases{Own: s.lease, Record: s.lease, Grant: s.lease}, []string{"x"})
	s.at(time.Second, s.nodeChaos)
	if p.moveAt > 0 {
		// A grant carrying a list naming x is in flight as x leaves: y is
		// placed on the node a moment before x is moved off it. A failover
		// before then took x off already.
		s.at(p.moveAt-time.Duration(s.rng.Int64N(int64(2*time.Second))), func() {
			if s.failedAt == 0 {
				first.tr.SetTenants([]string{"x", "y"})
			}
		})
		s.at(p.moveAt, func() {
			if s.failedAt == 0 {
				first.tr.SetTenants([]string{"y"})
			}
		})
	}
	if p.promoteAt > 0 {
		s.at(p.promoteAt, func() {
			first.leads = false
			// Restarted at its term, the old process is gone (its grants
			// on the way still arrive); promoted over, it runs on.
			first.stopped = p.promoteTerm == 1
			list := []string{"x"}
			if s.failedAt != 0 {
				list = nil
			}
			// The record holds the first router's lease: count by it, grant
			// the new one's, and lower the record once it has run out.
			ls := Leases{Own: p.promoteLease, Record: s.lease, Grant: p.promoteLease}
			second := s.startRouter("r2", p.promoteTerm, ls, list)
			lapse := s.lease + s.lease/10
			s.at(lapse, func() {
				second.tr.SetLeases(Leases{Own: p.promoteLease, Record: p.promoteLease, Grant: p.promoteLease})
			})
		})
	}
	if p.handoffAt > 0 {
		s.at(p.handoffAt, func() { s.handOff(first, p.handoffForce) })
	}
	if p.cutAt > 0 {
		s.at(p.cutAt, func() {
			s.cut = true
			if ok, _ := s.node.Writable(s.nodeNow(), "x"); ok {
				left := s.node.Status(s.nodeNow()).LeftMS
				s.stopAt = s.now + time.Duration(float64(time.Duration(left)*time.Millisecond)/s.rate)
			}
		})
	}
	for s.queue.Len() > 0 {
		e := heap.Pop(&s.queue).(simEvent)
		if e.at > p.length {
			break
		}
		s.now = e.at
		e.fn()
	}
	return s
}

func TestSimNoTwoPrimaries(t *testing.T) {
	hostile := simNet{drop: 0.05, slow: 0.08, late: 0.03, stallRate: 0.03, restart: 0.005}
	failed := 0
	for seed := range uint64(400) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s := runSim(t, seed, simPlan{net: hostile, length: 2 * time.Minute})
			if s.failedAt != 0 {
				failed++
			}
		})
	}
	// The net is hostile enough that failovers happen: the check above
	// was put to the test.
	t.Logf("%d of 400 runs failed over", failed)
	if failed < 40 {
		t.Fatalf("only %d of 400 runs failed over: the simulation tests too little", failed)
	}
}

func TestSimHealthyNeverFailsOver(t *testing.T) {
	calm := simNet{slow: 0.01}
	for seed := range uint64(50) {
		s := runSim(t, seed, simPlan{net: calm, length: 2 * time.Minute})
		if s.failedAt != 0 {
			t.Fatalf("seed %d: a node on a calm network failed over at %v", seed, s.failedAt)
		}
		// Renewed every third of the lease, the node could write at nearly
		// every grant it read.
		if g := s.routers[0].grants; s.writes < g*9/10 {
			t.Fatalf("seed %d: writable at %d of %d grants", seed, s.writes, g)
		}
	}
}

// TestSimLateGrantHandsNothingBack takes x off a live node's list (a move,
// or a tenant held by another operation) and checks that once the node ran
// a lease naming no x, no grant it reads late — reordered, held on the
// way — gives x back to it.
func TestSimLateGrantHandsNothingBack(t *testing.T) {
	reorder := simNet{drop: 0.02, slow: 0.15, late: 0.03}
	moved := 0
	for seed := range uint64(400) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s := runSim(t, seed, simPlan{net: reorder, length: time.Minute, moveAt: 10*time.Second + time.Duration(seed)*37*time.Millisecond})
			if s.movedAt != 0 {
				moved++
			}
		})
	}
	t.Logf("%d of 400 runs moved x off the node", moved)
	if moved < 200 {
		t.Fatalf("only %d of 400 runs moved x: the simulation tests too little", moved)
	}
}

// TestSimPromotedWithShorterLease promotes a standby with a third of the
// lease while the first router, deposed without knowing it, keeps
// granting: the new router counts the node by the record until the node
// says it ran one of its leases, so its failovers still come only after
// every lease the node held has run out. At term 2 the node takes the new
// router's first grant and drops the old lease; at term 1 (the router
// restarted) it refuses the new router's grants while the old lease runs,
// answering took=false all the while.
func TestSimPromotedWithShorterLease(t *testing.T) {
	for _, term := range []uint64{2, 1} {
		t.Run(fmt.Sprint("term", term), func(t *testing.T) { testSimPromoted(t, term) })
	}
}

func testSimPromoted(t *testing.T, term uint64) {
	hostile := simNet{drop: 0.05, slow: 0.08, late: 0.03, stallRate: 0.03, restart: 0.005}
	failed := 0
	for seed := range uint64(400) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s := runSim(t, seed, simPlan{net: hostile, length: time.Minute,
				promoteAt: 5*time.Second + time.Duration(seed)*11*time.Millisecond, promoteLease: time.Second, promoteTerm: term})
			if s.failedBy != nil && s.failedBy != s.routers[0] {
				failed++
			}
		})
	}
	t.Logf("%d of 400 runs were failed over by the promoted router", failed)
	if failed < 40 {
		t.Fatalf("only %d of 400 runs failed over after the promotion", failed)
	}
}

// TestSimHandoff hands the node's region to another directory, planned
// (the giver stops granting, the taker counts the node by the giver's
// record) and forced (the giver goes on granting, not knowing; the taker
// fails the node over only once it ran one of its leases): once the node
// took the taker's grant it takes none of the giver's again, and once the
// taker failed it over no grant — the giver's late ones included — lets it
// write x.
func TestSimHandoff(t *testing.T) {
	for _, force := range []bool{false, true} {
		t.Run(fmt.Sprint("force=", force), func(t *testing.T) {
			hostile := simNet{drop: 0.05, slow: 0.08, late: 0.03, stallRate: 0.03, restart: 0.005}
			handed, failed := 0, 0
			for seed := range uint64(400) {
				t.Run(fmt.Sprint(seed), func(t *testing.T) {
					s := runSim(t, seed, simPlan{net: hostile, length: time.Minute,
						handoffAt: 5*time.Second + time.Duration(seed)*13*time.Millisecond, handoffForce: force})
					if s.handedAt != 0 {
						handed++
					}
					if s.failedBy != nil && s.failedBy == s.taker {
						failed++
					}
				})
			}
			t.Logf("%d of 400 runs handed over, %d failed over by the taker", handed, failed)
			if handed < 300 || failed < 40 {
				t.Fatalf("handed over %d, failed over by the taker %d, of 400: the simulation tests too little", handed, failed)
			}
		})
	}
}

// BenchmarkCutOff measures, on the simulation's virtual clocks, what a node
// cut off the network costs its tenant with a lease of a second: how soon
// after the cut the node stops writing (its lease runs from the grant
// before its last renewal) and how soon the router fails it over (a lease
// and a tenth after the last answer, judged when no grant is out). The
// network is calm before the cut; the cut falls at a different phase of
// the renewal round each iteration.
func BenchmarkCutOff(b *testing.B) {
	var stops, fails []time.Duration
	seed := uint64(0)
	for b.Loop() {
		seed++
		cut := 5*time.Second + time.Duration(seed*7919%1000)*time.Millisecond
		s := runSim(b, seed, simPlan{net: simNet{}, length: 10 * time.Second, cutAt: cut, lease: time.Second})
		if s.failedAt == 0 || s.stopAt == 0 {
			b.Fatalf("seed %d: no stop (%v) or failover (%v)", seed, s.stopAt, s.failedAt)
		}
		stops = append(stops, s.stopAt-cut)
		fails = append(fails, s.failedAt-cut)
	}
	slices.Sort(stops)
	slices.Sort(fails)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(stops[0]), "stop-min-ms")
	b.ReportMetric(ms(stops[len(stops)-1]), "stop-max-ms")
	b.ReportMetric(ms(fails[0]), "failover-min-ms")
	b.ReportMetric(ms(fails[len(fails)-1]), "failover-max-ms")
}
