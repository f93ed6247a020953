package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenec-go/fenec/engine"
	"github.com/fenec-go/fenec/internal/netx"
	"github.com/fenec-go/fenec/lease"
	"github.com/fenec-go/fenec/wire"
)

// fileExt ends every tenant file's name.
const fileExt = ".fenec"

// registry owns the open tenants of the node's directory: it opens a
// tenant on first use (one opener per tenant, no lock held across the
// open), closes idle ones, and keeps the open ones under the memory
// ceiling, least recently used first.
type registry struct {
	dir        string
	engineOpts engine.Options
	maxMemory  int64
	idleClose  time.Duration
	log        *slog.Logger
	now        func() time.Time

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the janitor
	kick   chan struct{}  // cap 1: look at memory now

	mu   sync.Mutex // guards tenants, closed; broadcast by refsCond
	cond *sync.Cond // signalled when a tenant's refs drop
	// replToken is the replication token; replClient reads primaries'
	// feeds; replicaOf, if set, is the node new tenants follow.
	replToken  atomic.Pointer[string] // what it sends its primaries; read again on Reload
	replClient *http.Client
	replicaOf  string
	keepAlive  time.Duration // how often a quiet feed says it is there
	// freshEvery is --freshness-interval, and clock the boot clock a
	// copy's proofs of freshness are timed on (freshness.go).
	freshEvery time.Duration
	clock      lease.Clock
	// beforeOpen, if set, is called before a tenant's file is opened
	// (tests use it to make one open slow).
	beforeOpen atomic.Pointer[func(name string)]
	// beforeEach, if set, is called before each statement of a /batch run
	// one by one (tests use it to change the tenant between two).
	beforeEach atomic.Pointer[func(name string, at int)]
	// leaseGate makes a tenant's lease check (nil result: no lease).
	leaseGate func(tenant string) func() error
	// stopping is closed as the node begins to shut down: waits end.
	stopping <-chan struct{}
	// onStatements counts statements by kind for metrics (nil: not
	// counted).
	onStatements func([]engine.StatementKind)
	// stmtTime bounds a statement's run (--max-statement-time; 0: no
	// bound), stmtCause is what one stopped at it is answered.
	stmtTime  time.Duration
	stmtCause error
	// tenants holds every tenant opening, open or closing.
	tenants map[string]*tenant
	closed  bool
}

func newRegistry(dir string, opts engine.Options, maxMemory int64, idleClose time.Duration, resolver string, log *slog.Logger) *registry {
	ctx, cancel := context.WithCancel(context.Background())
	r := &registry{
		dir: dir, engineOpts: opts, maxMemory: maxMemory, idleClose: idleClose,
		log: log, now: time.Now, ctx: ctx, cancel: cancel,
		kick: make(chan struct{}, 1), tenants: make(map[string]*tenant),
	}
	r.cond = sync.NewCond(&r.mu)
	r.replClient = &http.Client{Transport: &http.Transport{
		DialContext:         netx.Dialer(resolver, 30*time.Second).DialContext,
		MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute,
	}}
	r.wg.Go(r.janitor)
	return r
}

// peek returns tenant name if it is open and not closing, without holding
// it (nil otherwise): for a look at its state that needs no file.
func (r *registry) peek(name string) *tenant {
	r.mu.Lock()
	t := r.tenants[name]
	r.mu.Unlock()
	if t == nil {
		return nil
	}
	select {
	case <-t.ready:
	default:
		return nil
	}
	if t.db == nil {
		return nil
	}
	return t
}

// pathOf is the file of a (valid) tenant name.
func (r *registry) pathOf(name string) string {
	return filepath.Join(r.dir, name+fileExt)
}

