package lease

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Modes of a fake node.
const (
	up      = "up"       // answers through its NodeLease
	hang    = "hang"     // never answers: the call waits out its bound
	down    = "down"     // refuses the connection at once
	noLease = "no-lease" // started without --lease
	late    = "late"     // answers each grant lateBy after it was sent
)

const lateBy = 1500 * time.Millisecond

// sent is one grant a fake node was sent and what came of it.
type sent struct {
	at  time.Duration
	g   Grant
	a   Answer
	err error
}

// fakeNet carries grants to fake nodes, each with a real NodeLease on the
// bubble's clock.
type fakeNet struct {
	clock Clock

	mu    sync.Mutex
	mode  map[string]string     // guarded by mu
	lease map[string]*NodeLease // guarded by mu
	log   map[string][]sent     // guarded by mu
}

func newFakeNet(clock Clock, nodes ...string) *fakeNet {
	f := &fakeNet{clock: clock, mode: map[string]string{}, lease: map[string]*NodeLease{}, log: map[string][]sent{}}
	for _, n := range nodes {
		f.mode[n] = up
		f.lease[n] = NewNodeLease(Binding{}, nil)
	}
	return f
}

func (f *fakeNet) Send(ctx context.Context, node string, g Grant) (Answer, error) {
	f.mu.Lock()
	mode, l := f.mode[node], f.lease[node]
	now := f.clock.Now()
	f.mu.Unlock()
	var a Answer
	var err error
	switch mode {
	case up:
		a, err = l.Handle(now, g)
	case hang:
		<-ctx.Done()
		err = ctx.Err()
	case late:
		// Read from the socket long after the router gave up, and
		// answered as if nothing were wrong.
		time.Sleep(lateBy)
		now = f.clock.Now()
		a, err = l.Handle(now, g)
	case down:
		err = errors.New("connection refused")
	case noLease:
		err = ErrTakesNoLease
	}
	f.mu.Lock()
	f.log[node] = append(f.log[node], sent{at: now, g: g, a: a, err: err})
	f.mu.Unlock()
	return a, err
}

func (f *fakeNet) setMode(node, mode string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mode[node] = mode
}

func (f *fakeNet) sent(node string) []sent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.log[node])
}

func (f *fakeNet) writable(node, tenant string) bool {
	f.mu.Lock()
	l := f.lease[node]
	f.mu.Unlock()
	ok, _ := l.Writable(f.clock.Now(), tenant)
	return ok
}

// failovers records Failover calls: the node, the moment, and whether the
// node's own lease still let it write the tenant then.
type failovers struct {
	net *fakeNet

	mu    sync.Mutex
	calls []failover // guarded by mu
}

type failover struct {
	node     string
	at       time.Duration
	writable bool
}

func (fo *failovers) call(ctx context.Context, node string) {
	w := fo.net.writable(node, "t-"+node)
	fo.mu.Lock()
	defer fo.mu.Unlock()
	fo.calls = append(fo.calls, failover{node: node, at: fo.net.clock.Now(), writable: w})
}

func (fo *failovers) list() []failover {
	fo.mu.Lock()
	defer fo.mu.Unlock()
	return slices.Clone(fo.calls)
}

// fakeRecord is a longest-lease record in memory that can refuse writes.
type fakeRecord struct {
	clock Clock

	mu     sync.Mutex
	value  time.Duration // guarded by mu
	refuse bool          // guarded by mu
	events []string      // guarded by mu
}

func (r *fakeRecord) Get(context.Context) (time.Duration, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.value, nil
}

func (r *fakeRecord) Raise(_ context.Context, d time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refuse {
		return errors.New("directory unreachable")
	}
	r.value = max(r.value, d)
	r.events = append(r.events, "raise")
	return nil
}

func (r *fakeRecord) Lower(_ context.Context, d time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refuse {
		return errors.New("directory unreachable")
	}
	r.value = min(r.value, d)
	r.events = append(r.events, "lower@"+r.clock.Now().String())
	return nil
}

