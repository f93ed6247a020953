package failover

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/region/leasing"
	"github.com/fenec-go/fenec/region/nodeapi"
	"github.com/fenec-go/fenec/wire"
)

// Result is what a failover of one node did: the tenants promoted on
// their copies and those that were not, with why. The leasing fails
// lapsed nodes over through Node, so the type is its.
type Result = leasing.FailoverResult

// Failure is a tenant a failover left on its node.
type Failure = leasing.FailoverFailure

// Batch bounds the tenants one directory transaction of a failover holds
// or points at their copies: each takes a condition and a write, the
// fence and the region's guard a condition each, within etcd's default
// --max-txn-ops of 128 (and far within its request size: a tenant's
// record is about 100 bytes).
const Batch = 100

// Parallel bounds the promotions a failover has running at once (calls to
// nodes without POST /_admin/promote; calls of many, one per copy node,
// within a batch).
const Parallel = 16

// batches bounds the batches a failover has under way at once: one's
// promotions wait on the copies' disks while the next is held and sent,
// so a node of many tenants does not cost its batches one after another.
const batches = 4

// Repair is what a failover tells the router's repair loop.
type Repair interface {
	// FailedOff notes that tenants were failed off node: its return is
	// watched for, and its stale copies made to follow again. Called with
	// Deps.OpMu held.
	FailedOff(node string)
}

// Deps are everything a failover uses of the router.
type Deps struct {
	// Changes is the store to write a change with while this router leads
	// (the lead's, fenced on its term), or why not.
	Changes func(ctx context.Context) (*global.Store, error)
	// OwnNode guards s on node n's region record, or refuses when this
	// router's side does not lease that region (the router's owner.go):
	// only the side leasing a node's region fails it over.
	OwnNode func(ctx context.Context, s *global.Store, n string) (*global.Store, error)
	// OwnRegion is OwnNode for a node of region r, known already: one read
	// of the directory (r's record), not two. Nil: OwnNode alone is used.
	OwnRegion func(ctx context.Context, s *global.Store, r string) (*global.Store, error)
	// CopyLost says whether a copy's node is known lost (its lease
	// certainly lapsed: failed over now, or recorded lapsed): a copy there
	// is not promoted, nor its node dialled, so its tenant is released at
	// once rather than at the dial's bound. Nil: none is.
	CopyLost func(node string) bool
	// Nodes is the router's client for nodes' admin API.
	Nodes *nodeapi.Client
	// Fence is what a promotion on a node of region r names: this
	// router's directory, r's leasing epoch and the lead's term.
	Fence func(r string) wire.Promote
	// OpMu is the router's opMu: held while a batch is released onto its
	// copies (the transaction alone, not the view settling on it), so
	// nothing else of the router's lands in between.
	OpMu sync.Locker
	// View is the router's view of its directory (for quotas).
	View func() *global.View
	// Settle waits (bounded) until the router's view holds revision rev.
	Settle func(ctx context.Context, rev int64)
	// CarryQuota sends tenant's quota, as the directory records it, to
	// node n (named nodeName), logging a failure.
	CarryQuota func(ctx context.Context, s *global.Store, n global.Node, nodeName, tenant string)
	// Repair is the router's repair loop.
	Repair Repair
	// HeldEnded tells the leasing that a failover's wait for tenant's
	// hold gave up (or finished): the tenant goes back on its node's
	// lease list at once if it is still there.
	HeldEnded func(tenant string)
	// NodeTimeout bounds releasing a tenant after a failed promotion.
	NodeTimeout time.Duration
	Log         *slog.Logger
}

// Failover fails nodes over. Its methods may run at once; Close stops
// the waits for held tenants it started.
type Failover struct {
	deps     Deps
	log      *slog.Logger
	restores restores

	ctx    context.Context // ends at Close: bounds every wait for a hold
	cancel context.CancelFunc
	wg     sync.WaitGroup // the waits for a hold
	mu     sync.Mutex     // guards closed
	closed bool           // no wait starts once set
}

// New returns a failover over deps.
func New(deps Deps) *Failover {
	if deps.Log == nil {
		deps.Log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Failover{deps: deps, log: deps.Log, ctx: ctx, cancel: cancel}
}

// Close ends the waits for held tenants and waits for them to return.
// Safe to call twice.
func (f *Failover) Close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.cancel()
	f.wg.Wait()
}

