package repair

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/audit"
	"github.com/fenec-go/fenec/region/nodeapi"
)

// The loop: a node failed over that answers again has its stale copies
// follow the tenants' new primaries, and a tenant that could not be given
// a copy is tried again a few times, backing off. The copies owed are
// read again from the directory at each term this router leads, so none
// is lost with a router that stopped. Every lookEvery it also asks the
// nodes about their files: a copy a node reports damaged is replaced
// (rejoin.go), and a moved tenant's source its move left frozen is
// deleted (collect.go).
const (
	every     = 2 * time.Second  // how often the repair looks
	lookEvery = 10 * time.Second // how often it asks the nodes about their files
	parallel  = 8                // copies' nodes asked at once
	firstWait = 5 * time.Second  // first wait before a copy is asked again
	maxWait   = 80 * time.Second // the longest wait between two tries
	maxTries  = 6                // tries before a tenant waits for POST /_shard/replicas
)

// Lead is what the repair asks of the router's lead (a *lead.Lead).
type Lead interface {
	// Status reports whether this router leads, and at which term.
	Status() (leading bool, term uint64)
	// Changes is the store fenced on this router's term, or why it cannot
	// change the directory now (it does not lead).
	Changes(ctx context.Context) (*global.Store, error)
}

// Auditor records a change in the router's audit log (an *audit.Log).
type Auditor interface {
	Record(e audit.Entry) error
}

// Deps are everything the repair and the replica machinery use of the
// router. Every store passed with a call is the one the call was given.
type Deps struct {
	// ID is the router's, as its audit entries name it.
	ID string
	// Store reads the directory unfenced (a node's standby).
	Store *global.Store
	// Nodes is the router's client for nodes' admin API.
	Nodes *nodeapi.Client
	// Lead is the router's lead: the loop acts only while it leads.
	Lead Lead
	// OpMu is the router's operations' lock (Router.opMu), held while the
	// repair deletes a move's source left frozen; taken before the
	// repair's own.
	OpMu sync.Locker
	// Replicas is --replicas: every tenant gets a copy on another node of
	// its region when its node has no standby.
	Replicas bool

	// OwnTenant guards s on the record of tenant t's region, or refuses
	// when this router's side does not lease it (the router's owner.go).
	OwnTenant func(ctx context.Context, s *global.Store, t string) (*global.Store, error)
	// Identified is node name's record with its id, asked of the node now;
	// Apart asks both nodes, now, that target is not keep under another
	// name, and answers target's record (the router's identity.go).
	// Nothing on a node is deleted before.
	Identified func(ctx context.Context, s *global.Store, name string) (global.Node, error)
	Apart      func(ctx context.Context, s *global.Store, keep, target string) (global.Node, error)
	// Fittest is the node of cands with the fewest bytes on disk, or why
	// none answered its sizes.
	Fittest func(ctx context.Context, cands map[string]global.Node) (string, error)
	// CarryQuota sends tenant's quota, if it has one, to its new copy on
	// n (named nodeName).
	CarryQuota func(ctx context.Context, s *global.Store, n global.Node, nodeName, tenant string)
	// SourceWait waits until no moved tenant's source is still to be
	// deleted on node; SourcePending reports whether one is (the router's
	// move.go deletes them).
	SourceWait    func(ctx context.Context, tenant, node string) error
	SourcePending func(tenant, node string) bool
	// RegionCandidates are the nodes of other regions a copy of t, a
	// tenant set to survive its region, may go on, each with a count of
	// zero; Point has read copies follow their primaries anew
	// (region/copies).
	RegionCandidates func(ctx context.Context, s *global.Store, t global.Tenant, primary global.Node, nodes map[string]global.Versioned[global.Node]) map[string]int
	Point            func(ctx context.Context, tenants map[string]global.Versioned[global.Tenant], nodes map[string]global.Versioned[global.Node])

	// Settle waits (bounded) until the router's view holds revision rev.
	Settle func(ctx context.Context, rev int64)
	// UnknownNode says the directory's not-found of a node as the API
	// does (the router's notfound.go); any other error is returned as it
	// is. Held is the refusal of a tenant another operation holds.
	UnknownNode func(err error) error
	Held        func(tenant, by string) error

	Audit Auditor
	// Now is the clock the repair's waits are read on.
	Now func() time.Time
	Log *slog.Logger
}