func (r *fakeRecord) get() (time.Duration, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.value, slices.Clone(r.events)
}

// cluster is a Leaser over a fakeNet inside a synctest bubble. Node n is
// given tenant "t-n".
type cluster struct {
	clock Clock
	net   *fakeNet
	fo    *failovers
	l     *Leaser
}

func newCluster(t testing.TB, lease time.Duration, rec RecordStore, nodes ...string) *cluster {
	t.Helper()
	clock := NewMonoClock()
	net := newFakeNet(clock, nodes...)
	fo := &failovers{net: net}
	l, err := NewLeaser(LeaserConfig{
		Router: "r", Term: 1, Lease: lease, Transport: net, Record: rec,
		Failover: fo.call, Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		l.SetTenants(n, []string{"t-" + n})
	}
	t.Cleanup(func() { l.Close() })
	return &cluster{clock: clock, net: net, fo: fo, l: l}
}

// sleepTo sleeps until the bubble's clock reads at, then lets every
// goroutine settle at that instant.
func (c *cluster) sleepTo(at time.Duration) {
	time.Sleep(at - c.clock.Now())
	synctest.Wait()
}

func sentTimes(s []sent) []time.Duration {
	var out []time.Duration
	for _, x := range s {
		out = append(out, x.at)
	}
	return out
}

func TestLeaserRenewsEveryThird(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3*time.Second, nil, "n1")
		if err := c.l.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		c.sleepTo(4*time.Second + 500*ms)
		got := sentTimes(c.net.sent("n1"))
		// The first grant runs no lease; the second, at once, does.
		want := []time.Duration{0, 0, time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second}
		if !slices.Equal(got, want) {
			t.Fatalf("grants at %v, want %v", got, want)
		}
		if !c.net.writable("n1", "t-n1") {
			t.Fatal("renewed node cannot write its tenant")
		}
		st := c.l.Nodes()
		if len(st) != 1 || !st[0].Ran || st[0].FailedOver || !st[0].TakesLease || st[0].LeaseMS != 3000 || st[0].LastAnswerMS != 500 {
			t.Fatalf("status %+v", st)
		}
		c.l.Close()
		c.l.Close()
	})
}

func TestLeaserFailoverAtLeaseAndATenth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3*time.Second, nil, "n1")
		if err := c.l.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		c.sleepTo(5*time.Second + 500*ms)
		c.net.setMode("n1", down) // the last answer came back at 5s
		lapse := 5*time.Second + 3300*ms
		c.sleepTo(lapse - ms)
		if f := c.fo.list(); len(f) != 0 {
			t.Fatalf("failed over before the lease and a tenth: %+v", f)
		}
		c.sleepTo(lapse)
		f := c.fo.list()
		if len(f) != 1 || f[0].node != "n1" || f[0].at != lapse {
			t.Fatalf("failovers %+v, want n1 at %v", f, lapse)
		}
		if f[0].writable {
			t.Fatal("the node could still write when it was failed over")
		}
		// Once: not again while the node stays down.
		c.sleepTo(20 * time.Second)
		if f := c.fo.list(); len(f) != 1 {
			t.Fatalf("failed over %d times", len(f))
		}
		if st := c.l.Nodes(); !st[0].FailedOver || st[0].Tenants != 0 {
			t.Fatalf("status %+v", st[0])
		}
		// Back, the node is leased a list naming none of its tenants.
		c.net.setMode("n1", up)
		c.sleepTo(25 * time.Second)
		s := c.net.sent("n1")
		if last := s[len(s)-1]; last.err != nil || last.a.LeftMS == 0 {
			t.Fatalf("node back holds no lease: %+v", last)
		}
		if c.net.writable("n1", "t-n1") {
			t.Fatal("node back from a failover writes its old tenant")
		}
		if st := c.l.Nodes(); st[0].FailedOver {
			t.Fatalf("status %+v after the node answered", st[0])
		}
	})
}

func TestLeaserLateAnswerCountsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3*time.Second, nil, "n1")
		if err := c.l.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		c.sleepTo(2*time.Second + 500*ms)
		c.net.setMode("n1", late) // the last answer in time came back at 2s
		c.sleepTo(10 * time.Second)
		// Grants at 3s and 4.5s come back at 4.5s and 6s, past their bound
		// of 1s: given up, so the node lapses at 2s + 3.3s and is judged
		// once the second is given up, at 6s.
		f := c.fo.list()
		if len(f) != 1 || f[0].at != 6*time.Second {
			t.Fatalf("failovers %+v, want n1 at 6s", f)
		}
		if f[0].writable {
			t.Fatal("the node could still write when it was failed over")
		}
	})
}

func TestLeaserHungNodeHoldsUpNoOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3*time.Second, nil, "good", "hung", "dead")
		c.net.setMode("hung", hang)
		if err := c.l.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		c.sleepTo(2*time.Second + 500*ms)
		c.net.setMode("dead", down) // last answer at 2s
		c.sleepTo(12 * time.Second)

		got := sentTimes(c.net.sent("good"))
		want := []time.Duration{0, 0}
		for s := 1; s <= 12; s++ {
			want = append(want, time.Duration(s)*time.Second)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("good node's grants at %v, want %v", got, want)
		}
		f := c.fo.list()
		slices.SortFunc(f, func(a, b failover) int { return int(a.at - b.at) })
		// dead lapses at 2s + 3.3s; hung never answered, so counts from the
		// first round, and is judged once its grant in flight is given up:
		// the one sent at 3s, at 4s.
		wantF := []failover{{node: "dead", at: 5*time.Second + 300*ms}, {node: "hung", at: 4 * time.Second}}
		slices.SortFunc(wantF, func(a, b failover) int { return int(a.at - b.at) })
		if !slices.Equal(f, wantF) {
			t.Fatalf("failovers %+v, want %+v", f, wantF)
		}
		if !c.net.writable("good", "t-good") {
			t.Fatal("good node lost its lease")
		}
	})
}

func TestLeaserNoLeaseNodeNeverFailsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3*time.Second, nil, "plain")
		c.net.setMode("plain", noLease)
		if err := c.l.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		c.sleepTo(time.Minute)
		if f := c.fo.list(); len(f) != 0 {
			t.Fatalf("a node that takes no lease was failed over: %+v", f)
		}
		if st := c.l.Nodes(); st[0].TakesLease {
			t.Fatalf("status %+v", st[0])
		}
		// It is still asked every round, so a restart with --lease is seen.
		if n := len(c.net.sent("plain")); n != 61 {
			t.Fatalf("%d grants in a minute, want 61", n)
		}
	})
}

func TestLeaserTookFalseAnsweredAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3*time.Second, nil, "n1")
		// Another router at the same term holds the node's lease until 3s.
		old := c.net.lease["n1"]
		for _, g := range []Grant{grantOf("old", 1, 1, 0, 3000, []string{"t-n1"}, nil), grantOf("old", 1, 2, 1, 3000, nil, []string{"t-n1"})} {
			if _, err := old.Handle(0, g); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Second)
		if err := c.l.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		s := c.net.sent("n1")
		if len(s) < 2 || s[0].a.Took || s[1].at != s[0].at || s[1].g.Ack != s[0].g.N || s[1].g.Tenants == nil {
			t.Fatalf("took=false not answered at once by a grant acknowledging it with the list: %+v", s)
		}
		// Once the old lease lapsed the router's grants run the lease.
		c.sleepTo(4*time.Second + 500*ms)
		if !c.net.writable("n1", "t-n1") {
			t.Fatalf("new router's lease never ran: %+v", c.net.sent("n1"))
		}
		if f := c.fo.list(); len(f) != 0 {
			t.Fatalf("failovers %+v", f)
		}
	})
}

func TestLeaserGrantNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3*time.Second, nil, "n1")
		if err := c.l.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		c.sleepTo(1500 * ms)
		c.l.SetTenants("n1", []string{"t-n1", "new"})
		c.l.GrantNow("n1")
		synctest.Wait()
		if !c.net.writable("n1", "new") {
			t.Fatal("a created tenant is not writable at once")
		}
		s := c.net.sent("n1")
		if last := s[len(s)-1]; last.at != 1500*ms || len(last.g.Tenants) != 2 {
			t.Fatalf("last grant %+v", last)
		}
		// A node added later is leased too, and removing one stops it.
		c.net.mu.Lock()
		c.net.mode["n2"], c.net.lease["n2"] = up, NewNodeLease(Binding{}, nil)
		c.net.mu.Unlock()
		c.l.SetTenants("n2", []string{"t-n2"})
		synctest.Wait()
		if !c.net.writable("n2", "t-n2") {
			t.Fatal("added node not leased")
		}
		c.l.RemoveNode("n2")
		n := len(c.net.sent("n2"))
		c.sleepTo(10 * time.Second)
		if len(c.net.sent("n2")) != n || len(c.l.Nodes()) != 1 {
			t.Fatal("removed node still leased")
		}
	})
}

func TestLeaserRecord(t *testing.T) {
	t.Run("raised before the first grant", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rec := &fakeRecord{value: time.Second}
			c := newCluster(t, 3*time.Second, rec, "n1")
			rec.clock = c.clock
			if err := c.l.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			if v, ev := rec.get(); v != 3*time.Second || !slices.Equal(ev, []string{"raise"}) {
				t.Fatalf("record %v after %v", v, ev)
			}
			synctest.Wait()
			if s := c.net.sent("n1"); len(s) == 0 || s[0].g.MS != 3000 {
				t.Fatalf("grants %+v", s)
			}
		})
	})
	t.Run("counted by a longer record until ran, then lowered", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rec := &fakeRecord{value: 6 * time.Second}
			c := newCluster(t, 3*time.Second, rec, "n1", "gone")
			rec.clock = c.clock
			c.net.setMode("gone", down)
			if err := c.l.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			if st := c.l.Nodes(); st[0].LeaseMS != 6000 || st[1].LeaseMS != 3000 {
				t.Fatalf("gone counted by %d ms, n1 (ran) by %d", st[0].LeaseMS, st[1].LeaseMS)
			}
			c.sleepTo(6*time.Second + 599*ms)
			if f := c.fo.list(); len(f) != 0 {
				t.Fatalf("failed over before the record and a tenth: %+v", f)
			}
			c.sleepTo(6*time.Second + 600*ms)
			if f := c.fo.list(); len(f) != 1 || f[0].node != "gone" {
				t.Fatalf("failovers %+v", f)
			}
			if v, ev := rec.get(); v != 3*time.Second || !slices.Equal(ev, []string{"lower@6.6s"}) {
				t.Fatalf("record %v after %v, want lowered at 6.6s", v, ev)
			}
		})
	})
	t.Run("not writable: grants run no longer than it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rec := &fakeRecord{value: 900 * ms, refuse: true}
			c := newCluster(t, 3*time.Second, rec, "n1")
			rec.clock = c.clock
			if err := c.l.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			c.sleepTo(time.Second)
			s := c.net.sent("n1")
			if got, want := sentTimes(s), []time.Duration{0, 0, 300 * ms, 600 * ms, 900 * ms}; !slices.Equal(got, want) {
				t.Fatalf("grants at %v, want %v", got, want)
			}
			if s[len(s)-1].g.MS != 900 {
				t.Fatalf("granted %d ms past the record", s[len(s)-1].g.MS)
			}
			// Once the directory takes the write, the router's own lease.
			rec.mu.Lock()
			rec.refuse = false
			rec.mu.Unlock()
			c.sleepTo(3 * time.Second)
			s = c.net.sent("n1")
			if v, _ := rec.get(); v != 3*time.Second || s[len(s)-1].g.MS != 3000 {
				t.Fatalf("record %v, last grant %+v", v, s[len(s)-1].g)
			}
		})
	})
}

