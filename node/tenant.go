package node

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenec-go/fenec/engine"
)

// Role is what a tenant file is on this node.
type Role int32

const (
	RolePrimary Role = iota // takes writes
	RoleReplica             // follows another node's copy; refuses writes
)

// tenant is one tenant's record on the node: its open file and everything
// the node keeps around it. The registry opens and closes it; requests
// hold a reference (refs) while they use it.
type tenant struct {
	name string
	path string
	reg  *registry

	ready   chan struct{} // closed once opening ended (db or openErr set)
	done    chan struct{} // closed once closed and out of the registry
	db      *engine.DB
	openErr error

	// ctx ends with the tenant: its cause (ErrTenantGone, ErrTenantClosing,
	// ErrShuttingDown) is what streams and held requests are told.
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup // goroutines the tenant owns (the claim runner)

	// Guarded by reg.mu.
	refs     int       // requests, streams, freezes holding it open
	lastUsed time.Time // when the last reference was let go
	closing  bool      // on its way out: new acquires wait for done

	mem atomic.Int64 // MemoryBytes as last read (after open, after each request)
	// frozenAt is when the freeze now on it began, in unix nanoseconds;
	// 0 while it is not frozen (freeze, thaw, isFrozen).
	frozenAt atomic.Int64
	quota    atomic.Pointer[Quota]
	rates    rateBuckets  // rows_per_s and bytes_per_s of the quota
	active   atomic.Int64 // data requests running (the requests quota)
	// leaseGate, set under --lease, is the lease's write check for this
	// tenant: nil lets writes through.
	leaseGate atomic.Pointer[func() error]
	// role: a replica copy refuses writes; its follower holds a
	// reference, so it stays open.
	role   atomic.Int32
	follow atomic.Pointer[followState] // nil: a primary's file
	// fresh is a copy's proofs of its freshness (freshness.go).
	fresh *freshness

	writes inflight // Exec/Batch calls running: freeze waits for them

	mu sync.Mutex // guards the fields below
	// seq mirrors the file's seq, kept by onChange under the engine's
	// write lock (so inside BatchOptions.Extra it is the seq before the
	// block landing).
	seq    uint64
	seqCh  chan struct{}            // closed and replaced at every change
	subs   map[*subscriber]struct{} // open subscriptions
	keys   map[string]chan struct{} // idempotency keys in flight; closed when done
	claims []*claimWaiter           // Fenec-Wait holders, oldest first
	idemOK bool                     // _idempotency is known to exist
	// followCancel and followDone stop and await the follower.
	followCancel context.CancelFunc
	followDone   chan struct{}
	lastHello    time.Time // when the followed node last said hello
	// followLive: the follower's feed is open (follow.go); a promotion
	// lets it read what already arrived before it stops it.
	followLive atomic.Bool
	// followFrame: when the follower's feed last brought a frame (unix ns).
	followFrame atomic.Int64
	// feeds are the replication streams this primary sends, each with
	// the seq it has sent up to; sentCh is closed and replaced as one
	// moves on.
	feeds  map[*feed]struct{}
	sentCh chan struct{}

	stopWatch func()
	wake      chan struct{} // cap 1: a write landed, held claims may run
}

func newTenant(reg *registry, name string) *tenant {
	ctx, cancel := context.WithCancelCause(context.Background())
	t := &tenant{
		name:   name,
		path:   reg.pathOf(name),
		reg:    reg,
		ready:  make(chan struct{}),
		done:   make(chan struct{}),
		ctx:    ctx,
		cancel: cancel,
		seqCh:  make(chan struct{}),
		subs:   make(map[*subscriber]struct{}),
		keys:   make(map[string]chan struct{}),
		feeds:  make(map[*feed]struct{}),
		sentCh: make(chan struct{}),
		wake:   make(chan struct{}, 1),
		fresh:  newFreshness(),
	}
	if reg.leaseGate != nil {
		if g := reg.leaseGate(name); g != nil {
			t.leaseGate.Store(&g)
		}
	}
	return t
}

// options are the engine options of this tenant's file; a replica's
// never sweeps (its primary's deletes arrive by replication).
func (t *tenant) options(replica bool) engine.Options {
	o := t.reg.engineOpts
	o.Gate = t.gate
	o.Quota = t.checkQuota
	o.NoSweep = replica
	return o
}

// attach starts watching a freshly opened db.
func (t *tenant) attach(db *engine.DB) {
	t.db = db
	t.stopWatch = db.Watch(t.onChange)
	t.mu.Lock()
	t.seq = db.Seq()
	t.mu.Unlock()
	t.mem.Store(db.MemoryBytes())
	t.wg.Go(t.runClaims)
}

// gate is the engine's write gate: every reason this node refuses a
// write to this tenant, asked as a block lands.
func (t *tenant) gate() error {
	if t.isFrozen() {
		return ErrFrozen
	}
	if Role(t.role.Load()) == RoleReplica {
		return replicaRefusal{tenant: t.name} // role.go
	}
	if g := t.leaseGate.Load(); g != nil {
		return (*g)()
	}
	return nil
}

// leaseCheck asks only the lease gate (nil when there is none).
func (t *tenant) leaseCheck() error {
	if g := t.leaseGate.Load(); g != nil {
		return (*g)()
	}
	return nil
}

// onChange is the engine's watcher: it runs under the engine's write lock
// after every landed block and must not block.
func (t *tenant) onChange(c engine.Change) {
	t.mu.Lock()
	t.seq = c.Seq
	close(t.seqCh)
	t.seqCh = make(chan struct{})
	for s := range t.subs {
		s.offer(c)
	}
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// seqNow returns the mirrored seq and a channel closed at the next change.
func (t *tenant) seqNow() (uint64, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seq, t.seqCh
}

// waitSeq waits until the tenant's seq reaches want, the deadline passes
// (ErrAfterTimeout), or the tenant or ctx ends.
func (t *tenant) waitSeq(ctx context.Context, want uint64, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		seq, ch := t.seqNow()
		if seq >= want {
			return nil
		}
		select {
		case <-ch:
		case <-timer.C:
			return ErrAfterTimeout
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.ctx.Done():
			return context.Cause(t.ctx)
		case <-t.reg.stopping:
			return ErrShuttingDown
		}
	}
}

// inflight counts running calls and lets one wait for none.
type inflight struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0; nil while n is 0
}

func (f *inflight) add() {
	f.mu.Lock()
	if f.n == 0 {
		f.idle = make(chan struct{})
	}
	f.n++
	f.mu.Unlock()
}

func (f *inflight) done() {
	f.mu.Lock()
	f.n--
	if f.n == 0 {
		close(f.idle)
		f.idle = nil
	}
	f.mu.Unlock()
}

// wait returns once no call runs, or ctx ends.
func (f *inflight) wait(ctx context.Context) error {
	f.mu.Lock()
	ch := f.idle
	f.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// freeze marks t frozen from now; it reports whether t was not already.
func (t *tenant) freeze() bool { return t.frozenAt.CompareAndSwap(0, time.Now().UnixNano()) }

// thaw ends t's freeze; it reports whether t was frozen.
func (t *tenant) thaw() bool { return t.frozenAt.Swap(0) != 0 }

func (t *tenant) isFrozen() bool { return t.frozenAt.Load() != 0 }