// acquire returns the open tenant with one more reference; the caller
// lets it go with release. An unknown tenant is ErrUnknownTenant: a
// request never creates one.
func (r *registry) acquire(ctx context.Context, name string) (*tenant, error) {
	if !wire.ValidName(name) {
		return nil, ErrBadName
	}
	for {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return nil, ErrShuttingDown
		}
		t := r.tenants[name]
		if t != nil && t.closing {
			r.mu.Unlock()
			select {
			case <-t.done:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		opener := t == nil
		if opener {
			t = newTenant(r, name)
			r.tenants[name] = t
		}
		t.refs++
		r.mu.Unlock()
		if opener {
			r.open(t)
		}
		select {
		case <-t.ready:
		case <-ctx.Done():
			r.release(t)
			return nil, ctx.Err()
		}
		if t.openErr != nil {
			r.release(t)
			return nil, t.openErr
		}
		return t, nil
	}
}

// open opens t's file and ends its opening, either way.
func (r *registry) open(t *tenant) {
	defer close(t.ready)
	db, err := r.openFile(t)
	if err != nil {
		t.openErr = err
		r.mu.Lock()
		if r.tenants[t.name] == t {
			delete(r.tenants, t.name)
		}
		r.mu.Unlock()
		t.cancel(err)
		close(t.done)
		return
	}
	if err := r.loadQuota(t); err != nil {
		r.log.Error("tenant's quota not read: it runs with none", "tenant", t.name, "err", err)
	}
	t.attach(db)
	if st, err := r.loadFollow(t.name); err == nil && st != nil {
		r.startFollower(t, st)
	}
	r.log.Debug("tenant opened", "tenant", t.name, "memory", t.mem.Load())
	r.poke()
}

func (r *registry) openFile(t *tenant) (*engine.DB, error) {
	if f := r.beforeOpen.Load(); f != nil {
		(*f)(t.name)
	}
	if _, err := os.Stat(t.path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, ErrUnknownTenant
		}
		return nil, fmt.Errorf("open tenant: %w", err)
	}
	st, err := r.loadFollow(t.name)
	if err != nil {
		return nil, err
	}
	db, err := guarded(func() (*engine.DB, error) { return engine.Open(t.path, t.options(st != nil)) })
	if errors.Is(err, engine.ErrNotExist) {
		return nil, ErrUnknownTenant
	}
	if err != nil {
		r.log.Error("open tenant", "tenant", t.name, "err", err)
		return nil, openError(t.name, err)
	}
	return db, nil
}

// fileError is a tenant file's failure as a client is told it: what went
// wrong, never where the node keeps its files (the node's log says so).
type fileError struct {
	msg string
	err error
}

func (e *fileError) Error() string { return e.msg }
func (e *fileError) Unwrap() error { return e.err }

// openError says why tenant name did not open, without its path.
func openError(name string, err error) error {
	var (
		de *engine.DamagedError
		pe *fs.PathError
	)
	switch {
	case errors.As(err, &de):
		return &fileError{err: err, msg: fmt.Sprintf("open tenant: the file of tenant %s is damaged at offset %d: %s; restore the tenant from a backup or fail it over to its copy (the node's log names the file)",
			name, de.Offset, de.Why)}
	case errors.As(err, &pe):
		return &fileError{err: err, msg: fmt.Sprintf("open tenant %s: %s: %v (the node's log names the file)", name, pe.Op, pe.Err)}
	}
	return fmt.Errorf("open tenant: %w", err)
}

// create makes a new empty tenant file and registers it open; under
// --replica-of it follows that node.
func (r *registry) create(name string) error {
	err := r.install(name, func(path string, t *tenant) (*engine.DB, error) {
		return engine.Create(path, t.options(r.replicaOf != ""))
	})
	if err != nil || r.replicaOf == "" {
		return err
	}
	t, err := r.acquire(r.ctx, name)
	if err != nil {
		return err
	}
	defer r.release(t)
	return r.follow(t, r.replicaOf, "", "")
}

// installImage installs an image read from src as a new tenant.
func (r *registry) installImage(name string, src io.Reader) error {
	return r.install(name, func(path string, t *tenant) (*engine.DB, error) {
		// Read once: checked and loaded as it lands, kept open.
		return engine.InstallOpen(path, src, t.options(false))
	})
}

// install registers a tenant made by mk, which must make path anew.
// While it runs, the name is held opening, so no request opens the file.
func (r *registry) install(name string, mk func(string, *tenant) (*engine.DB, error)) error {
	if !wire.ValidName(name) {
		return ErrBadName
	}
	r.mu.Lock()
	for !r.closed {
		t := r.tenants[name]
		var wait <-chan struct{}
		switch {
		case t == nil:
		case t.closing:
			wait = t.done // a delete or close under way
		case !isClosed(t.ready):
			wait = t.ready // a request opening it: the file may be gone
		case t.openErr != nil:
			wait = t.done // a failed open, forgotten as it ends
		}
		if wait == nil {
			break
		}
		r.mu.Unlock()
		<-wait
		r.mu.Lock()
	}
	if r.closed {
		r.mu.Unlock()
		return ErrShuttingDown
	}
	if r.tenants[name] != nil {
		r.mu.Unlock()
		return ErrTenantExists
	}
	t := newTenant(r, name)
	r.tenants[name] = t
	r.mu.Unlock()

	var db *engine.DB
	err := ErrTenantExists
	if _, serr := os.Stat(t.path); errors.Is(serr, os.ErrNotExist) {
		if err = r.dropQuota(name); err == nil { // an old tenant's under this name
			db, err = guarded(func() (*engine.DB, error) { return mk(t.path, t) })
		}
		if errors.Is(err, engine.ErrExist) {
			err = ErrTenantExists
		}
	}
	if err != nil {
		t.openErr = err
		r.mu.Lock()
		delete(r.tenants, name)
		r.mu.Unlock()
		t.cancel(err)
		close(t.ready)
		close(t.done)
		return err
	}
	t.attach(db)
	r.mu.Lock()
	t.lastUsed = r.now()
	r.mu.Unlock()
	close(t.ready)
	r.poke()
	return nil
}