// Repairer is the router's repair loop and its replica machinery. New
// builds it; Start runs the loop, Close stops it. Its methods are safe for
// concurrent use, before Start and after Close too.
type Repairer struct {
	deps Deps
	log  *slog.Logger

	mu     sync.Mutex        // guards nodes, tries, term, looked, cancel
	nodes  map[string]bool   // nodes tenants were failed off
	tries  map[string]*retry // tenants owed a copy
	term   uint64            // the term whose copies owed were read from the directory
	looked time.Time         // when the nodes were last asked about their files
	cancel context.CancelFunc

	wg sync.WaitGroup // the loop
}

// retry is when a tenant's copy is asked next and how often it was.
type retry struct {
	next  time.Time
	wait  time.Duration
	tries int
}

// New returns the repair over deps, not started.
func New(deps Deps) *Repairer {
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Log == nil {
		deps.Log = slog.New(slog.DiscardHandler)
	}
	return &Repairer{
		deps:   deps,
		log:    deps.Log,
		nodes:  map[string]bool{},
		tries:  map[string]*retry{},
		cancel: func() {},
	}
}

// Start runs the repair loop until ctx ends or Close; it acts only while
// this router leads.
func (p *Repairer) Start(ctx context.Context) {
	p.mu.Lock()
	ctx, p.cancel = context.WithCancel(ctx)
	p.mu.Unlock()
	p.wg.Go(func() { p.run(ctx) })
}

// Close stops the loop and waits for it. Safe to call twice.
func (p *Repairer) Close() {
	p.mu.Lock()
	cancel := p.cancel
	p.mu.Unlock()
	cancel()
	p.wg.Wait()
}

func (p *Repairer) run(ctx context.Context) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s, err := p.deps.Lead.Changes(ctx)
		if err != nil {
			continue
		}
		p.once(ctx, s)
	}
}

// FailedOff notes that tenants were failed off node: its return is
// watched for, and its stale copies follow again.
func (p *Repairer) FailedOff(node string) {
	p.mu.Lock()
	p.nodes[node] = true
	p.mu.Unlock()
}

// Later owes tenant a copy: it is asked again after a back-off.
func (p *Repairer) Later(tenant string) { p.oweAfter(tenant, firstWait) }

// owe owes tenant a copy, asked at the repair's next pass.
func (p *Repairer) owe(tenant string) { p.oweAfter(tenant, 0) }

func (p *Repairer) oweAfter(tenant string, wait time.Duration) {
	p.mu.Lock()
	if _, ok := p.tries[tenant]; !ok {
		p.tries[tenant] = &retry{next: p.deps.Now().Add(wait), wait: firstWait}
	}
	p.mu.Unlock()
}

// lookDue reports whether the nodes are to be asked about their files
// now, and if so notes that they were.
func (p *Repairer) lookDue(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.looked.IsZero() && now.Sub(p.looked) < lookEvery {
		return false
	}
	p.looked = now
	return true
}

