package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"
)

// maxAtOnce bounds how many grants in a row a node is sent at once (after
// took=false, a 412 or an answer holding no lease) before the next waits
// for its round: a node that keeps asking cannot spin its goroutine.
const maxAtOnce = 3

// Transport carries a grant to a node: the router implements it over HTTP
// (POST /_admin/lease). Send must return once ctx is done, and its bound
// covers resolving the node's name and connecting as well as the call. A
// refusal comes back as the error DecodeReply gives for it.
type Transport interface {
	Send(ctx context.Context, node string, g Grant) (Answer, error)
}

// LeaserConfig configures a Leaser.
type LeaserConfig struct {
	// Router names this incarnation of the leading router (see
	// Grant.Router): it must differ from any earlier incarnation's.
	Router string
	// Term is the directory's term the router leads at.
	Term uint64
	// Dir names the router's directory in every grant (Grant.Dir).
	Dir string
	// Lease is the router's own lease (--auto-failover).
	Lease time.Duration
	// Transport sends grants.
	Transport Transport
	// Record is the directory's longest-lease record; nil: there is none,
	// and the router counts by its own lease.
	Record RecordStore
	// Failover is called, on a goroutine of its own, once for each time a
	// node lapses (again only after the node answered in between). ctx
	// ends when the Leaser closes. Before it is called the node's list is
	// emptied, so no grant from then on names any of its tenants, however
	// soon the node answers again: a tenant the failover leaves on the node
	// (one it could not promote) is put back with SetTenants and GrantNow.
	Failover func(ctx context.Context, node string)
	// Deposed, if set, is called (on a goroutine of its own) the first time
	// a node refuses this router's term because it took a higher one.
	//
	// Close waits for Failover, Deposed and Elsewhere calls to return, so
	// none may call Close itself: signal the Leaser's owner instead.
	Deposed func(ctx context.Context, node string, highest uint64)
	// Elsewhere, if set, is called (on a goroutine of its own) the first
	// time a node refuses this router's grants because another directory
	// leases it, or for an epoch past its bound (again only after the node
	// took a grant in between, or its terms changed). The router is not
	// deposed, and nothing else changes for the node's region: the node is
	// not granted again at once, and is counted as a node that does not
	// answer (it lapses and is failed over as one). Who leases a region
	// changes only by a handoff the routers write, never by one node's
	// word.
	Elsewhere func(ctx context.Context, node string, refusal *DirectoryError)
	// Reports, if set, is called (on a goroutine of its own, one per node
	// at a time) with what a node's answer asks recorded: copies behind
	// (tenant: seq) and copies caught up. The node repeats them in every
	// answer until its list shows them, so a call that fails is made again
	// with a later answer.
	Reports func(ctx context.Context, node string, behind map[string]uint64, caught []string)
	// Confirmed, if set, is the latest moment on Clock at which the router
	// began a read of its directory (a linearizable one, answered by a
	// quorum) that showed it still leading at Term; false while no such
	// read has come back. Every grant's lease is then cut to end no later
	// than that moment and the lease (a node runs its lease from its
	// answer to an earlier grant, sent after the read began), and no
	// grant is sent once the lease has run out from it. So a router cut
	// off from its directory's quorum stops extending leases one lease
	// after the last read that could have shown its term: a router
	// promoted over it, which counts every node by the longest lease and
	// a tenth from its own first round, fails no node over while one of
	// its leases may run. Nil: grants carry the whole lease.
	Confirmed func() (time.Duration, bool)
	// Metrics, if set, counts the grants and reports the nodes' leases
	// while this Leaser runs.
	Metrics *Metrics
	// Clock is the router's monotonic clock; nil: NewMonoClock().
	Clock Clock
	// Logger; nil: slog.Default().
	Logger *slog.Logger
}

// Validate checks the configuration.
func (c LeaserConfig) Validate() error {
	switch {
	case c.Router == "":
		return fmt.Errorf("%w: no router id", ErrBadConfig)
	case c.Lease < 3*time.Millisecond:
		return fmt.Errorf("%w: lease %v too short", ErrBadConfig, c.Lease)
	case c.Transport == nil:
		return fmt.Errorf("%w: no transport", ErrBadConfig)
	case c.Failover == nil:
		return fmt.Errorf("%w: no failover callback", ErrBadConfig)
	}
	return nil
}

