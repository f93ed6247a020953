package lease

import (
	"testing"
	"time"
)

func newTestTracker(own, record time.Duration, now time.Duration) *Tracker {
	grant := own
	tr := NewTracker("n1", "r", 1, Leases{Own: own, Record: record, Grant: grant}, now)
	tr.SetTenants([]string{"a"})
	return tr
}

// answer is a 200 answer that took g and left the node a lease.
func answer(g Grant, ran bool) Answer {
	return Answer{Took: true, Ran: ran, N: g.N, Term: g.Term, LeftMS: 100}
}

func TestTrackerLapse(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name     string
		own, rec time.Duration
		play     func(tr *Tracker)
		notAt    time.Duration // Lapsed must be false here
		at       time.Duration // and true here
	}{
		{"first round counts as granted, by the record", 3 * s, 5 * s,
			func(tr *Tracker) {}, 10*s + 5499*ms, 10*s + 5500*ms},
		{"first round with no record counts by the router's own", 3 * s, 0,
			func(tr *Tracker) {}, 10*s + 3299*ms, 10*s + 3300*ms},
		{"measured from when the answer came back", 3 * s, 3 * s,
			func(tr *Tracker) {
				g := tr.Next(11 * s)
				tr.Answered(11*s+200*ms, g, answer(g, true))
			}, 14*s + 499*ms, 14*s + 500*ms},
		{"a grant given up on counts nothing", 3 * s, 3 * s,
			func(tr *Tracker) {
				g := tr.Next(11 * s)
				tr.Answered(11*s, g, answer(g, true))
				g = tr.Next(12 * s)
				tr.GaveUp(g)
			}, 14*s + 299*ms, 14*s + 300*ms},
		{"record until the node says ran", 1 * s, 4 * s,
			func(tr *Tracker) {
				g := tr.Next(11 * s)
				tr.Answered(11*s, g, answer(g, false))
			}, 11*s + 4399*ms, 11*s + 4400*ms},
		{"own lease once it did", 1 * s, 4 * s,
			func(tr *Tracker) {
				g := tr.Next(11 * s)
				tr.Answered(11*s, g, answer(g, true))
			}, 11*s + 1099*ms, 11*s + 1100*ms},
		{"record again when a restarted node has not run ours", 1 * s, 4 * s,
			func(tr *Tracker) {
				g := tr.Next(11 * s)
				tr.Answered(11*s, g, answer(g, true))
				g = tr.Next(12 * s)
				tr.Answered(12*s, g, Answer{Took: true, N: g.N, Term: 1})
			}, 12*s + 4399*ms, 12*s + 4400*ms},
		{"a refused list counts no answer", 3 * s, 3 * s,
			func(tr *Tracker) {
				g := tr.Next(11 * s)
				tr.Answered(11*s, g, answer(g, true))
				g = tr.Next(12 * s)
				tr.Refused(g, ErrNeedsList)
			}, 14*s + 299*ms, 14*s + 300*ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTestTracker(tt.own, tt.rec, 10*s)
			tt.play(tr)
			if tr.Lapsed(tt.notAt) {
				t.Errorf("lapsed at %v", tt.notAt)
			}
			if !tr.Lapsed(tt.at) {
				t.Errorf("not lapsed at %v (lapse at %v)", tt.at, tr.LapseAt())
			}
		})
	}
}

func TestTrackerLapseWaitsForOutstanding(t *testing.T) {
	tr := newTestTracker(time.Second, 0, 0)
	g1 := tr.Next(0)
	g2 := tr.Next(100 * ms)
	if tr.Lapsed(time.Hour) {
		t.Fatal("lapsed with two grants outstanding")
	}
	tr.GaveUp(g1)
	if tr.Lapsed(time.Hour) {
		t.Fatal("lapsed with a grant outstanding")
	}
	// The last one comes back after all: it counts, from when it came.
	tr.Answered(time.Hour, g2, answer(g2, true))
	if tr.Lapsed(time.Hour + 1099*ms) {
		t.Fatal("lapsed though an answer just came back")
	}
	if !tr.Lapsed(time.Hour + 1100*ms) {
		t.Fatal("not lapsed a lease and a tenth after the last answer")
	}
}

func TestTrackerNeverLapses(t *testing.T) {
	tr := newTestTracker(time.Second, 0, 0)
	g := tr.Next(0)
	tr.Refused(g, ErrTakesNoLease)
	if tr.Lapsed(time.Hour) || tr.TakesLease() || tr.NeedsGrantNow() {
		t.Fatal("a node that takes no lease lapsed or asks for grants")
	}
	g = tr.Next(time.Hour)
	tr.Answered(time.Hour, g, answer(g, true))
	if !tr.TakesLease() || !tr.Lapsed(2*time.Hour) {
		t.Fatal("a node that took a lease again is not judged")
	}

	tr = newTestTracker(time.Second, 0, 0)
	g = tr.Next(0)
	tr.Refused(g, &TermError{Highest: 9})
	if f, h := tr.Fenced(); !f || h != 9 || tr.Lapsed(time.Hour) {
		t.Fatalf("fenced router: fenced %v highest %d lapsed %v", f, h, tr.Lapsed(time.Hour))
	}
}

