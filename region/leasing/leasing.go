package leasing

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/lease"
)

// Lead is what the leasing asks of the router's lead.
type Lead interface {
	// Status says whether this router leads, and at which term.
	Status() (leading bool, term uint64)
	// Changes returns the store fenced on the term, or why not.
	Changes(ctx context.Context) (*global.Store, error)
	// StepDown ends the lead at once: a node took a higher term.
	StepDown(highest uint64)
	// Lost is told of a fenced write that failed.
	Lost(ctx context.Context, err error)
}

// Deps are everything the leasing uses of the router.
type Deps struct {
	// ID is the router's name, the start of each Leaser's name.
	ID string
	// Own is the router's lease (--auto-failover); 0: it grants nothing.
	Own time.Duration
	// Dir names the router's directory in its grants (global.DirGlobal, or
	// global.DirOfRegion(region) on a region's router).
	Dir string
	// Region is the region a region's router serves ("" on the global
	// tier's): it leases that region's nodes only, and only while its
	// directory says the region leases them.
	Region string
	// Elsewhere is told (on a goroutine of the leasing's) that a node of
	// region refused this router's grants for another binding; the
	// leasing counts that node as not answering, and no other.
	Elsewhere func(ctx context.Context, node, region string, refusal *lease.DirectoryError)
	// View is the router's copy of its directory (nil before it arrived).
	View func() *global.View
	// Lead is the router's lead.
	Lead Lead
	// Transport carries grants to nodes; Probe asks a node whether it
	// takes leases (true on 200, false on its 409).
	Transport lease.Transport
	Probe     func(ctx context.Context, n global.Node) (bool, error)
	// Failover fails a node over (the router's FailoverNode).
	Failover func(ctx context.Context, node string, force bool) FailoverResult
	// Settle waits (bounded) until the view holds revision rev.
	Settle func(ctx context.Context, rev int64)
	// OwnNode guards a store on node's region record, or refuses when
	// this router's side does not own the region (the router's owner.go);
	// nil: no guard.
	OwnNode func(ctx context.Context, s *global.Store, node string) (*global.Store, error)
	// Clock is the router's monotonic clock: every moment the leasing
	// decides by is read from it.
	Clock lease.Clock
	// Now is the wall clock a node's lapse is recorded at
	// (global.Node.Lapsed), never decided by; nil: time.Now.
	Now func() time.Time
	Log *slog.Logger
}

// Leasing grants, while this router leads, every node recorded with
// lease:true the list of tenants the directory places there (a
// lease.Leaser), and fails a lapsed node over. It follows the lead (a
// promotion starts a new Leaser at the new term; losing the lead, or a
// node fencing this router's term, stops it) and the directory (every
// change sets the nodes' lists; a node that gained a tenant is granted at
// once). It also serves the forwarder's LeaseRetry on every router,
// leading or not.
type Leasing struct {
	deps Deps
	log  *slog.Logger

	wake    chan struct{}   // the directory changed, or a failover ended
	deposed chan uint64     // a node took a higher term than ours
	answers *answerNotifier // grants answered, per node
	tr      lease.Transport // deps.Transport, telling answers

	failovers *prometheus.CounterVec
	metrics   *lease.Metrics // grants by outcome, each node's lease left

	// ctx bounds every goroutine the leasing starts (set by Start, ended
	// by Close); wg waits for them.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// syncMu makes sync calls whole, one at a time; lock order: syncMu,
	// then mu.
	syncMu sync.Mutex

	mu        sync.Mutex
	leaser    *lease.Leaser         // guarded by mu: nil when not leasing
	unconfirm context.CancelFunc    // guarded by mu: ends the running Leaser's confirmLoop
	term      uint64                // guarded by mu: the term leaser grants at
	lists     map[string]lease.List // guarded by mu: the list each leased node was last set
	failing   map[string]bool       // guarded by mu: nodes whose failover runs now
	clearing  map[string]bool       // guarded by mu: nodes whose lapse is being cleared
	settled   map[string]bool       // guarded by mu: nodes whose last failover ended (lists go back)
	held      map[string]heldWait   // guarded by mu: tenants waiting, off their node's list, for a held failover
	probes    map[string]probe      // guarded by mu: what a node's lease probe said
	scope     scopeState            // guarded by mu: regions given, a forced takeover settled
	// lastRev and lastFO are the view's revision and the nodes' failed-over
	// marks the lists were last set from; dirty asks for them to be set
	// again all the same. Guarded by mu.
	lastRev int64
	lastFO  map[string]bool
	dirty   bool
}