// NodeStatus is one node's lease as the router sees it (GET
// /_shard/leases).
type NodeStatus struct {
	Node         string `json:"node"`
	LastAnswerMS int64  `json:"last_answer_ms"` // age of the last answer (of the first round before one came back)
	Answered     bool   `json:"answered"`       // an answer has come back
	LeaseMS      int64  `json:"lease_ms"`       // the lease the node is counted by
	GrantMS      int64  `json:"grant_ms"`       // the lease granted
	LeftMS       int64  `json:"left_ms"`        // what the node said was left
	Ran          bool   `json:"ran"`
	FailedOver   bool   `json:"failed_over"`
	TakesLease   bool   `json:"takes_lease"`
	Outstanding  int    `json:"outstanding"`
	Tenants      int    `json:"tenants"`
	Epoch        uint64 `json:"epoch"`               // the node's region's leasing epoch granted at
	Handoff      bool   `json:"handoff,omitempty"`   // grants carry a handoff from another directory
	LeasedBy     string `json:"leased_by,omitempty"` // the directory the node said leases it, refusing ours
}

// Leaser leases every node it is told of: one goroutine per node sends its
// grants (at start, every third of the lease, and at once when the node
// needs one), judges its lapse without waiting for any other node, and
// calls Failover for a node that lapsed.
type Leaser struct {
	cfg   LeaserConfig
	clock Clock
	log   *slog.Logger
	wg    sync.WaitGroup // every goroutine the Leaser starts

	mu      sync.Mutex
	ctx     context.Context      // guarded by mu: set by Start, ends at Close
	cancel  context.CancelFunc   // guarded by mu
	started bool                 // guarded by mu
	closed  bool                 // guarded by mu
	keeping bool                 // guarded by mu: keepRecord runs
	plan    recordPlan           // guarded by mu
	nodes   map[string]*nodeRun  // guarded by mu
	pending map[string]List      // guarded by mu: lists set before Start
	terms   map[string]NodeTerms // guarded by mu: terms of nodes, applied as they are added
	nextN   map[string]uint64    // guarded by mu: the next number of nodes no longer leased
}

// nodeRun is one node's leasing goroutine and its state.
type nodeRun struct {
	tracker    *Tracker // guarded by Leaser.mu
	failedOver bool     // guarded by Leaser.mu: Failover called since the last answer
	deposed    bool     // guarded by Leaser.mu: Deposed called
	elsewhere  bool     // guarded by Leaser.mu: Elsewhere called since the node last took a grant
	reporting  bool     // guarded by Leaser.mu: a Reports call runs
	wake       chan struct{}
	cancel     context.CancelFunc
	done       chan struct{}
}

// NewLeaser returns a Leaser; it leases nothing until Start.
func NewLeaser(cfg LeaserConfig) (*Leaser, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &Leaser{
		cfg:     cfg,
		clock:   cfg.Clock,
		log:     cfg.Logger,
		nodes:   map[string]*nodeRun{},
		pending: map[string]List{},
		terms:   map[string]NodeTerms{},
		nextN:   map[string]uint64{},
	}
	if l.clock == nil {
		l.clock = NewMonoClock()
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	return l, nil
}

// Start reads the longest-lease record (raising it to the router's own
// lease before any grant, when that is longer) and starts leasing every
// node set so far, counting each as granted now. Leasing stops when ctx
// ends or at Close.
func (l *Leaser) Start(ctx context.Context) error {
	l.mu.Lock()
	switch {
	case l.closed:
		l.mu.Unlock()
		return ErrClosed
	case l.started:
		l.mu.Unlock()
		return ErrStarted
	}
	l.started = true
	l.mu.Unlock()

	plan, err := l.readRecord(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.started = false // the caller may try again
		return err
	}
	if l.closed {
		return ErrClosed
	}
	l.ctx, l.cancel = context.WithCancel(ctx)
	l.plan = plan
	for node, list := range l.pending {
		l.addLocked(node, list)
	}
	l.pending = nil
	if plan.needRaise || plan.lowerAt > 0 {
		l.keeping = true
		l.wg.Go(l.keepRecord)
	}
	l.cfg.Metrics.attach(l)
	l.log.Info("leasing nodes", "router", l.cfg.Router, "term", l.cfg.Term, "nodes", len(l.nodes),
		"lease", plan.leases.Own, "record", plan.leases.Record, "grant", plan.leases.Grant)
	return nil
}

// SetTenants sets the list node's lease should name, adding the node (and
// starting its leasing, counted as granted now) if it is new. The list goes
// with the node's next grant; call GrantNow to send it at once.
func (l *Leaser) SetTenants(node string, tenants []string) {
	l.SetList(node, List{Tenants: tenants})
}

// SetList is SetTenants with the copies' steps.
func (l *Leaser) SetList(node string, list List) {
	list = List{Tenants: slices.Clone(list.Tenants), InStep: slices.Clone(list.InStep),
		Behind: maps.Clone(list.Behind), Replicas: maps.Clone(list.Replicas)}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
	case !l.started || l.ctx == nil:
		l.pending[node] = list
	case l.nodes[node] != nil:
		l.nodes[node].tracker.SetList(list)
	default:
		l.addLocked(node, list)
	}
}