// guarded runs an engine open, turning a panic into an error so a tenant
// never stays "opening" for ever.
func guarded(open func() (*engine.DB, error)) (db *engine.DB, err error) {
	defer func() {
		if p := recover(); p != nil {
			db, err = nil, fmt.Errorf("open tenant: engine panicked: %v", p)
		}
	}()
	return open()
}

// release lets one reference go.
func (r *registry) release(t *tenant) {
	if isClosed(t.ready) && t.openErr == nil {
		t.mem.Store(t.db.MemoryBytes())
	}
	r.mu.Lock()
	t.refs--
	t.lastUsed = r.now()
	r.cond.Broadcast()
	r.mu.Unlock()
	if r.maxMemory > 0 {
		r.poke()
	}
}

// poke asks the janitor to look at memory now.
func (r *registry) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// remove closes the tenant named name for good: its streams and held
// requests are told cause, it waits for its references (a freeze's is
// dropped), closes it, and runs after (delete the file, or put another in
// its place) while it still holds the name, so no request opens the file
// meanwhile. ErrUnknownTenant if there is no such tenant file.
func (r *registry) remove(name string, cause error, after func(path string) error) error {
	return r.removeAt(name, cause, nil, after)
}

// removeAt is remove that, when the tenant was open, calls last with its
// file once no request holds it and before it closes: what it holds then
// is final (a restore starts past it).
func (r *registry) removeAt(name string, cause error, last func(*engine.DB), after func(path string) error) error {
	if !wire.ValidName(name) {
		return ErrBadName
	}
	for {
		r.mu.Lock()
		t := r.tenants[name]
		if t != nil && t.closing {
			r.mu.Unlock()
			<-t.done
			continue
		}
		if t == nil {
			// Hold the name while the file goes, so no request opens it.
			t = newTenant(r, name)
			t.closing = true
			r.tenants[name] = t
			r.mu.Unlock()
			err := ErrUnknownTenant
			if _, serr := os.Stat(t.path); serr == nil {
				err = after(t.path)
			}
			t.openErr = ErrUnknownTenant
			t.cancel(cause)
			close(t.ready)
			r.forget(t)
			return err
		}
		t.closing = true
		r.mu.Unlock()
		<-t.ready
		if t.openErr != nil {
			continue
		}
		return r.closeRemove(t, cause, last, after)
	}
}

// closeRemove ends open tenant t, marked closing: its freeze, its
// requests (ended by cause), its file (last sees it final), then after.
func (r *registry) closeRemove(t *tenant, cause error, last func(*engine.DB), after func(path string) error) error {
	if t.thaw() {
		r.release(t)
	}
	t.cancel(cause)
	r.mu.Lock()
	for t.refs > 0 {
		r.cond.Wait()
	}
	r.mu.Unlock()
	if last != nil {
		last(t.db)
	}
	err := errors.Join(r.closeTenant(t, false), after(t.path))
	r.forget(t)
	return err
}

// removeFrozen is remove only while the tenant is open and frozen,
// decided under the registry's lock as it is marked closing: a file made
// or installed since (a new copy, a move's target) is not frozen, so it
// is never the one deleted. Otherwise ErrNotFrozen (ErrUnknownTenant when
// there is no file) and nothing changes.
func (r *registry) removeFrozen(name string, after func(path string) error) error {
	if !wire.ValidName(name) {
		return ErrBadName
	}
	r.mu.Lock()
	t := r.tenants[name]
	if t == nil || t.closing || !isClosed(t.ready) || t.openErr != nil || !t.isFrozen() {
		r.mu.Unlock()
		if t == nil {
			if _, err := os.Stat(r.pathOf(name)); errors.Is(err, os.ErrNotExist) {
				return ErrUnknownTenant
			}
		}
		return ErrNotFrozen
	}
	t.closing = true
	r.mu.Unlock()
	return r.closeRemove(t, ErrTenantGone, nil, after)
}