// once makes the stale copies on every failed-over node that answers
// follow their tenants' new primaries, and retries the copies owed.
func (p *Repairer) once(ctx context.Context, s *global.Store) {
	tenants, _, err := s.ListTenants(ctx)
	if err != nil {
		return
	}
	nodes, _, err := s.ListNodes(ctx)
	if err != nil {
		return
	}
	// A router that restarted learns the failed-over nodes from the
	// directory: tenants failed off a node and not copied back onto it.
	for _, rec := range tenants {
		if rec.Value.FailedFrom != "" && rec.Value.Replica == "" && rec.Value.Node != rec.Value.FailedFrom {
			p.FailedOff(rec.Value.FailedFrom)
		}
	}
	for _, n := range p.watched() {
		node, ok := nodes[n]
		if !ok {
			p.forgetNode(n)
			continue
		}
		if p.deps.Nodes.CheckToken(ctx, node.Value) != nil {
			continue // not back yet
		}
		if p.rejoin(ctx, s, n) {
			p.forgetNode(n)
		}
	}
	p.oweFromDirectory(ctx, s, tenants)
	p.retryCopies(ctx, s)
	p.deps.Point(ctx, tenants, nodes)
	if p.lookDue(p.deps.Now()) {
		p.replaceDamaged(ctx, s, tenants, nodes)
		p.collectSources(ctx, s, tenants, nodes)
	}
}

// watched are the nodes tenants were failed off.
func (p *Repairer) watched() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.nodes))
	for n := range p.nodes {
		out = append(out, n)
	}
	return out
}

func (p *Repairer) forgetNode(n string) {
	p.mu.Lock()
	delete(p.nodes, n)
	p.mu.Unlock()
}

// oweFromDirectory, once a term, owes a copy to every tenant the
// directory shows without one where one is wanted (its node has a
// standby, or the router runs --replicas): the copies a router owed when
// it stopped (a move's, a placement's) are not lost with it.
func (p *Repairer) oweFromDirectory(ctx context.Context, s *global.Store, tenants map[string]global.Versioned[global.Tenant]) {
	leading, term := p.deps.Lead.Status()
	p.mu.Lock()
	done := p.term == term
	p.mu.Unlock()
	if !leading || done {
		return
	}
	standbys := map[string]string{}
	var owed []string
	for name, at := range tenants {
		if at.Value.Replica != "" {
			continue
		}
		sb, ok := standbys[at.Value.Node]
		if !ok {
			var err error
			if sb, err = p.standbyOf(ctx, at.Value.Node); err != nil {
				return // read again at the next pass
			}
			standbys[at.Value.Node] = sb
		}
		if sb != "" || p.deps.Replicas {
			owed = append(owed, name)
		}
	}
	for _, name := range owed {
		p.owe(name)
	}
	p.mu.Lock()
	p.term = term
	p.mu.Unlock()
	if len(owed) > 0 {
		p.log.Info("copies owed, as the directory shows them", "tenants", len(owed), "term", term)
	}
}

// retryCopies asks again for the copies owed whose wait has passed.
func (p *Repairer) retryCopies(ctx context.Context, s *global.Store) {
	now := p.deps.Now()
	var due []string
	p.mu.Lock()
	for t, r := range p.tries {
		if !now.Before(r.next) {
			due = append(due, t)
		}
	}
	p.mu.Unlock()
	for _, t := range due {
		p.tried(t, p.copyOwed(ctx, s, t))
	}
}

// tried notes how tenant t's copy asked again went: done, or asked again
// after a longer wait, or given up on after maxTries.
func (p *Repairer) tried(t string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.tries[t]
	switch {
	case r == nil:
	case err == nil:
		delete(p.tries, t)
	default:
		r.tries++
		r.wait = min(2*r.wait, maxWait)
		r.next = p.deps.Now().Add(r.wait)
		if r.tries >= maxTries {
			delete(p.tries, t)
			p.log.Warn("tenant left without a copy: POST /_shard/replicas asks again", "tenant", t, "err", err)
		}
	}
}

// copyOwed gives tenant t its copy if it still has none.
func (p *Repairer) copyOwed(ctx context.Context, s *global.Store, t string) error {
	at, err := s.GetTenant(ctx, t)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if at.Value.Replica != "" {
		return nil
	}
	if s, err = p.deps.OwnTenant(ctx, s, t); err != nil {
		return nil // the other side's now
	}
	target, err := p.PickReplica(ctx, s, at.Value, true) // a copy was wanted
	if err != nil || target == "" {
		return err
	}
	return p.AddReplica(ctx, s, t, target)
}