// addLocked starts leasing node.
func (l *Leaser) addLocked(node string, list List) {
	now := l.clock.Now()
	t := NewTracker(node, l.cfg.Router, l.cfg.Term, l.plan.leases, now)
	t.SetDir(l.cfg.Dir)
	t.SetStart(l.nextN[node])
	t.SetTerms(l.terms[node], now)
	t.SetList(list)
	ctx, cancel := context.WithCancel(l.ctx)
	nr := &nodeRun{tracker: t, wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	l.nodes[node] = nr
	l.wg.Go(func() { l.runNode(ctx, node, nr) })
}

// SetTerms sets node's epoch, handoff and counting (NodeTerms): at once
// if it is leased and they changed, else as it is added. A node added
// under a Floor or MustRun is counted from the moment it is added.
func (l *Leaser) SetTerms(node string, nt NodeTerms) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if old, ok := l.terms[node]; ok && sameTerms(old, nt) {
		return
	}
	l.terms[node] = nt
	if nr := l.nodes[node]; nr != nil {
		nr.tracker.SetTerms(nt, l.clock.Now())
		nr.elsewhere = false
	}
}

func sameTerms(a, b NodeTerms) bool {
	if (a.Handoff == nil) != (b.Handoff == nil) || a.Handoff != nil && *a.Handoff != *b.Handoff {
		return false
	}
	return a.Epoch == b.Epoch && a.Floor == b.Floor && a.MustRun == b.MustRun
}

// ExtendRecord counts on a lease of up to d having been granted just now
// to nodes this router is about to lease (the giver's record, at a
// handoff): nodes that have not run one of this router's leases are
// counted by it, and the record is not lowered before d and a tenth have
// passed. The caller has raised the directory's record to d already. Call
// it once Start returned.
func (l *Leaser) ExtendRecord(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.started || l.ctx == nil || l.closed {
		return
	}
	p := l.plan
	if d <= p.leases.Own {
		return // every node is counted by at least the router's own lease
	}
	p.leases.Record = max(p.leases.Record, d)
	p.lowerAt = max(p.lowerAt, l.clock.Now()+d+d/10)
	l.plan = p
	for _, nr := range l.nodes {
		nr.tracker.SetLeases(p.leases)
	}
	if p.lowerAt > 0 && !l.keeping {
		l.keeping = true
		l.wg.Go(l.keepRecord)
	}
}

// RemoveNode stops leasing node (it was forgotten by the directory, or is
// leased elsewhere now) and waits for its goroutine to end. Its grants'
// numbers go on where they stopped if it is leased again.
func (l *Leaser) RemoveNode(node string) {
	l.mu.Lock()
	delete(l.pending, node)
	delete(l.terms, node)
	nr := l.nodes[node]
	delete(l.nodes, node)
	l.mu.Unlock()
	if nr != nil {
		nr.cancel()
		<-nr.done
		l.mu.Lock()
		l.nextN[node] = nr.tracker.NextN()
		l.mu.Unlock()
	}
}

// Doubt has the Leaser disbelieve node's word that it took a higher term
// (Tracker.Doubt): the router's directory shows this router's term
// standing. The node is counted as one refusing for another binding from
// then on, and Elsewhere is called for it.
func (l *Leaser) Doubt(node string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	nr := l.nodes[node]
	if nr == nil || l.ctx == nil {
		return
	}
	nr.tracker.Doubt()
	l.log.Warn("node says it took a higher term than the directory's: not believed; counted as not answering", "node", node, "term", l.cfg.Term)
	l.refusedLocked(node, nr, nil, true)
}

