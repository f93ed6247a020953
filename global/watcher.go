package global

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Backoff bounds of a Watcher retrying a directory that fails.
const (
	watcherRetryMin = 50 * time.Millisecond
	watcherRetryMax = 5 * time.Second
	// watcherDrain bounds how many waiting watch responses one published
	// view folds in.
	watcherDrain = 256
)

// Watcher keeps an in-memory View of a whole directory current: it lists
// the directory, then watches from the list's revision, so no change between
// the two is missed; when the watch's history was compacted (or the watch
// fails) it lists again. Lookups read an immutable view through an atomic
// pointer and never wait.
type Watcher struct {
	dir Directory
	log *slog.Logger

	view  atomic.Pointer[View]
	told  atomic.Int64 // revision up to which subscribers were told
	ready chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// Guarded by mu:
	subs    map[int]func(TenantChange)
	nextSub int
	advance chan struct{} // closed and replaced whenever a view is published
}

// StartWatcher starts watching d. It runs until ctx ends or Close. It does
// not own d.
func StartWatcher(ctx context.Context, d Directory, log *slog.Logger) *Watcher {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{
		dir:     d,
		log:     log,
		ready:   make(chan struct{}),
		subs:    map[int]func(TenantChange){},
		advance: make(chan struct{}),
	}
	w.ctx, w.cancel = context.WithCancel(ctx)
	w.wg.Go(w.run)
	return w
}

// Close stops the watcher and waits for it. Safe to call more than once.
func (w *Watcher) Close() error {
	w.cancel()
	w.wg.Wait()
	return nil
}

// Ready is closed once the first list arrived.
func (w *Watcher) Ready() <-chan struct{} { return w.ready }

// View returns the current view, nil before Ready.
func (w *Watcher) View() *View { return w.view.Load() }

// Rev returns the revision the view is current to (0 before Ready).
func (w *Watcher) Rev() int64 {
	if v := w.view.Load(); v != nil {
		return v.Rev
	}
	return 0
}

// Lookup returns tenant's record and its node's. ok is false if either is
// unknown (or before Ready).
func (w *Watcher) Lookup(tenant string) (Tenant, Node, bool) {
	v := w.view.Load()
	if v == nil {
		return Tenant{}, Node{}, false
	}
	t, ok := v.Tenant(tenant)
	if !ok {
		return Tenant{}, Node{}, false
	}
	n, ok := v.nodes[t.Node]
	return t, n, ok
}

// WaitRev waits until the view is current to at least rev (a revision the
// caller's own write returned) and the subscribers were told of the changes
// up to it, or ctx ends.
func (w *Watcher) WaitRev(ctx context.Context, rev int64) error {
	for {
		w.mu.Lock()
		adv := w.advance
		w.mu.Unlock()
		if w.told.Load() >= rev {
			return nil
		}
		select {
		case <-adv:
		case <-ctx.Done():
			return ctx.Err()
		case <-w.ctx.Done():
			return ErrClosed
		}
	}
}

// OnTenantChange calls fn, on the watcher's goroutine, with every tenant
// change after the view showing it was published, in revision order. fn
// must return quickly (hand slow work to a goroutine of its own). The
// returned func unsubscribes; a batch already being told may still reach fn
// once after it returns. The first list tells nothing (there is no "before");
// a relist tells every tenant that differs from the view it replaces.
func (w *Watcher) OnTenantChange(fn func(TenantChange)) (unsubscribe func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	id := w.nextSub
	w.nextSub++
	w.subs[id] = fn
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.subs, id)
	}
}

// run lists and watches until the watcher stops.
func (w *Watcher) run() {
	backoff := watcherRetryMin
	for w.ctx.Err() == nil {
		listed, err := w.listAndWatch()
		if w.ctx.Err() != nil {
			return
		}
		if listed {
			backoff = watcherRetryMin // the directory answered: start over
		}
		if errors.Is(err, ErrCompacted) {
			w.log.Info("directory watch compacted, listing again", "err", err)
			backoff = watcherRetryMin
			continue
		}
		w.log.Warn("directory watch ended, listing again", "err", err, "backoff", backoff)
		select {
		case <-time.After(backoff):
		case <-w.ctx.Done():
			return
		}
		backoff = min(backoff*2, watcherRetryMax)
	}
}

// listAndWatch lists the directory, publishes it, and applies the watch from
// the list's revision until the watch fails. listed says the list arrived.
func (w *Watcher) listAndWatch() (listed bool, err error) {
	kvs, rev, err := w.dir.List(w.ctx, "")
	if err != nil {
		return false, err
	}
	v, bad := viewFromList(kvs, rev)
	if len(bad) > 0 {
		w.log.Error("directory records that do not decode, treated as absent", "keys", bad)
	}
	old := w.view.Load()
	var changes []TenantChange
	if old != nil {
		b := &viewBuilder{old: old, v: v}
		b.diffTenants(rev)
		changes = b.changes
	}
	w.publish(v, changes)
	ch, err := w.dir.Watch(w.ctx, "", rev)
	if err != nil {
		return true, err
	}
	for {
		resp, ok := <-ch
		if !ok {
			return true, ErrClosed
		}
		if resp.Err != nil {
			return true, resp.Err
		}
		b := newViewBuilder(w.view.Load())
		b.applyResponse(resp)
		// Fold in what else is waiting, so a burst publishes once.
		for range watcherDrain {
			select {
			case more, ok := <-ch:
				if !ok {
					w.publish(b.v, b.changes)
					return true, ErrClosed
				}
				if more.Err != nil {
					w.publish(b.v, b.changes)
					return true, more.Err
				}
				b.applyResponse(more)
				continue
			default:
			}
			break
		}
		if len(b.bad) > 0 {
			w.log.Error("directory records that do not decode, treated as absent", "keys", b.bad)
		}
		w.publish(b.v, b.changes)
	}
}

func (b *viewBuilder) applyResponse(r WatchResponse) {
	for _, ev := range r.Events {
		b.apply(ev.KV.Key, ev.KV.Value, ev.Type == EventDelete, ev.KV.ModRev)
	}
	if r.Revision > b.v.Rev {
		b.v.Rev = r.Revision
	}
}

// publish swaps the view in, marks Ready, tells the subscribers, and then
// wakes WaitRev: once WaitRev(rev) returns, every subscriber has been told of
// every change up to rev, and Lookup already answered from the new view while
// they were told.
func (w *Watcher) publish(v *View, changes []TenantChange) {
	w.view.Store(v)
	select {
	case <-w.ready:
	default:
		close(w.ready)
	}
	if len(changes) > 0 {
		w.mu.Lock()
		subs := make([]func(TenantChange), 0, len(w.subs))
		for _, fn := range w.subs {
			subs = append(subs, fn)
		}
		w.mu.Unlock()
		for _, c := range changes {
			for _, fn := range subs {
				fn(c)
			}
		}
	}
	w.told.Store(v.Rev)
	w.mu.Lock()
	close(w.advance)
	w.advance = make(chan struct{})
	w.mu.Unlock()
}