func TestLeaserConfig(t *testing.T) {
	tr := newFakeNet(NewMonoClock())
	fo := func(context.Context, string) {}
	bad := []LeaserConfig{
		{Lease: time.Second, Transport: tr, Failover: fo},
		{Router: "r", Transport: tr, Failover: fo},
		{Router: "r", Lease: time.Second, Failover: fo},
		{Router: "r", Lease: time.Second, Transport: tr},
	}
	for i, cfg := range bad {
		if _, err := NewLeaser(cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("case %d: %v, want ErrBadConfig", i, err)
		}
	}
	l, err := NewLeaser(LeaserConfig{Router: "r", Lease: time.Second, Transport: tr, Failover: fo})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(t.Context()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close: %v", err)
	}
}

func TestLeaserDeposed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3*time.Second, nil, "n1")
		var mu sync.Mutex
		var deposed []uint64
		c.l.cfg.Deposed = func(_ context.Context, node string, highest uint64) {
			mu.Lock()
			defer mu.Unlock()
			deposed = append(deposed, highest)
		}
		// A router promoted over this one reached the node first.
		if _, err := c.net.lease["n1"].Handle(0, grantOf("r2", 2, 1, 0, 3000, []string{"t-n1"}, nil)); err != nil {
			t.Fatal(err)
		}
		if err := c.l.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		c.sleepTo(time.Minute)
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(deposed, []uint64{2}) {
			t.Fatalf("deposed calls %v, want one naming term 2", deposed)
		}
		if f := c.fo.list(); len(f) != 0 {
			t.Fatalf("a fenced router failed the node over: %+v", f)
		}
	})
}

func TestLeaserCloseEndsFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := NewMonoClock()
		net := newFakeNet(clock, "n1")
		net.setMode("n1", down)
		started := make(chan struct{})
		l, err := NewLeaser(LeaserConfig{
			Router: "r", Term: 1, Lease: 3 * time.Second, Transport: net, Clock: clock,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Failover: func(ctx context.Context, node string) {
				close(started)
				<-ctx.Done() // a failover still promoting when the router stops
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		l.SetTenants("n1", nil)
		if err := l.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		<-started
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if err := l.Start(t.Context()); !errors.Is(err, ErrClosed) {
			t.Fatalf("Start after Close: %v", err)
		}
	})
}

// errRecord is a record that cannot be read.
type errRecord struct{ fakeRecord }

func (*errRecord) Get(context.Context) (time.Duration, error) {
	return 0, errors.New("directory unreachable")
}

func TestLeaserStartWithoutRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3*time.Second, &errRecord{}, "n1")
		if err := c.l.Start(t.Context()); err == nil {
			t.Fatal("started with a record it could not read")
		}
		synctest.Wait()
		if len(c.net.sent("n1")) != 0 {
			t.Fatal("granted without knowing the record")
		}
		c.l.cfg.Record = &fakeRecord{value: 3 * time.Second}
		if err := c.l.Start(t.Context()); err != nil {
			t.Fatalf("second Start: %v", err)
		}
		synctest.Wait()
		if !c.net.writable("n1", "t-n1") {
			t.Fatal("not leasing after the second Start")
		}
	})
}

// reportingNet is a fakeNet whose node n1, while its list has tenant t's
// copy in step, asks in every answer that it be recorded behind at seq 7.
type reportingNet struct {
	*fakeNet
	asking bool // guarded by fakeNet.mu
}

func (r *reportingNet) Send(ctx context.Context, node string, g Grant) (Answer, error) {
	a, err := r.fakeNet.Send(ctx, node, g)
	r.mu.Lock()
	asking, l := r.asking, r.lease[node]
	r.mu.Unlock()
	if l.Step("t").InStep && err == nil && asking {
		a.Behind = map[string]uint64{"t": 7}
	}
	return a, err
}