// Leases says whether node is leased (set and not removed).
func (l *Leaser) Leases(node string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.nodes[node]
	_, pending := l.pending[node]
	return ok || pending
}

// GrantNow has node sent a grant at once (after the call in flight to it,
// if any): a create's or move's node gets its new list, a failover's
// receiving node its new tenants.
func (l *Leaser) GrantNow(node string) {
	l.mu.Lock()
	nr := l.nodes[node]
	l.mu.Unlock()
	if nr == nil {
		return
	}
	select {
	case nr.wake <- struct{}{}:
	default:
	}
}

// Nodes reports every node's lease, by name.
func (l *Leaser) Nodes() []NodeStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	out := make([]NodeStatus, 0, len(l.nodes))
	for _, name := range slices.Sorted(maps.Keys(l.nodes)) {
		nr := l.nodes[name]
		t := nr.tracker
		out = append(out, NodeStatus{
			Node:         name,
			LastAnswerMS: (now - t.LastAnswer()).Milliseconds(),
			Answered:     t.answeredAny,
			LeaseMS:      t.Counted().Milliseconds(),
			GrantMS:      t.Leases().Grant.Milliseconds(),
			LeftMS:       t.LeftMS(),
			Ran:          t.Ran(),
			FailedOver:   nr.failedOver,
			TakesLease:   t.TakesLease(),
			Outstanding:  t.Outstanding(),
			Tenants:      len(t.list),
			Epoch:        t.terms.Epoch,
			Handoff:      t.terms.Handoff != nil,
			LeasedBy:     leasedBy(t.Elsewhere()),
		})
	}
	return out
}

func leasedBy(e *DirectoryError) string {
	if e == nil {
		return ""
	}
	return e.Dir
}

// Close stops leasing and waits for every goroutine the Leaser started,
// Failover and Deposed calls included. Safe to call more than once.
func (l *Leaser) Close() error {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		if l.cancel != nil {
			l.cancel()
		}
	}
	l.mu.Unlock()
	l.cfg.Metrics.detach(l)
	l.wg.Wait()
	return nil
}

// runNode is one node's leasing loop: a grant, then at once again if the
// node needs one, else wait for the round (judging the lapse meanwhile).
func (l *Leaser) runNode(ctx context.Context, node string, nr *nodeRun) {
	defer close(nr.done)
	atOnce := 0
	for ctx.Err() == nil {
		again, unconfirmed := l.grant(ctx, node, nr)
		if unconfirmed {
			if !l.waitConfirmed(ctx, nr) {
				return
			}
			continue
		}
		if again && atOnce < maxAtOnce {
			atOnce++
			continue
		}
		atOnce = 0
		if !l.waitRound(ctx, node, nr) {
			return
		}
	}
}

// grant sends node one grant bounded by a third of the lease, counts what
// came of it, and says whether the node needs the next one at once.
// Unconfirmed: no grant was sent, the router's lead not confirmed
// recently enough to grant any lease (LeaserConfig.Confirmed).
func (l *Leaser) grant(ctx context.Context, node string, nr *nodeRun) (again, unconfirmed bool) {
	l.mu.Lock()
	sent := l.clock.Now()
	l.judgeLocked(ctx, node, nr, sent)
	left, ok := l.confirmedLeft(nr.tracker.LastAnswer(), nr.tracker.Leases().Grant)
	if !ok {
		l.mu.Unlock()
		return false, true
	}
	g := nr.tracker.Next(sent)
	g.MS = min(g.MS, max(left.Milliseconds(), 1))
	bound := nr.tracker.Leases().Grant / 3
	l.mu.Unlock()

	cctx, cancel := context.WithTimeout(ctx, bound)
	a, err := l.cfg.Transport.Send(cctx, node, g)
	cancel()

	l.mu.Lock()
	defer l.mu.Unlock()
	back := l.clock.Now()
	t := nr.tracker
	l.cfg.Metrics.grant(back-sent <= bound, a, err)
	switch {
	case err == nil && back-sent <= bound:
		t.Answered(back, g, a)
		nr.failedOver, nr.elsewhere = false, false
		if g.List == t.listID {
			// An answer to a list since replaced asks what the new
			// list may already show: the next answer asks again.
			l.reportLocked(node, nr, a)
		}
	case err == nil:
		t.GaveUp(g) // came back, but after the router stopped waiting
	case errors.Is(err, ErrNeedsList), errors.Is(err, ErrTakesNoLease), errors.Is(err, ErrLowerTerm), errors.Is(err, ErrOtherDirectory), errors.Is(err, ErrEpochBound),
		errors.Is(err, ErrBadGrant) && !t.Legacy() && fromBeforeDirectories(err):
		wasLeasing := t.TakesLease()
		t.Refused(g, err)
		l.refusedLocked(node, nr, err, wasLeasing)
	default:
		t.GaveUp(g)
		l.log.Debug("grant not answered", "node", node, "n", g.N, "err", err)
	}
	l.judgeLocked(ctx, node, nr, back)
	return t.NeedsGrantNow(), false
}

