package lease

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

const ms = time.Millisecond

// grantOf builds a grant of router r at term for n acknowledging ack, with
// lease l milliseconds and the list tenants (nil: no list, naming the id
// of list instead).
func grantOf(r string, term, n, ack uint64, l int64, tenants []string, list []string) Grant {
	g := Grant{Term: term, Router: r, N: n, Ack: ack, MS: l}
	if tenants != nil {
		g.Tenants = tenants
		g.List = ListID(tenants)
	} else {
		g.List = ListID(list)
	}
	return g
}

// step is one thing that happens to a node: a grant handled at a boot-clock
// moment (and what it must answer), or a write asked about.
type step struct {
	at      time.Duration
	grant   *Grant
	took    bool
	ran     bool
	left    time.Duration // want LeftMS, exactly
	err     error         // want this refusal instead of an answer
	write   string        // ask Writable for this tenant
	canOK   bool          // want Writable's answer
	comment string
}

func grantStep(at time.Duration, g Grant, took, ran bool, left time.Duration, comment string) step {
	return step{at: at, grant: &g, took: took, ran: ran, left: left, comment: comment}
}

func refuseStep(at time.Duration, g Grant, err error, comment string) step {
	return step{at: at, grant: &g, err: err, comment: comment}
}

func writeStep(at time.Duration, tenant string, ok bool, comment string) step {
	return step{at: at, write: tenant, canOK: ok, comment: comment}
}