func TestTrackerGrants(t *testing.T) {
	tr := newTestTracker(3*time.Second, 0, 0)

	g1 := tr.Next(0)
	if g1.N != 1 || g1.Ack != 0 || g1.Tenants == nil || g1.List != ListID([]string{"a"}) || g1.MS != 3000 || g1.Router != "r" || g1.Term != 1 {
		t.Fatalf("first grant %+v", g1)
	}
	tr.Answered(0, g1, Answer{Took: true, N: 1, Term: 1})
	if !tr.NeedsGrantNow() {
		t.Fatal("node holding no lease: no second grant at once")
	}
	g2 := tr.Next(0)
	if g2.N != 2 || g2.Ack != 1 || g2.Tenants != nil {
		t.Fatalf("second grant %+v: want ack 1, no list", g2)
	}
	tr.Answered(0, g2, answer(g2, true))
	if tr.NeedsGrantNow() {
		t.Fatal("grant at once though the node holds a lease")
	}

	// A grant given up on is acknowledged by no grant after it.
	g3 := tr.Next(time.Second)
	tr.GaveUp(g3)
	g4 := tr.Next(2 * time.Second)
	if g4.Ack != 2 {
		t.Fatalf("ack %d after a given-up grant, want 2", g4.Ack)
	}

	// took=false: the grant acknowledging it goes at once, with the list.
	tr.Answered(2*time.Second, g4, Answer{Took: false, N: 4, Term: 1, LeftMS: 500})
	if !tr.NeedsGrantNow() {
		t.Fatal("took=false: no grant at once")
	}
	g5 := tr.Next(2 * time.Second)
	if g5.Ack != 4 || g5.Tenants == nil {
		t.Fatalf("grant after took=false %+v: want ack 4 and the list", g5)
	}
	tr.Answered(2*time.Second, g5, answer(g5, true))
	g6 := tr.Next(3 * time.Second)
	if g6.Tenants != nil {
		t.Fatal("list sent again once taken")
	}
	tr.Answered(3*time.Second, g6, answer(g6, true))

	// A changed list rides with the next grant.
	tr.SetTenants([]string{"b", "a"})
	g7 := tr.Next(4 * time.Second)
	if len(g7.Tenants) != 2 || g7.List != ListID([]string{"a", "b"}) {
		t.Fatalf("changed list: %+v", g7)
	}
	tr.Answered(4*time.Second, g7, answer(g7, true))

	// An empty list is a list: it goes as one, not as "unchanged".
	tr.SetTenants(nil)
	ge := tr.Next(4 * time.Second)
	if ge.Tenants == nil || len(ge.Tenants) != 0 || ge.List != ListID(nil) {
		t.Fatalf("emptied list sent as %#v (%s)", ge.Tenants, ge.List)
	}
	tr.Answered(4*time.Second, ge, answer(ge, true))

	// 412: the list again, at once.
	g8 := tr.Next(5 * time.Second)
	tr.Refused(g8, ErrNeedsList)
	if !tr.NeedsGrantNow() {
		t.Fatal("412: no grant at once")
	}
	if g9 := tr.Next(5 * time.Second); g9.Tenants == nil || g9.Ack != ge.N {
		t.Fatalf("grant after 412 %+v: want the list, ack %d", g9, ge.N)
	}

	// Answers out of order: the ack stays at the newest.
	tr2 := newTestTracker(time.Second, 0, 0)
	a, b := tr2.Next(0), tr2.Next(0)
	tr2.Answered(0, b, answer(b, true))
	tr2.Answered(0, a, answer(a, true))
	if tr2.Ack() != b.N {
		t.Fatalf("ack %d, want %d", tr2.Ack(), b.N)
	}
}

func TestTrackerAgainstNode(t *testing.T) {
	// The tracker's grants, handled by a node, give a lease that has
	// always lapsed on the node by the moment the router would judge it
	// lapsed — here with no time passing on the wire at all, the closest
	// the two clocks can be.
	node := NewNodeLease(Binding{}, nil)
	tr := newTestTracker(time.Second, 0, 0)
	now := time.Duration(0)
	for round := 0; round < 40; round++ {
		g := tr.Next(now)
		if round%7 == 3 {
			tr.GaveUp(g) // lost on the way back
		} else {
			a, err := node.Handle(now, g)
			if err != nil {
				t.Fatal(err)
			}
			tr.Answered(now, g, a)
		}
		if tr.NeedsGrantNow() {
			continue
		}
		now += 333 * ms
	}
	lapse := tr.LapseAt()
	if ok, _ := node.Writable(lapse, "a"); ok {
		t.Fatalf("node still writable at the router's lapse %v", lapse)
	}
	if ok, _ := node.Writable(now, "a"); !ok {
		t.Fatal("node not writable while renewed")
	}
	if !tr.Lapsed(lapse) {
		t.Fatal("router does not judge the lapse")
	}
}