// A list's copies' steps go to the node with it (a change of step alone
// is a new list), and what an answer asks recorded reaches Reports, one
// call at a time, until the list shows it.
func TestLeaserCopiesStepsAndReports(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := NewMonoClock()
		net := &reportingNet{fakeNet: newFakeNet(clock, "n1")}
		var l *Leaser
		var mu sync.Mutex
		var calls []map[string]uint64
		l, err := NewLeaser(LeaserConfig{
			Router: "r", Term: 1, Lease: 3 * time.Second, Transport: net,
			Failover: func(context.Context, string) {}, Clock: clock,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Reports: func(_ context.Context, node string, behind map[string]uint64, caught []string) {
				mu.Lock()
				calls = append(calls, behind)
				mu.Unlock()
				time.Sleep(2 * time.Second) // the directory's write, slow: answers meanwhile call nothing
				l.SetList(node, List{Tenants: []string{"t"}, Behind: behind})
				l.GrantNow(node)
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		l.SetList("n1", List{Tenants: []string{"t"}, InStep: []string{"t"}})
		if err := l.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		node := net.lease["n1"]
		if st := node.Step("t"); !st.InStep || st.Behind {
			t.Fatalf("first list: %+v", st)
		}
		net.mu.Lock()
		net.asking = true
		net.mu.Unlock()
		time.Sleep(5 * time.Second) // answers at 1 s, 2 s, 3 s, 4 s ask
		synctest.Wait()
		if st := node.Step("t"); st.InStep || !st.Behind || st.At != 7 {
			t.Fatalf("after the report: %+v", st)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(calls) != 1 || calls[0]["t"] != 7 {
			t.Fatalf("Reports called %v, want once with t at 7", calls)
		}
		carried := 0
		for _, x := range net.sent("n1") {
			if x.g.Tenants != nil && x.g.Behind["t"] == 7 && len(x.g.InStep) == 0 && x.a.Took {
				carried++
			}
		}
		if carried != 1 {
			t.Fatalf("%d grants took the list with t behind, want 1", carried)
		}
	})
}

// A list id covers the copies' steps; ListID is a list with none.
func TestListIDCoversSteps(t *testing.T) {
	plain := List{Tenants: []string{"b", "a"}}
	if plain.ID() != ListID([]string{"a", "b"}) {
		t.Fatal("a list with no steps is not ListID's")
	}
	in := List{Tenants: []string{"a", "b"}, InStep: []string{"a"}}
	behind := List{Tenants: []string{"a", "b"}, Behind: map[string]uint64{"a": 3}}
	later := List{Tenants: []string{"a", "b"}, Behind: map[string]uint64{"a": 4}}
	named := List{Tenants: []string{"a", "b"}, InStep: []string{"a"}, Replicas: map[string]string{"a": "n2"}}
	other := List{Tenants: []string{"a", "b"}, InStep: []string{"a"}, Replicas: map[string]string{"a": "n3"}}
	if in.ID() == plain.ID() || behind.ID() == plain.ID() || in.ID() == behind.ID() || later.ID() == behind.ID() ||
		named.ID() == in.ID() || named.ID() == other.ID() {
		t.Fatal("steps do not change the id")
	}
	g := Grant{Router: "r", N: 2, Ack: 1, MS: 1000, Tenants: in.Tenants, InStep: in.InStep, List: in.ID()}
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	g.List = plain.ID()
	if err := g.Validate(); !errors.Is(err, ErrBadGrant) {
		t.Fatalf("a grant whose id leaves out its steps: %v", err)
	}
	g = Grant{Router: "r", N: 2, Ack: 1, MS: 1000, InStep: []string{"a"}, List: in.ID()}
	if err := g.Validate(); !errors.Is(err, ErrBadGrant) {
		t.Fatalf("steps without a list: %v", err)
	}
}