// deleteFiles removes a tenant's file and what the node keeps beside it.
func (r *registry) deleteFiles(path string) error {
	name := strings.TrimSuffix(filepath.Base(path), fileExt)
	var errs []error
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("remove tenant file: %w", err))
	}
	return errors.Join(append(errs, r.dropQuota(name), r.dropFollow(name))...)
}

// closeTenant stops what t owns and closes its file; with shrink (a
// graceful shutdown, an idle close), it syncs it first and checkpoints it
// where that gains (engine's Shrink: the file comes out smaller, or an
// open would otherwise replay more than a checkpoint keeps), so closing
// never grows a small file.
func (r *registry) closeTenant(t *tenant, shrink bool) error {
	t.cancel(ErrTenantClosing)
	if t.stopWatch != nil {
		t.stopWatch()
	}
	t.wg.Wait()
	var errs []error
	if shrink {
		if err := t.db.Sync(); err != nil {
			errs = append(errs, fmt.Errorf("sync tenant %s: %w", t.name, err))
		} else if did, err := t.db.Shrink(); err != nil {
			errs = append(errs, fmt.Errorf("checkpoint tenant %s: %w", t.name, err))
		} else if did {
			r.log.Debug("tenant checkpointed as it closed", "tenant", t.name, "bytes", t.db.FileBytes())
		}
	}
	if err := t.db.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close tenant %s: %w", t.name, err))
	}
	return errors.Join(errs...)
}

// forget takes a closed t out of the registry and wakes who waits on it.
func (r *registry) forget(t *tenant) {
	r.mu.Lock()
	if r.tenants[t.name] == t {
		delete(r.tenants, t.name)
	}
	r.mu.Unlock()
	close(t.done)
}

// close ends the janitor and, once no request holds a tenant, syncs,
// checkpoints and closes every open tenant. Safe to call twice.
func (r *registry) close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	var errs []error
	for {
		r.mu.Lock()
		var next *tenant
		for _, t := range r.tenants {
			if !t.closing {
				next = t
				break
			}
		}
		if next == nil {
			waiting := make([]*tenant, 0, len(r.tenants))
			for _, t := range r.tenants {
				waiting = append(waiting, t)
			}
			r.mu.Unlock()
			for _, t := range waiting {
				<-t.done
			}
			r.replClient.CloseIdleConnections()
			return errors.Join(errs...)
		}
		next.closing = true
		r.mu.Unlock()
		<-next.ready
		if next.openErr != nil {
			continue
		}
		if next.thaw() {
			r.release(next)
		}
		next.cancel(ErrShuttingDown)
		r.mu.Lock()
		for next.refs > 0 {
			r.cond.Wait()
		}
		r.mu.Unlock()
		if err := r.closeTenant(next, true); err != nil {
			errs = append(errs, err)
		}
		r.forget(next)
	}
}

// onDisk lists the tenant names in the directory.
func (r *registry) onDisk() ([]string, error) {
	ents, err := os.ReadDir(r.dir)
	if err != nil {
		return nil, fmt.Errorf("read tenant dir: %w", err)
	}
	var names []string
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), fileExt)
		if ok && e.Type().IsRegular() && wire.ValidName(name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names, nil
}

// openCount is how many tenants are open.
func (r *registry) openCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, t := range r.tenants {
		if isClosed(t.ready) && t.openErr == nil && !t.closing {
			n++
		}
	}
	return n
}

// memory sums the open tenants' memory.
func (r *registry) memory() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for _, t := range r.tenants {
		n += t.mem.Load()
	}
	return n
}

// countStatements counts a block's statements by their kinds.
func (r *registry) countStatements(kinds []engine.StatementKind) {
	if r.onStatements != nil {
		r.onStatements(kinds)
	}
}

// setReplToken puts tok in use as the token sent to primaries.
func (r *registry) setReplToken(tok string) { r.replToken.Store(&tok) }

// replTokenNow is the token sent to primaries.
func (r *registry) replTokenNow() string {
	if p := r.replToken.Load(); p != nil {
		return *p
	}
	return ""
}

// statementContext is ctx bounded by --max-statement-time: a statement
// run under it stops at the bound, its error wrapping stmtCause.
func (r *registry) statementContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if r.stmtTime <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, r.stmtTime, r.stmtCause)
}