// Node promotes every tenant of node on its copy (sending the node the
// tenant's lineage and the history its primary forked at its last
// failover) and points the directory at the copy: the tenants are held in
// one transaction per Batch, promoted in one call per batch and copy
// node, and released onto their copies in one transaction per batch
// again, a few batches under way at once, so a node of many tenants costs
// a few directory writes and node calls, not three a tenant. A tenant held
// by another operation is failed over when that operation ends, onto the
// copy it had then. Calling it again finishes what a call left. force
// promotes copies the nodes would refuse.
func (f *Failover) Node(ctx context.Context, node string, force bool) Result {
	res := Result{Node: node, Promoted: []string{}, Failed: []Failure{}}
	began := time.Now() // for the log's timings only: nothing decides by it
	s, tenants, recs, err := f.read(ctx, node)
	read := time.Since(began)
	if err != nil {
		res.Failed = append(res.Failed, Failure{Why: err.Error()})
		return res
	}
	names := make([]string, 0)
	for t, rec := range tenants {
		if rec.Value.Node == node {
			names = append(names, t)
		}
	}
	slices.Sort(names)
	var todo, broken []string
	for _, t := range names {
		at := tenants[t]
		if at.Value.HeldBy == HoldRestore { // restore.go: not waited for
			at = f.breakRestore(ctx, s, t, node, at)
			tenants[t] = at
			broken = append(broken, t)
		}
		if by := at.Value.HeldBy; by != "" && by != global.HoldFailover {
			res.Failed = append(res.Failed, heldFailure(t, at.Value))
			f.whenReleased(s, t, node, at.Value.Replica, force)
			continue
		}
		if err := promotable(t, at.Value, force); err != nil {
			res.Failed = append(res.Failed, Failure{Tenant: t, Why: err.Error()})
			continue
		}
		todo = append(todo, t)
	}
	f.runBatches(ctx, s, node, todo, tenants, recs, force, &res)
	for _, t := range broken {
		if !slices.Contains(res.Promoted, t) {
			f.deps.HeldEnded(t) // held as the lease lapsed, not waited for: its node's again
		}
	}
	outcome := "done"
	if len(res.Failed) > 0 {
		outcome = "partial"
	}
	f.log.Warn("node failed over", "node", node, "promoted", len(res.Promoted), "failed", len(res.Failed), "outcome", outcome,
		"read_ms", read.Milliseconds(), "took_ms", time.Since(began).Milliseconds())
	return res
}

// read returns the store to fail node over with, guarded on its region's
// record, every tenant the directory records and every node (the copies'
// addresses). The three are read at once, not one after another: each is
// a round trip to the directory, whose quorum may span regions (a region
// lost whole leaves the global tier's etcd across the wide-area link).
// The lists are read fresh, not taken from the router's view: the hold
// compares each tenant's record on the revision read here. The node's
// region is taken from the view, so the guard is one read, and checked
// against the node's record as listed: a region the view had wrong has
// the guard read again, as OwnNode reads it.
func (f *Failover) read(ctx context.Context, node string) (*global.Store, map[string]global.Versioned[global.Tenant], nodes, error) {
	s, err := f.deps.Changes(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	region := f.viewedRegion(node)
	var guarded *global.Store
	var guardErr error // by the view's region: stands only if that region is the node's
	var tenants map[string]global.Versioned[global.Tenant]
	var recs nodes
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		if region == "" {
			guarded, err = f.deps.OwnNode(gctx, s, node)
			return err
		}
		guarded, guardErr = f.deps.OwnRegion(gctx, s, region)
		return nil
	})
	g.Go(func() (err error) {
		tenants, _, err = s.ListTenants(gctx)
		return err
	})
	g.Go(func() (err error) {
		recs, _, err = s.ListNodes(gctx)
		return err
	})
	if err := g.Wait(); err != nil {
		return nil, nil, nil, err
	}
	if rec, ok := recs[node]; region != "" && (!ok || rec.Value.Region != region) {
		guarded, guardErr = f.deps.OwnNode(ctx, s, node)
	}
	if guardErr != nil {
		return nil, nil, nil, guardErr
	}
	return guarded, tenants, recs, nil
}

// viewedRegion is node's region as the router's view records it, "" when
// it records none or there is no OwnRegion to guard on it.
func (f *Failover) viewedRegion(node string) string {
	if f.deps.OwnRegion == nil || f.deps.View == nil {
		return ""
	}
	v := f.deps.View()
	if v == nil {
		return ""
	}
	n, ok := v.Node(node)
	if !ok {
		return ""
	}
	return n.Region
}

// runBatches fails todo over in batches of Batch, a few under way at
// once, adding what each did to res (Promoted sorted).
func (f *Failover) runBatches(ctx context.Context, s *global.Store, node string, todo []string,
	tenants map[string]global.Versioned[global.Tenant], recs nodes, force bool, res *Result) {
	var mu sync.Mutex // guards res while batches run
	var g errgroup.Group
	g.SetLimit(batches)
	for batch := range slices.Chunk(todo, Batch) {
		g.Go(func() error {
			var part Result
			f.batch(ctx, s, node, batch, tenants, recs, force, &part)
			mu.Lock()
			defer mu.Unlock()
			res.Promoted = append(res.Promoted, part.Promoted...)
			res.Failed = append(res.Failed, part.Failed...)
			return nil
		})
	}
	_ = g.Wait()
	slices.Sort(res.Promoted)
}

// heldFailure is tenant name, held by another operation, as a failover
// reports it: failed over when that operation ends.
func heldFailure(name string, rec global.Tenant) Failure {
	return Failure{Tenant: name, Why: fmt.Sprintf("held by %s: failed over onto %q when it ends", rec.HeldBy, rec.Replica)}
}

// promotable says why a tenant's copy cannot be promoted, if it cannot.
func promotable(name string, rec global.Tenant, force bool) error {
	if rec.Replica == "" {
		return fmt.Errorf("%s: %w to promote", name, ErrNoReplica)
	}
	if rec.ReplicaBehind > 0 && !force {
		return fmt.Errorf("%s: %w: its copy on %s fell behind and %s answered writes without it from seq %d on; "+
			"bring %s back (its file holds them), or fail over with {\"force\": true} to promote the copy without them",
			name, ErrReplicaBehind, rec.Replica, rec.Node, rec.ReplicaBehind, rec.Node)
	}
	return nil
}