// runSteps plays steps on l in order.
func runSteps(t testing.TB, l *NodeLease, steps []step) {
	t.Helper()
	for i, s := range steps {
		if s.grant == nil {
			ok, retry := l.Writable(s.at, s.write)
			if ok != s.canOK {
				t.Fatalf("step %d (%s): Writable(%v, %q) = %v, want %v", i, s.comment, s.at, s.write, ok, s.canOK)
			}
			if !ok && retry < time.Second {
				t.Fatalf("step %d (%s): retryAfter %v below a second", i, s.comment, retry)
			}
			continue
		}
		a, err := l.Handle(s.at, *s.grant)
		if s.err != nil {
			if !errors.Is(err, s.err) {
				t.Fatalf("step %d (%s): Handle error %v, want %v", i, s.comment, err, s.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("step %d (%s): Handle: %v", i, s.comment, err)
		}
		want := Answer{Took: s.took, Ran: s.ran, N: s.grant.N, Term: a.Term, LeftMS: s.left.Milliseconds()}
		if !reflect.DeepEqual(a, want) {
			t.Fatalf("step %d (%s): got %+v, want %+v", i, s.comment, a, want)
		}
	}
}

func TestNodeLeaseNumberedGrants(t *testing.T) {
	a := []string{"a"}
	none := []string{}
	tests := []struct {
		name  string
		steps []step
	}{
		{"a node holding no lease needs a second grant", []step{
			writeStep(0, "a", false, "new node holds nothing"),
			grantStep(0, grantOf("r", 1, 1, 0, 1000, a, nil), true, false, 0, "first grant: taken for its list, no lease"),
			writeStep(5*ms, "a", false, "still no lease"),
			grantStep(40*ms, grantOf("r", 1, 2, 1, 1000, nil, a), true, true, 960*ms, "second grant runs from the answer to the first"),
			writeStep(500*ms, "a", true, "lease runs"),
			writeStep(500*ms, "b", false, "lease does not name b"),
			writeStep(999*ms, "a", true, "last moment of the lease"),
			writeStep(1000*ms, "a", false, "lease ran out, counted from the first answer"),
		}},
		{"the lease runs from the answer to ack, never from reading the grant", []step{
			grantStep(0, grantOf("r", 1, 1, 0, 1000, a, nil), true, false, 0, ""),
			grantStep(100*ms, grantOf("r", 1, 2, 1, 1000, nil, a), true, true, 900*ms, ""),
			grantStep(400*ms, grantOf("r", 1, 3, 2, 1000, nil, a), true, true, 700*ms, "from the answer to 2 at 100ms"),
			writeStep(1099*ms, "a", true, ""),
			writeStep(1100*ms, "a", false, "not 1400: the read moment does not count"),
		}},
		{"a late grant read after the failover gives no lease", []step{
			grantStep(0, grantOf("r", 1, 1, 0, 1000, a, nil), true, false, 0, ""),
			grantStep(300*ms, grantOf("r", 1, 2, 1, 1000, nil, a), true, true, 700*ms, "router's answer to 2 is its last"),
			// The node stalls; grants 3 and 4 wait in its socket, the
			// router gives both up and fails the node over at 300+1100.
			writeStep(1300*ms, "a", false, "the node stops writing by its own clock"),
			grantStep(1500*ms, grantOf("r", 1, 3, 2, 1000, nil, a), true, true, 0, "late: runs from 2's answer, long gone"),
			writeStep(1500*ms, "a", false, "no write for the failed-over tenant"),
			grantStep(1501*ms, grantOf("r", 1, 4, 2, 1000, nil, a), true, true, 0, "still only ack 2"),
			writeStep(1501*ms, "a", false, ""),
		}},
		{"a late grant cannot hand back a tenant while a lease runs", []step{
			grantStep(0, grantOf("r", 1, 1, 0, 3000, a, nil), true, false, 0, ""),
			grantStep(100*ms, grantOf("r", 1, 2, 1, 3000, nil, a), true, true, 2900*ms, ""),
			grantStep(200*ms, grantOf("r", 1, 4, 2, 3000, none, nil), true, true, 2900*ms, "failover took a off the list"),
			writeStep(300*ms, "a", false, ""),
			grantStep(400*ms, grantOf("r", 1, 3, 2, 3000, a, nil), false, true, 2700*ms, "late grant 3 naming a: not newer"),
			writeStep(400*ms, "a", false, "a was not handed back"),
			grantStep(500*ms, grantOf("r", 1, 3, 1, 3000, a, nil), false, true, 2600*ms, "older ack: not newer"),
			writeStep(500*ms, "a", false, ""),
		}},
		{"a late grant taken once the lease lapsed runs none and its list is caught", []step{
			grantStep(0, grantOf("r", 1, 1, 0, 1000, a, nil), true, false, 0, ""),
			grantStep(100*ms, grantOf("r", 1, 2, 1, 1000, nil, a), true, true, 900*ms, ""),
			grantStep(200*ms, grantOf("r", 1, 4, 2, 1000, none, nil), true, true, 900*ms, "list without a"),
			grantStep(2000*ms, grantOf("r", 1, 3, 2, 1000, a, nil), true, true, 0, "no lease runs: taken for its list only"),
			writeStep(2000*ms, "a", false, "no lease from it"),
			refuseStep(2100*ms, grantOf("r", 1, 5, 4, 1000, nil, none), ErrNeedsList, "node holds the old list's id: asks"),
			grantStep(2200*ms, grantOf("r", 1, 6, 4, 1000, none, nil), true, true, 0, "ack 4's lease long gone"),
			grantStep(2300*ms, grantOf("r", 1, 7, 6, 1000, nil, none), true, true, 900*ms, ""),
			writeStep(2300*ms, "a", false, "a stays off"),
		}},
		{"a grant whose answer never came back is acknowledged by no grant after it", []step{
			grantStep(0, grantOf("r", 1, 1, 0, 1000, a, nil), true, false, 0, ""),
			grantStep(300*ms, grantOf("r", 1, 2, 1, 1000, nil, a), true, true, 700*ms, ""),
			grantStep(700*ms, grantOf("r", 1, 3, 2, 1000, nil, a), true, true, 600*ms, "its answer is lost on the way"),
			grantStep(1000*ms, grantOf("r", 1, 4, 2, 1000, nil, a), true, true, 300*ms, "acks 2 again, not 3"),
			writeStep(1299*ms, "a", true, ""),
			writeStep(1300*ms, "a", false, "not 1700, which 3's answer would have given"),
		}},
		{"took=false, then the grant acknowledging it", []step{
			grantStep(0, grantOf("old", 1, 7, 0, 1000, a, nil), true, false, 0, ""),
			grantStep(0, grantOf("old", 1, 8, 7, 1000, nil, a), true, true, 1000*ms, "old router's lease 0..1000"),
			grantStep(500*ms, grantOf("new", 1, 1, 0, 1000, a, nil), false, false, 500*ms, "another router at the same term: not newer"),
			grantStep(600*ms, grantOf("new", 1, 2, 1, 1000, a, nil), false, false, 400*ms, "still not while the lease runs"),
			grantStep(700*ms, grantOf("new", 1, 9, 8, 1000, a, nil), false, false, 300*ms, "whatever its numbers"),
			writeStep(999*ms, "a", true, "the old lease runs on, uncut"),
			writeStep(1000*ms, "a", false, ""),
			grantStep(1100*ms, grantOf("new", 1, 10, 9, 1000, a, nil), true, true, 600*ms, "lease from the took=false answer at 700"),
			writeStep(1699*ms, "a", true, ""),
			writeStep(1700*ms, "a", false, ""),
		}},
		{"a router promoted with a shorter lease shortens the node's", []step{
			grantStep(0, grantOf("r1", 1, 1, 0, 10000, a, nil), true, false, 0, ""),
			grantStep(0, grantOf("r1", 1, 2, 1, 10000, nil, a), true, true, 10000*ms, "ten seconds"),
			grantStep(100*ms, grantOf("r2", 2, 1, 0, 1000, a, nil), true, false, 0, "higher term is newer: taken whole, no ack yet"),
			writeStep(100*ms, "a", false, "cut short"),
			grantStep(200*ms, grantOf("r2", 2, 2, 1, 1000, nil, a), true, true, 900*ms, "first acknowledged grant"),
			writeStep(1099*ms, "a", true, ""),
			writeStep(1100*ms, "a", false, "not 10000"),
		}},
		{"a router restarted at its term with a shorter lease takes over once the old lapses", []step{
			grantStep(0, grantOf("r1", 1, 1, 0, 5000, a, nil), true, false, 0, ""),
			grantStep(0, grantOf("r1", 1, 2, 1, 5000, nil, a), true, true, 5000*ms, ""),
			grantStep(100*ms, grantOf("r1b", 1, 1, 0, 1000, a, nil), false, false, 4900*ms, ""),
			grantStep(5000*ms, grantOf("r1b", 1, 2, 1, 1000, a, nil), true, false, 0, "ack 1's lease ran out at 1100"),
			grantStep(5100*ms, grantOf("r1b", 1, 3, 2, 1000, nil, a), true, true, 900*ms, ""),
		}},
		{"the suspend case", []step{
			grantStep(0, grantOf("r", 1, 1, 0, 1000, a, nil), true, false, 0, ""),
			grantStep(300*ms, grantOf("r", 1, 2, 1, 1000, nil, a), true, true, 700*ms, ""),
			// The machine sleeps for a minute; the boot clock counts it.
			writeStep(60*time.Second, "a", false, "no lease on waking"),
			grantStep(60*time.Second, grantOf("r", 1, 3, 2, 1000, nil, a), true, true, 0, "the grant read on waking acks 2: gives none"),
			writeStep(60*time.Second, "a", false, ""),
			grantStep(60*time.Second+10*ms, grantOf("r", 1, 4, 3, 1000, nil, a), true, true, 990*ms, "the next one does"),
		}},
		{"a higher term's grant is refused later by no lower one", []step{
			grantStep(0, grantOf("r2", 2, 1, 0, 1000, a, nil), true, false, 0, ""),
			refuseStep(10*ms, grantOf("r1", 1, 9, 8, 1000, a, nil), ErrLowerTerm, "a deposed router is fenced"),
			grantStep(20*ms, grantOf("r2", 2, 2, 1, 1000, nil, a), true, true, 980*ms, ""),
		}},
		{"a grant refused for its list is not kept", []step{
			refuseStep(0, grantOf("r", 1, 1, 0, 1000, nil, a), ErrNeedsList, "a new node has no list"),
			grantStep(10*ms, grantOf("r", 1, 2, 1, 1000, a, nil), true, false, 0, "ack 1 was never answered 200"),
			grantStep(20*ms, grantOf("r", 1, 3, 2, 1000, nil, a), true, true, 990*ms, ""),
		}},
		{"same grant twice is not newer", []step{
			grantStep(0, grantOf("r", 1, 1, 0, 1000, a, nil), true, false, 0, ""),
			grantStep(0, grantOf("r", 1, 2, 1, 1000, nil, a), true, true, 1000*ms, ""),
			grantStep(10*ms, grantOf("r", 1, 2, 1, 1000, nil, a), false, true, 990*ms, ""),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runSteps(t, NewNodeLease(Binding{}, nil), tt.steps)
		})
	}
}

// TestNodeLeaseStall16 plays a node stalled for sixteen rounds: the grants
// waiting in its socket push the answer the router last counted out of the
// sixteen kept, so the next grant acknowledging it gives no lease, and the
// one after (acknowledging a kept answer) does.
func TestNodeLeaseStall16(t *testing.T) {
	a := []string{"a"}
	l := NewNodeLease(Binding{}, nil)
	const long = 1_000_000 // a lease that outlasts the test's clock
	steps := []step{
		grantStep(0, grantOf("r", 1, 1, 0, long, a, nil), true, false, 0, ""),
		grantStep(ms, grantOf("r", 1, 2, 1, long, nil, a), true, true, (long-1)*ms, "lease from 0"),
	}
	// Grants 3..18 all acknowledge 2, the last answer the router counted.
	for n := uint64(3); n <= 18; n++ {
		at := time.Duration(n) * ms
		steps = append(steps, grantStep(at, grantOf("r", 1, n, 2, long, nil, a), true, true, (long+1)*ms-at, "2 still kept (answered at 1ms)"))
	}
	steps = append(steps,
		grantStep(19*ms, grantOf("r", 1, 19, 2, long, nil, a), true, true, 0, "2 is no longer kept: no lease"),
		writeStep(19*ms, "a", false, ""),
		grantStep(20*ms, grantOf("r", 1, 20, 19, long, nil, a), true, true, (long-1)*ms, "acks a kept answer"),
		writeStep(20*ms, "a", true, ""),
	)
	runSteps(t, l, steps)
}

func TestNodeLeaseTerms(t *testing.T) {
	a := []string{"a"}
	var persisted []uint64
	fail := false
	l := NewNodeLease(Binding{Term: 3}, func(b Binding) error {
		if fail {
			return errors.New("disk full")
		}
		persisted = append(persisted, b.Term)
		return nil
	})

	_, err := l.Handle(0, grantOf("r", 2, 1, 0, 1000, a, nil))
	var te *TermError
	if !errors.As(err, &te) || te.Highest != 3 {
		t.Fatalf("lower term than the persisted 3: err %v, want TermError{3}", err)
	}
	if _, err := l.Handle(0, grantOf("r", 3, 1, 0, 1000, a, nil)); err != nil {
		t.Fatalf("same term: %v", err)
	}
	if len(persisted) != 0 {
		t.Fatalf("persisted %v for a term not higher", persisted)
	}

	// A higher term that cannot be persisted is not taken at all.
	fail = true
	if _, err := l.Handle(10*ms, grantOf("r4", 4, 1, 0, 1000, a, nil)); err == nil {
		t.Fatal("higher term taken though it could not be persisted")
	}
	if got := l.HighestTerm(); got != 3 {
		t.Fatalf("highest %d after a failed persist, want 3", got)
	}
	if a, err := l.Handle(20*ms, grantOf("r", 3, 2, 1, 1000, nil, a)); err != nil || a.LeftMS != 980 {
		t.Fatalf("term 3 grant after the refused term 4: %+v %v (the refused grant must not count)", a, err)
	}

	fail = false
	ans, err := l.Handle(30*ms, grantOf("r4", 4, 1, 0, 1000, a, nil))
	if err != nil || ans.Term != 4 {
		t.Fatalf("term 4: %+v %v", ans, err)
	}
	if len(persisted) != 1 || persisted[0] != 4 {
		t.Fatalf("persisted %v, want [4]", persisted)
	}
	if _, err := l.Handle(40*ms, grantOf("r", 3, 3, 2, 1000, nil, a)); !errors.As(err, &te) || te.Highest != 4 {
		t.Fatalf("deposed router's grant: %v, want TermError{4}", err)
	}
}

func TestNodeLeaseRanNamesTheRouter(t *testing.T) {
	a := []string{"a"}
	l := NewNodeLease(Binding{}, nil)
	runSteps(t, l, []step{
		grantStep(0, grantOf("r1", 1, 1, 0, 1000, a, nil), true, false, 0, ""),
		grantStep(0, grantOf("r1", 1, 2, 1, 1000, nil, a), true, true, 1000*ms, ""),
		grantStep(2000*ms, grantOf("r2", 1, 1, 0, 1000, a, nil), true, false, 0, "r2 has run none"),
		grantStep(2000*ms, grantOf("r1", 1, 3, 2, 1000, nil, a), true, true, 0, "r1 did, long ago"),
	})
	s := l.Status(2000 * ms)
	if s.Term != 1 || s.N != 3 || s.Router != "r1" || !s.Ran || s.LeftMS != 0 || len(s.Tenants) != 1 {
		t.Fatalf("status %+v", s)
	}
}

func TestGrantValidate(t *testing.T) {
	good := grantOf("r", 1, 2, 1, 1000, []string{"a"}, nil)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []func(*Grant){
		func(g *Grant) { g.Router = "" },
		func(g *Grant) { g.N = 0; g.Ack = 0 },
		func(g *Grant) { g.Ack = 2 },
		func(g *Grant) { g.MS = 0 },
		func(g *Grant) { g.List = "" },
		func(g *Grant) { g.List = ListID([]string{"b"}) },
	}
	for i, mutate := range bad {
		g := good
		mutate(&g)
		if err := g.Validate(); !errors.Is(err, ErrBadGrant) {
			t.Errorf("case %d: %v, want ErrBadGrant", i, err)
		}
		if _, err := NewNodeLease(Binding{}, nil).Handle(0, g); !errors.Is(err, ErrBadGrant) {
			t.Errorf("case %d: Handle %v, want ErrBadGrant", i, err)
		}
	}
}

// WritableUntil says when a tenant last was writable: never understated
// in the node's favour — a lapse at the lease's end, a list that left the
// tenant out or a grant that cut the lease short at the moment it was
// taken, unknown before any lease let the tenant write.
func TestNodeLeaseWritableUntil(t *testing.T) {
	a, ab, b := []string{"a"}, []string{"a", "b"}, []string{"b"}
	type ask struct {
		at       time.Duration
		tenant   string
		until    time.Duration
		writable bool
		known    bool
	}
	tests := []struct {
		name  string
		steps []step // grants only
		asks  []ask
	}{
		{"no lease yet: unknown", []step{
			grantStep(0, grantOf("r", 1, 1, 0, 1000, a, nil), true, false, 0, "first grant runs no lease"),
		}, []ask{{10 * ms, "a", 0, false, false}}},
		{"running: writable; lapsed: its end", []step{
			grantStep(0, grantOf("r", 1, 1, 0, 1000, ab, nil), true, false, 0, ""),
			grantStep(100*ms, grantOf("r", 1, 2, 1, 1000, nil, ab), true, true, 900*ms, ""),
		}, []ask{
			{500 * ms, "a", 500 * ms, true, true},
			{500 * ms, "c", 0, false, false},
			{5000 * ms, "a", 1000 * ms, false, true},
			{5000 * ms, "b", 1000 * ms, false, true},
		}},
		{"left out of a list: when the list was taken", []step{
			grantStep(0, grantOf("r", 1, 1, 0, 1000, ab, nil), true, false, 0, ""),
			grantStep(100*ms, grantOf("r", 1, 2, 1, 1000, nil, ab), true, true, 900*ms, ""),
			grantStep(300*ms, grantOf("r", 1, 3, 2, 1000, b, nil), true, true, 800*ms, "a moved off"),
			grantStep(700*ms, grantOf("r", 1, 4, 3, 1000, nil, b), true, true, 600*ms, "renewed without a"),
		}, []ask{
			{800 * ms, "a", 300 * ms, false, true},
			{800 * ms, "b", 800 * ms, true, true},
			{9000 * ms, "a", 300 * ms, false, true},
			{9000 * ms, "b", 1300 * ms, false, true},
		}},
		{"a grant whose acknowledged answer is gone cuts the lease at once", []step{
			grantStep(0, grantOf("r", 1, 1, 0, 1000, a, nil), true, false, 0, ""),
			grantStep(100*ms, grantOf("r", 1, 2, 1, 1000, nil, a), true, true, 900*ms, ""),
			grantStep(400*ms, grantOf("r2", 2, 1, 0, 1000, a, nil), true, false, 0, "a new router's first grant runs nothing"),
		}, []ask{
			{450 * ms, "a", 400 * ms, false, true},
			{9000 * ms, "a", 400 * ms, false, true},
		}},
		{"a lapse, then a grant taken for its list only: still the lapse", []step{
			grantStep(0, grantOf("r", 1, 1, 0, 1000, a, nil), true, false, 0, ""),
			grantStep(100*ms, grantOf("r", 1, 2, 1, 1000, nil, a), true, true, 900*ms, ""),
			grantStep(3000*ms, grantOf("r", 1, 3, 2, 1000, ab, nil), true, true, 0, "late: its lease long gone"),
		}, []ask{
			{3500 * ms, "a", 1000 * ms, false, true},
			{3500 * ms, "b", 0, false, false},
		}},
		{"writable again, then left out: the later moment", []step{
			grantStep(0, grantOf("r", 1, 1, 0, 1000, a, nil), true, false, 0, ""),
			grantStep(100*ms, grantOf("r", 1, 2, 1, 1000, nil, a), true, true, 900*ms, ""),
			grantStep(200*ms, grantOf("r", 1, 3, 2, 1000, b, nil), true, true, 900*ms, "a off"),
			grantStep(500*ms, grantOf("r", 1, 4, 3, 1000, a, nil), true, true, 700*ms, "a back"),
			grantStep(600*ms, grantOf("r", 1, 5, 4, 1000, b, nil), true, true, 900*ms, "a off again"),
		}, []ask{{700 * ms, "a", 600 * ms, false, true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := NewNodeLease(Binding{}, nil)
			runSteps(t, l, tc.steps)
			for _, q := range tc.asks {
				until, writable, known := l.WritableUntil(q.at, q.tenant)
				if until != q.until || writable != q.writable || known != q.known {
					t.Fatalf("WritableUntil(%v, %s) = %v, %v, %v; want %v, %v, %v",
						q.at, q.tenant, until, writable, known, q.until, q.writable, q.known)
				}
			}
		})
	}
}