// reportLocked hands what an answer asks recorded to Reports, unless a
// call for the node still runs (the node asks again in its next answer).
func (l *Leaser) reportLocked(node string, nr *nodeRun, a Answer) {
	if l.cfg.Reports == nil || nr.reporting || (len(a.Behind) == 0 && len(a.Caught) == 0) {
		return
	}
	nr.reporting = true
	ctx := l.ctx
	l.wg.Go(func() {
		defer func() {
			l.mu.Lock()
			nr.reporting = false
			l.mu.Unlock()
		}()
		l.cfg.Reports(ctx, node, a.Behind, a.Caught)
	})
}

// refusedLocked logs a refusal and reports a fenced router, or a node
// another directory leases.
func (l *Leaser) refusedLocked(node string, nr *nodeRun, err error, wasLeasing bool) {
	if errors.Is(err, ErrTakesNoLease) && wasLeasing {
		l.log.Info("node takes no lease: never failed over automatically", "node", node)
	}
	if errors.Is(err, ErrBadGrant) && nr.tracker.Legacy() {
		l.log.Warn("node is from before directories: leased with grants that name none; upgrade it before its region's leasing is handed over",
			"node", node)
	}
	if de := nr.tracker.Elsewhere(); de != nil && !nr.elsewhere {
		nr.elsewhere = true
		l.log.Warn("node refuses our grants for another binding: counted as not answering, failed over once it lapses", "node", node,
			"leased_by", de.Dir, "epoch", de.Epoch, "dir", l.cfg.Dir, "our_epoch", nr.tracker.Terms().Epoch)
		if l.cfg.Elsewhere != nil {
			ctx := l.ctx
			l.wg.Go(func() { l.cfg.Elsewhere(ctx, node, de) })
		}
	}
	fenced, highest := nr.tracker.Fenced()
	if !fenced || nr.deposed {
		return
	}
	nr.deposed = true
	l.log.Warn("node took a higher term: this router is deposed", "node", node, "term", l.cfg.Term, "highest", highest)
	if l.cfg.Deposed != nil {
		ctx := l.ctx
		l.wg.Go(func() { l.cfg.Deposed(ctx, node, highest) })
	}
}

// judgeLocked calls Failover, once, for a node that lapsed at now.
func (l *Leaser) judgeLocked(ctx context.Context, node string, nr *nodeRun, now time.Duration) {
	if ctx.Err() != nil || nr.failedOver || !nr.tracker.Lapsed(now) {
		return
	}
	nr.failedOver = true
	t := nr.tracker
	t.SetTenants(nil)
	l.log.Warn("node lapsed: failing it over", "node", node,
		"since_answer", now-t.LastAnswer(), "lease", t.Leases().Counted(t.Ran()), "ran", t.Ran())
	lctx := l.ctx
	l.wg.Go(func() { l.cfg.Failover(lctx, node) })
}

// waitRound waits until the node's next round (a third of the granted
// lease after its last grant) or GrantNow, judging its lapse when it falls
// due meanwhile. False when ctx ended.
func (l *Leaser) waitRound(ctx context.Context, node string, nr *nodeRun) bool {
	for {
		l.mu.Lock()
		now := l.clock.Now()
		l.judgeLocked(ctx, node, nr, now)
		t := nr.tracker
		sent, _ := t.LastSent()
		renewAt := sent + t.Leases().Grant/3
		wakeAt := renewAt
		if la := t.LapseAt(); !nr.failedOver && t.TakesLease() && la > now && la < wakeAt {
			wakeAt = la
		}
		l.mu.Unlock()
		if now >= renewAt {
			return true
		}
		timer := time.NewTimer(wakeAt - now)
		select {
		case <-ctx.Done():
			timer.Stop()
			return false
		case <-nr.wake:
			timer.Stop()
			return true
		case <-timer.C:
		}
	}
}