// New returns the leasing over deps, not started: it serves the
// forwarder's LeaseRetry at once, and leases nodes once started.
func New(deps Deps) *Leasing {
	if deps.Clock == nil {
		deps.Clock = lease.NewMonoClock()
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Log == nil {
		deps.Log = slog.New(slog.DiscardHandler)
	}
	l := &Leasing{
		deps:    deps,
		log:     deps.Log,
		wake:    make(chan struct{}, 1),
		deposed: make(chan uint64, 1),
		answers: newAnswerNotifier(),
		failovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_router_auto_failovers_total",
			Help: "Nodes this router failed over on a lapsed lease, by outcome.",
		}, []string{"outcome"}),
		metrics:  lease.NewMetrics(),
		lists:    map[string]lease.List{},
		failing:  map[string]bool{},
		clearing: map[string]bool{},
		settled:  map[string]bool{},
		held:     map[string]heldWait{},
		probes:   map[string]probe{},
		scope:    scopeState{giving: map[string]bool{}},
	}
	l.tr = &notifyingTransport{tr: deps.Transport, n: l.answers}
	for _, o := range []string{AutoFailoverDone, AutoFailoverPartial, AutoFailoverFailed} {
		l.failovers.WithLabelValues(o)
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.cancel() // not started: nothing runs until Start
	return l
}

// Register adds the leasing's series to reg.
func (l *Leasing) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{l.failovers, &leaseAgeCollector{l: l}, l.metrics} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Start runs the leasing until ctx ends or Close: its one long-lived
// goroutine, and every probe and failover it starts, are the leasing's.
func (l *Leasing) Start(ctx context.Context) {
	l.mu.Lock()
	l.ctx, l.cancel = context.WithCancel(ctx)
	run := l.ctx
	l.mu.Unlock()
	l.wg.Go(func() { l.run(run) })
}

// Close stops the leasing and waits for every goroutine it started. Safe
// to call twice, and without Start.
func (l *Leasing) Close() {
	l.mu.Lock()
	cancel := l.cancel
	l.mu.Unlock()
	cancel()
	l.wg.Wait()
	l.stop()
}

// goCtx runs fn on a goroutine the leasing owns, with its context.
func (l *Leasing) goCtx(fn func(ctx context.Context)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.goCtxLocked(fn)
}

// goCtxLocked is goCtx with l.mu held.
func (l *Leasing) goCtxLocked(fn func(ctx context.Context)) {
	ctx := l.ctx
	if ctx.Err() != nil {
		return
	}
	l.wg.Go(func() { fn(ctx) })
}

// Tick is how often the leasing looks at the lead and the directory
// between changes it is told of.
func (l *Leasing) Tick() time.Duration {
	return min(100*time.Millisecond, max(l.deps.Own/10, 10*time.Millisecond))
}

// run follows the lead and the directory until ctx ends, then stops
// leasing.
func (l *Leasing) run(ctx context.Context) {
	defer l.stop()
	t := time.NewTicker(l.Tick())
	defer t.Stop()
	for {
		l.step(ctx)
		select {
		case <-ctx.Done():
			return
		case highest := <-l.deposed:
			l.stop()
			l.deps.Lead.StepDown(highest)
		case <-l.wake:
		case <-t.C:
		}
	}
}

