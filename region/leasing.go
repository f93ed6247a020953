package region

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/lease"
)

// Outcomes of an automatic failover, the label of
// fenec_router_auto_failovers_total.
const (
	AutoFailoverDone    = "done"    // every tenant of the node was promoted
	AutoFailoverPartial = "partial" // some were, some were left on the node
	AutoFailoverFailed  = "failed"  // none of its tenants could be promoted
)

// probeRetry is how long a node whose lease probe went unanswered waits
// before it is asked again; noLeaseReprobe, one that said it takes none
// (it may be restarted with --lease at the same address).
const (
	probeRetry     = 2 * time.Second
	noLeaseReprobe = 30 * time.Second
)

// leasing is the router's side of --auto-failover: while this router
// leads, a lease.Leaser grants every node recorded with lease:true the
// list of tenants the directory places there, and fails a lapsed node
// over with FailoverNode. It follows the lead (a promotion starts a new
// Leaser at the new term; losing the lead, or a node fencing this router's
// term, stops it) and the directory (every change sets the nodes' lists;
// a node that gained a tenant is granted at once). It also serves the
// forwarder's LeaseRetry on every router, leading or not.
type leasing struct {
	rt  *Router
	own time.Duration // --auto-failover; 0: this router grants nothing
	log *slog.Logger
	tr  *leaseTransport

	wake    chan struct{}   // the directory changed, or a failover ended
	deposed chan uint64     // a node took a higher term than ours
	answers *answerNotifier // grants answered, per node

	failovers *prometheus.CounterVec
	metrics   *lease.Metrics // grants by outcome, each node's lease left

	mu      sync.Mutex
	leaser  *lease.Leaser         // guarded by mu: nil when not leasing
	term    uint64                // guarded by mu: the term leaser grants at
	lists   map[string]lease.List // guarded by mu: the list each leased node was last set
	failing map[string]bool       // guarded by mu: nodes whose failover runs now
	settled map[string]bool       // guarded by mu: nodes whose last failover ended (lists go back)
	held    map[string]heldWait   // guarded by mu: tenants waiting, off their node's list, for a held failover
	probes  map[string]probe      // guarded by mu: what a node's lease probe said
	// lastRev and lastFO are the view's revision and the nodes' failed-over
	// marks the lists were last set from; dirty asks for them to be set
	// again all the same. Guarded by mu.
	lastRev int64
	lastFO  map[string]bool
	dirty   bool
}

// heldWait is a tenant held by another operation when its node was failed
// over: its node's grants name it no more until it has been failed over
// (or moved, or deleted), or the failover's wait for it ended.
type heldWait struct {
	node  string
	until time.Time
}

// probe is what asking a node at addr whether it takes leases found.
type probe struct {
	addr    string
	decided bool      // its record was set lease:true
	none    bool      // the node said it takes no lease
	retryAt time.Time // not decided: ask again then
	running bool
}

func newLeasing(rt *Router, own time.Duration) *leasing {
	l := &leasing{
		rt:      rt,
		own:     own,
		log:     rt.log,
		wake:    make(chan struct{}, 1),
		deposed: make(chan uint64, 1),
		answers: newAnswerNotifier(),
		failovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_router_auto_failovers_total",
			Help: "Nodes this router failed over on a lapsed lease, by outcome.",
		}, []string{"outcome"}),
		metrics: lease.NewMetrics(),
		lists:   map[string]lease.List{},
		failing: map[string]bool{},
		settled: map[string]bool{},
		held:    map[string]heldWait{},
		probes:  map[string]probe{},
	}
	l.tr = newLeaseTransport(func(name string) (global.Node, bool) {
		v := rt.watcher.View()
		if v == nil {
			return global.Node{}, false
		}
		return v.Node(name)
	}, rt.cfg.Forward.Resolver)
	for _, o := range []string{AutoFailoverDone, AutoFailoverPartial, AutoFailoverFailed} {
		l.failovers.WithLabelValues(o)
	}
	return l
}

// register adds the leasing series to reg.
func (l *leasing) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{l.failovers, &leaseAgeCollector{l: l}, l.metrics} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// tick is how often the leasing looks at the lead and the directory
// between changes it is told of.
func (l *leasing) tick() time.Duration {
	return min(100*time.Millisecond, max(l.own/10, 10*time.Millisecond))
}