// Poke has the leasing look at the lead and the directory again at once
// (the directory changed: a tenant, a region's record).
func (l *Leasing) Poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// step starts or stops the Leaser as the lead says, and brings the nodes'
// lists in line with the directory.
func (l *Leasing) step(ctx context.Context) {
	leading, term := l.deps.Lead.Status()
	l.mu.Lock()
	cur, curTerm := l.leaser, l.term
	active := l.scopeLocked(l.deps.View()).active
	l.mu.Unlock()
	leading = leading && active
	switch {
	case !leading && cur != nil, leading && cur != nil && curTerm != term:
		l.stop()
		cur = nil
	}
	if leading && cur == nil {
		if err := l.begin(ctx, term); err != nil {
			l.log.Warn("leasing not started", "term", term, "err", err)
			return
		}
	}
	l.sync()
}

// termStands says whether this router's directory still shows term,
// the router's own, as its term, although a node said it took highest: no
// router of the directory ever held highest, so the node's word is forged
// (a stolen admin token, a compromised node) and deposes no one. A
// directory that cannot be read within the router's lease, or that moved
// its term on, stands for nothing: the router steps down, as before.
func (l *Leasing) termStands(ctx context.Context, term, highest uint64) bool {
	ctx, cancel := context.WithTimeout(ctx, max(l.deps.Own, time.Second))
	defer cancel()
	s, err := l.deps.Lead.Changes(ctx)
	if err != nil {
		return false
	}
	cur, err := s.Term(ctx)
	if err != nil || cur.Value != term || highest <= cur.Value {
		return false
	}
	l.log.Warn("a node says it took a higher term than its directory ever reached: not believed, counted as not answering",
		"node_term", highest, "directory_term", cur.Value)
	return true
}

// leaserName names one incarnation of this router's leasing: grants are
// numbered per name, so every Leaser needs one of its own.
func (l *Leasing) leaserName(term uint64) string {
	return l.deps.ID + "-" + strconv.FormatUint(term, 10) + "-" + strconv.FormatUint(rand.Uint64(), 36)
}

// begin starts leasing at term: a Leaser named for this incarnation, the
// lists as the directory has them, the directory's longest-lease record.
func (l *Leasing) begin(ctx context.Context, term uint64) error {
	s, err := l.deps.Lead.Changes(ctx)
	if err != nil {
		return err
	}
	conf := &confirmation{}
	if began := l.deps.Clock.Now(); l.confirm(ctx, term) {
		conf.set(began)
	}
	var lsr *lease.Leaser
	lsr, err = lease.NewLeaser(lease.LeaserConfig{
		Confirmed: conf.get,
		Router:    l.leaserName(term),
		Term:      term,
		Dir:       l.deps.Dir,
		Lease:     l.deps.Own,
		Transport: l.tr,
		Record:    global.LeaseRecordStore{S: s},
		Failover:  func(ctx context.Context, node string) { l.failover(ctx, lsr, node) },
		Metrics:   l.metrics,
		Reports:   l.reports,
		Deposed: func(ctx context.Context, node string, highest uint64) {
			if l.termStands(ctx, term, highest) {
				lsr.Doubt(node) // the node's word alone: it costs that node
				return
			}
			l.log.Warn("a node took a higher term: this router stops leasing and taking changes", "node", node, "highest", highest, "term", term)
			select {
			case l.deposed <- highest:
			default:
			}
		},
		Elsewhere: l.refusedElsewhere,
		Clock:     l.deps.Clock,
		Logger:    l.log,
	})
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.lists = map[string]lease.List{}
	l.settled = map[string]bool{}
	l.dirty = true
	v := l.deps.View()
	sc := l.scopeLocked(v)
	for node, list := range l.listsLocked(v, sc) {
		lsr.SetTerms(node, sc.terms[node])
		lsr.SetList(node, list)
		l.lists[node] = list
	}
	l.mu.Unlock()
	if err := lsr.Start(ctx); err != nil {
		_ = lsr.Close()
		return fmt.Errorf("start leasing: %w", err)
	}
	cctx, unconfirm := context.WithCancel(ctx)
	l.wg.Go(func() { l.confirmLoop(cctx, term, conf) })
	l.mu.Lock()
	l.leaser, l.term, l.unconfirm = lsr, term, unconfirm
	l.mu.Unlock()
	l.log.Info("leasing nodes", "term", term, "lease", l.deps.Own, "dir", l.deps.Dir)
	return nil
}

// stop stops the running Leaser, if any, and waits for it.
func (l *Leasing) stop() {
	l.mu.Lock()
	lsr, unconfirm := l.leaser, l.unconfirm
	l.leaser, l.term, l.unconfirm = nil, 0, nil
	if unconfirm != nil {
		unconfirm()
	}
	l.lists = map[string]lease.List{}
	l.dirty = true
	l.mu.Unlock()
	if lsr != nil {
		_ = lsr.Close()
		l.log.Info("leasing stopped")
	}
}

// running is the Leaser leasing now (nil when none).
func (l *Leasing) running() *lease.Leaser {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leaser
}

// notLeasedWait is how long GrantNow waits, for a node this router does
// not lease, before the forwarder asks the node again.
const notLeasedWait = 25 * time.Millisecond

// Leading is the forwarder's LeaseRetry: this router grants.
func (l *Leasing) Leading() bool { return l.running() != nil }

// GrantNow has node granted its list at once and waits (within ctx) for
// the next answer to come back from it.
func (l *Leasing) GrantNow(ctx context.Context, node string) error {
	lsr := l.running()
	if lsr == nil {
		return ErrNotLeader
	}
	// The list first: the forwarder may have seen the tenant there in the
	// view before this router's leasing did.
	l.sync()
	if !lsr.Leases(node) {
		// Another directory leases the node (its region leases its own):
		// its grant comes from there. A moment, and the forwarder asks
		// again.
		t := time.NewTimer(notLeasedWait)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("grant to %s: %w", node, ctx.Err())
		}
	}
	next := l.answers.next(node)
	lsr.GrantNow(node)
	select {
	case <-next:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("grant to %s: %w", node, ctx.Err())
	}
}

// Lease is the lease the directory's nodes run: this router's own, or
// the directory's longest-lease record where this router grants none.
func (l *Leasing) Lease() time.Duration {
	if l.deps.Own > 0 {
		return l.deps.Own
	}
	if v := l.deps.View(); v != nil {
		return time.Duration(v.LeaseRecordMS) * time.Millisecond
	}
	return 0
}

// Nodes reports the leases as GET /_shard/leases shows them: empty when
// this router is not leasing.
func (l *Leasing) Nodes() []lease.NodeStatus {
	lsr := l.running()
	if lsr == nil {
		return []lease.NodeStatus{}
	}
	return lsr.Nodes()
}

// Leases is the body of GET /_shard/leases.
type Leases struct {
	Leasing bool               `json:"leasing"`
	Term    uint64             `json:"term"`
	LeaseMS int64              `json:"lease_ms"`
	Nodes   []lease.NodeStatus `json:"nodes"`
}

// Leases is what GET /_shard/leases answers. A router that grants no
// lease answers the term of the directory's lead as it sees it, not a
// leasing term of 0.
func (l *Leasing) Leases() Leases {
	l.mu.Lock()
	leasing, term := l.leaser != nil, l.term
	l.mu.Unlock()
	ans := Leases{Leasing: leasing, Term: term, LeaseMS: l.deps.Own.Milliseconds(), Nodes: l.Nodes()}
	if v := l.deps.View(); !ans.Leasing && v != nil {
		ans.Term = v.Leader.Term
	}
	return ans
}

// ExtendRecord has the running Leaser, if any, count on a lease of up to
// d having been granted just now to the nodes it is about to lease (the
// giver's record, at a handoff taken; lease.Leaser.ExtendRecord). The
// caller has raised the directory's record to d already.
func (l *Leasing) ExtendRecord(d time.Duration) {
	if lsr := l.running(); lsr != nil {
		lsr.ExtendRecord(d)
	}
}