// run follows the lead and the directory until ctx ends, then stops
// leasing. It is the leasing's one long-lived goroutine.
func (l *leasing) run(ctx context.Context) {
	defer l.stop()
	defer l.tr.close()
	t := time.NewTicker(l.tick())
	defer t.Stop()
	for {
		l.step(ctx)
		select {
		case <-ctx.Done():
			return
		case highest := <-l.deposed:
			l.stop()
			l.rt.lead.stepDown(highest)
		case <-l.wake:
		case <-t.C:
		}
	}
}

// changed is told of every tenant change (on the watcher's goroutine).
func (l *leasing) changed(global.TenantChange) {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// step starts or stops the Leaser as the lead says, and brings the nodes'
// lists in line with the directory.
func (l *leasing) step(ctx context.Context) {
	leading, term := l.rt.lead.status()
	l.mu.Lock()
	cur, curTerm := l.leaser, l.term
	l.mu.Unlock()
	switch {
	case !leading && cur != nil, leading && cur != nil && curTerm != term:
		l.stop()
		cur = nil
	}
	if leading && cur == nil {
		if err := l.start(ctx, term); err != nil {
			l.log.Warn("leasing not started", "term", term, "err", err)
			return
		}
	}
	l.sync()
}

// start begins leasing at term: a Leaser named for this router, the term
// and the moment, the lists as the directory has them, the directory's
// longest-lease record.
func (l *leasing) start(ctx context.Context, term uint64) error {
	s, err := l.rt.lead.changes(ctx)
	if err != nil {
		return err
	}
	lsr, err := lease.NewLeaser(lease.LeaserConfig{
		Router:    l.rt.id + "-" + strconv.FormatUint(term, 10) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36),
		Term:      term,
		Lease:     l.own,
		Transport: &notifyingTransport{tr: l.tr, n: l.answers},
		Record:    global.LeaseRecordStore{S: s},
		Failover:  l.failover,
		Metrics:   l.metrics,
		Reports:   l.reports,
		Deposed: func(_ context.Context, node string, highest uint64) {
			l.log.Warn("a node took a higher term: this router stops leasing and taking changes", "node", node, "highest", highest, "term", term)
			select {
			case l.deposed <- highest:
			default:
			}
		},
		Logger: l.log,
	})
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.lists = map[string]lease.List{}
	l.settled = map[string]bool{}
	l.dirty = true
	for node, list := range l.listsLocked(l.rt.watcher.View()) {
		lsr.SetList(node, list)
		l.lists[node] = list
	}
	l.mu.Unlock()
	if err := lsr.Start(ctx); err != nil {
		_ = lsr.Close()
		return fmt.Errorf("start leasing: %w", err)
	}
	l.mu.Lock()
	l.leaser, l.term = lsr, term
	l.mu.Unlock()
	l.log.Info("leasing the region's nodes", "term", term, "lease", l.own)
	return nil
}

// stop stops the running Leaser, if any, and waits for it.
func (l *leasing) stop() {
	l.mu.Lock()
	lsr := l.leaser
	l.leaser, l.term = nil, 0
	l.lists = map[string]lease.List{}
	l.dirty = true
	l.mu.Unlock()
	if lsr != nil {
		_ = lsr.Close()
		l.log.Info("leasing stopped")
	}
}

// listsLocked is the list each leased node should hold as v has it: the
// tenants placed there, less those a failover holds and those waiting for
// a held failover, with the copies the directory counts on (in step: a
// replica not recorded behind) and those recorded behind. Only nodes
// recorded with lease:true are leased.
func (l *leasing) listsLocked(v *global.View) map[string]lease.List {
	out := map[string]lease.List{}
	if v == nil {
		return out
	}
	for name, n := range v.Nodes() {
		if n.Lease {
			out[name] = lease.List{Tenants: []string{}}
		}
	}
	now := time.Now()
	for name, rec := range v.Tenants() {
		list, leased := out[rec.Node]
		if !leased || rec.HeldBy == holdFailover {
			continue
		}
		if w, ok := l.held[name]; ok && w.node == rec.Node && now.Before(w.until) {
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

// sync sets every leased node's list from the router's view, grants at
// once a node that gained a tenant, stops leasing nodes the directory
// forgot or no longer leases, and probes nodes not yet known to take
// leases. A node failed over is given its list back only once its
// failover ended.
func (l *leasing) sync() {
	v := l.rt.watcher.View()
	l.mu.Lock()
	lsr := l.leaser
	if lsr == nil || v == nil {
		l.mu.Unlock()
		return
	}
	failedOver := map[string]bool{}
	for _, st := range lsr.Nodes() {
		failedOver[st.Node] = st.FailedOver
		if !st.FailedOver {
			delete(l.settled, st.Node)
		}
	}
	l.dropHeldLocked(v)
	if v.Rev == l.lastRev && maps.Equal(failedOver, l.lastFO) && len(l.held) == 0 && !l.dirty {
		l.mu.Unlock()
		l.probeNodes(v)
		return
	}
	l.lastRev, l.lastFO, l.dirty = v.Rev, failedOver, false
	want := l.listsLocked(v)
	var grant, gone []string
	for node, list := range want {
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
	for node := range l.lists {
		if _, ok := want[node]; !ok {
			gone = append(gone, node)
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
// over, moved or deleted, or past the failover's wait.
func (l *leasing) dropHeldLocked(v *global.View) {
	now := time.Now()
	for name, w := range l.held {
		rec, ok := v.Tenant(name)
		if !ok || rec.Node != w.node || !now.Before(w.until) {
			delete(l.held, name)
		}
	}
}

// failover is the Leaser's Failover callback: node lapsed and its list is
// empty. Tenants another operation holds wait off the node's list for
// that operation to end; the rest are promoted on their copies. Then the
// nodes that received tenants are granted their lists at once, and what
// the failover left on the node goes back on its list.
func (l *leasing) failover(ctx context.Context, node string) {
	l.mu.Lock()
	l.failing[node] = true
	delete(l.settled, node)
	if v := l.rt.watcher.View(); v != nil {
		until := time.Now().Add(heldWaitLimit)
		for _, name := range v.TenantsOn(node) {
			if rec, ok := v.Tenant(name); ok && rec.HeldBy != "" && rec.HeldBy != holdFailover {
				l.held[name] = heldWait{node: node, until: until}
			}
		}
	}
	l.mu.Unlock()

	res := l.rt.FailoverNode(ctx, node, false)
	outcome := AutoFailoverDone
	switch {
	case len(res.Failed) > 0 && len(res.Promoted) == 0:
		outcome = AutoFailoverFailed
	case len(res.Failed) > 0:
		outcome = AutoFailoverPartial
	}
	l.failovers.WithLabelValues(outcome).Inc()
	l.log.Warn("node failed over on its lapsed lease", "node", node, "promoted", len(res.Promoted), "failed", len(res.Failed), "outcome", outcome)

	l.mu.Lock()
	delete(l.failing, node)
	l.settled[node] = true
	delete(l.lists, node) // set again, whatever it held
	l.mu.Unlock()
	lsr := l.resync()
	if lsr == nil {
		return
	}
	if v := l.rt.watcher.View(); v != nil {
		for _, name := range res.Promoted {
			if rec, ok := v.Tenant(name); ok {
				lsr.GrantNow(rec.Node)
			}
		}
	}
}

// reportWait bounds recording one answer's reports; the node asks again
// in its next answer.
const reportWait = 10 * time.Second

// reports is the Leaser's Reports callback: node asked for the copies of
// tenants it holds to be recorded behind (at the seq given) or no longer
// behind. Each record changes only while the tenant is still on node; the
// lists then change with the directory, and node is granted its list at
// once: the writes it holds wait on it.
func (l *leasing) reports(ctx context.Context, node string, behind map[string]uint64, caught []string) {
	ctx, cancel := context.WithTimeout(ctx, reportWait)
	defer cancel()
	s, err := l.rt.lead.changes(ctx)
	if err != nil {
		return // not leading: the node asks the next leader
	}
	var rev int64
	change := func(name string, fn func(t *global.Tenant) bool) {
		at, err := s.GetTenant(ctx, name)
		if err != nil || at.Value.Node != node || !fn(&at.Value) {
			if err != nil && !isNotFound(err) {
				l.log.Warn("copy's step not recorded", "tenant", name, "node", node, "err", err)
			}
			return
		}
		done, err := s.UpdateTenant(ctx, name, at, func(t *global.Tenant) error {
			fn(t)
			return nil
		})
		if err != nil {
			l.log.Warn("copy's step not recorded: the node asks again", "tenant", name, "node", node, "err", err)
			return
		}
		rev = max(rev, done.Rev)
	}
	for _, name := range slices.Sorted(maps.Keys(behind)) {
		seq := behind[name]
		change(name, func(t *global.Tenant) bool {
			if t.ReplicaBehind >= seq {
				return false
			}
			l.log.Warn("replica recorded behind: no failover promotes it unforced until it caught up",
				"tenant", name, "node", node, "replica", t.Replica, "seq", seq)
			t.ReplicaBehind = seq
			return true
		})
	}
	for _, name := range caught {
		change(name, func(t *global.Tenant) bool {
			if t.ReplicaBehind == 0 {
				return false
			}
			l.log.Info("replica caught up: in step again", "tenant", name, "node", node, "replica", t.Replica)
			t.ReplicaBehind = 0
			return true
		})
	}
	if rev > 0 {
		l.rt.settleTo(ctx, rev)
	}
	if lsr := l.resync(); lsr != nil {
		lsr.GrantNow(node)
	}
}

// resync sets every list again from the directory and returns the
// running Leaser (nil when not leasing).
func (l *leasing) resync() *lease.Leaser {
	l.mu.Lock()
	l.dirty = true
	l.mu.Unlock()
	l.sync()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leaser
}

// probeNodes asks nodes recorded without lease:true whether they take
// leases, each once per address, and records lease:true for those that
// do. Only the leader writes the record.
func (l *leasing) probeNodes(v *global.View) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, n := range v.Nodes() {
		if n.Lease {
			continue
		}
		p, ok := l.probes[name]
		if ok && p.addr == n.Addr && (p.decided || p.running || now.Before(p.retryAt)) {
			continue
		}
		l.probes[name] = probe{addr: n.Addr, running: true, none: ok && p.addr == n.Addr && p.none}
		// The router's context, not the caller's: a forwarded request
		// that synced the lists may end before the probe does.
		rctx := l.rt.ctx
		l.rt.wg.Go(func() { l.probeNode(rctx, name, n) })
	}
}

// probeNode asks one node and records what it said.
func (l *leasing) probeNode(ctx context.Context, name string, n global.Node) {
	pctx, cancel := context.WithTimeout(ctx, max(l.own/3, time.Second))
	defer cancel()
	takes, err := l.tr.probe(pctx, n)
	if err == nil && takes {
		err = l.recordTakesLease(pctx, name, n.Addr)
	}
	p := probe{addr: n.Addr, decided: err == nil && takes, none: err == nil && !takes}
	switch {
	case err != nil:
		p.retryAt = time.Now().Add(probeRetry)
		l.log.Debug("lease probe", "node", name, "err", err)
	case !takes:
		p.retryAt = time.Now().Add(noLeaseReprobe)
	}
	l.mu.Lock()
	if p.none && !l.probes[name].none {
		l.log.Info("node takes no lease: it is never failed over automatically", "node", name)
	}
	l.probes[name] = p
	l.mu.Unlock()
	l.changed(global.TenantChange{})
}

// recordTakesLease sets lease:true on node name's record, if it still has
// addr.
func (l *leasing) recordTakesLease(ctx context.Context, name, addr string) error {
	s, err := l.rt.lead.changes(ctx)
	if err != nil {
		return err
	}
	mark := func(n *global.Node) bool {
		if n.Addr != addr || n.Lease {
			return false
		}
		n.Lease = true
		return true
	}
	rev, err := updateNode(ctx, s, name, mark)
	if err != nil {
		l.rt.lead.lost(ctx, err)
		return fmt.Errorf("record %s takes leases: %w", name, err)
	}
	if rev == 0 {
		return nil
	}
	l.rt.settleTo(ctx, rev)
	l.log.Info("node takes leases", "node", name)
	return nil
}

// nodes reports the leases as GET /_shard/leases shows them: empty when
// this router is not leasing.
func (l *leasing) nodes() []lease.NodeStatus {
	l.mu.Lock()
	lsr := l.leaser
	l.mu.Unlock()
	if lsr == nil {
		return []lease.NodeStatus{}
	}
	return lsr.Nodes()
}

// serveLeases answers GET /_shard/leases (the token was checked).
func (l *leasing) serveLeases(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		cpError(w, ErrMethod)
		return
	}
	l.mu.Lock()
	leasing, term := l.leaser != nil, l.term
	l.mu.Unlock()
	cpJSON(w, http.StatusOK, map[string]any{
		"leasing":  leasing,
		"term":     term,
		"lease_ms": l.own.Milliseconds(),
		"nodes":    l.nodes(),
	})
}

// Leading is the forwarder's LeaseRetry: this router grants.
func (l *leasing) Leading() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leaser != nil
}

// GrantNow has node granted its list at once and waits (within ctx) for
// the next answer to come back from it.
func (l *leasing) GrantNow(ctx context.Context, node string) error {
	l.mu.Lock()
	lsr := l.leaser
	l.mu.Unlock()
	if lsr == nil {
		return ErrNotLeader
	}
	// The list first: the forwarder may have seen the tenant there in the
	// view before this router's leasing did.
	l.sync()
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
func (l *leasing) Lease() time.Duration {
	if l.own > 0 {
		return l.own
	}
	if v := l.rt.watcher.View(); v != nil {
		return time.Duration(v.LeaseRecordMS) * time.Millisecond
	}
	return 0
}

// stepDown ends this router's lead at once: a node fenced its term, so a
// router was promoted over it.
func (ld *leadership) stepDown(highest uint64) {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	if ld.leading {
		ld.leading = false
		ld.log.Warn("a node took a higher term: no more changes here", "highest", highest, "our_term", ld.term)
	}
}

// answerNotifier tells waiters of the next grant answer from a node.
type answerNotifier struct {
	mu   sync.Mutex
	wait map[string]chan struct{} // guarded by mu: closed at the node's next answer
}

func newAnswerNotifier() *answerNotifier {
	return &answerNotifier{wait: map[string]chan struct{}{}}
}

// next returns a channel closed when node's next answer comes back.
func (a *answerNotifier) next(node string) <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch, ok := a.wait[node]
	if !ok {
		ch = make(chan struct{})
		a.wait[node] = ch
	}
	return ch
}

// answered wakes node's waiters.
func (a *answerNotifier) answered(node string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ch, ok := a.wait[node]; ok {
		close(ch)
		delete(a.wait, node)
	}
}

// notifyingTransport tells an answerNotifier of every answer.
type notifyingTransport struct {
	tr lease.Transport
	n  *answerNotifier
}

func (t *notifyingTransport) Send(ctx context.Context, node string, g lease.Grant) (lease.Answer, error) {
	a, err := t.tr.Send(ctx, node, g)
	if err == nil {
		t.n.answered(node)
	}
	return a, err
}

var leaseAgeDesc = prometheus.NewDesc("fenec_router_lease_age_seconds",
	"Time since each leased node's last grant answer came back (of the first round before one did).", []string{"node"}, nil)

// leaseAgeCollector reads the leases as they are scraped.
type leaseAgeCollector struct{ l *leasing }

func (c *leaseAgeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- leaseAgeDesc }

func (c *leaseAgeCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.l.nodes() {
		ch <- prometheus.MustNewConstMetric(leaseAgeDesc, prometheus.GaugeValue, float64(st.LastAnswerMS)/1000, st.Node)
	}
}

// wireLeasing builds the router's leasing: the forwarder's LeaseRetry on
// every router, and with --auto-failover the series and the goroutine
// that leases the nodes while this router leads.
func (rt *Router) wireLeasing() error {
	rt.leasing = newLeasing(rt, rt.cfg.AutoFailover)
	rt.fwd.SetLeaseRetry(rt.leasing)
	if rt.cfg.AutoFailover <= 0 {
		return nil
	}
	if err := rt.leasing.register(rt.reg); err != nil {
		return err
	}
	rt.leaseUnwatch = rt.watcher.OnTenantChange(rt.leasing.changed)
	ctx := rt.ctx
	rt.wg.Go(func() { rt.leasing.run(ctx) })
	return nil
}
