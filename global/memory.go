package global

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
)

// memoryHistory bounds the events a Memory keeps for watches; older ones are
// compacted away as etcd's auto-compaction would.
const memoryHistory = 1 << 16

// Memory is an in-memory Directory with revisions and watches, for tests and
// single-process use. Writers never wait for watchers: each watch has its own
// goroutine reading the shared event history.
type Memory struct {
	ctx    context.Context // ends at Close; stops every watch goroutine
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// Guarded by mu:
	rev        int64         // current revision
	data       map[string]KV // live keys
	history    []Event       // events with revision >= firstKept, in order
	firstKept  int64         // oldest revision still watchable
	historyCap int           // events kept before the older half is compacted
	changed    chan struct{} // closed and replaced on every change
	closed     bool
}

var _ Directory = (*Memory)(nil)

// NewMemory returns an empty in-memory directory at revision 1 (as a fresh
// etcd is), whose keys are relative to no prefix.
func NewMemory() *Memory {
	ctx, cancel := context.WithCancel(context.Background())
	return &Memory{
		ctx:        ctx,
		cancel:     cancel,
		rev:        1,
		data:       make(map[string]KV),
		firstKept:  1,
		historyCap: memoryHistory,
		changed:    make(chan struct{}),
	}
}

// Get implements Directory.
func (m *Memory) Get(ctx context.Context, key string) (KV, error) {
	if err := ctx.Err(); err != nil {
		return KV{}, err
	}
	if key == "" {
		return KV{}, ErrInvalidKey
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return KV{}, ErrClosed
	}
	kv, ok := m.data[key]
	if !ok {
		return KV{}, ErrNotFound
	}
	return copyKV(kv), nil
}

// List implements Directory.
func (m *Memory) List(ctx context.Context, prefix string) ([]KV, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, 0, ErrClosed
	}
	var out []KV
	for k, kv := range m.data {
		if strings.HasPrefix(k, prefix) {
			out = append(out, copyKV(kv))
		}
	}
	slices.SortFunc(out, func(a, b KV) int { return strings.Compare(a.Key, b.Key) })
	return out, m.rev, nil
}

// Put implements Directory.
func (m *Memory) Put(ctx context.Context, key string, value []byte) (int64, error) {
	return m.Txn(ctx, nil, []Op{OpPut(key, value)})
}

// Delete implements Directory.
func (m *Memory) Delete(ctx context.Context, key string) (int64, error) {
	return m.Txn(ctx, nil, []Op{OpDelete(key)})
}

// Txn implements Directory.
func (m *Memory) Txn(ctx context.Context, conds []Cond, ops []Op) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := checkTxn(conds, ops); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, ErrClosed
	}
	for _, c := range conds {
		if m.data[c.Key].ModRev != c.ModRev {
			return 0, fmt.Errorf("%q: %w", c.Key, ErrConflict)
		}
	}
	next := m.rev + 1
	var events []Event
	for _, op := range ops {
		if op.Delete {
			if _, ok := m.data[op.Key]; !ok {
				continue
			}
			delete(m.data, op.Key)
			events = append(events, Event{Type: EventDelete, KV: KV{Key: op.Key, ModRev: next}})
			continue
		}
		kv := KV{Key: op.Key, Value: slices.Clone(op.Value), ModRev: next}
		m.data[op.Key] = kv
		events = append(events, Event{Type: EventPut, KV: kv})
	}
	if len(events) == 0 {
		return m.rev, nil
	}
	m.rev = next
	m.history = append(m.history, events...)
	if len(m.history) > m.historyCap {
		m.compactLocked(m.history[len(m.history)/2].KV.ModRev)
	}
	close(m.changed)
	m.changed = make(chan struct{})
	return m.rev, nil
}

// checkTxn refuses empty keys and a key written twice in one transaction
// (etcd refuses the latter too).
func checkTxn(conds []Cond, ops []Op) error {
	for _, c := range conds {
		if c.Key == "" || c.ModRev < 0 {
			return ErrInvalidKey
		}
	}
	seen := make(map[string]bool, len(ops))
	for _, op := range ops {
		if op.Key == "" {
			return ErrInvalidKey
		}
		if seen[op.Key] {
			return fmt.Errorf("%q written twice in one transaction: %w", op.Key, ErrInvalidKey)
		}
		seen[op.Key] = true
	}
	return nil
}

// Compact implements Directory.
func (m *Memory) Compact(ctx context.Context, rev int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if rev > m.rev {
		return ErrFutureRevision
	}
	if rev <= m.firstKept {
		return ErrCompacted
	}
	m.compactLocked(rev)
	return nil
}

// compactLocked drops the history before rev.
func (m *Memory) compactLocked(rev int64) {
	i := sort.Search(len(m.history), func(i int) bool { return m.history[i].KV.ModRev >= rev })
	m.history = slices.Clone(m.history[i:])
	m.firstKept = rev
}

// Watch implements Directory.
func (m *Memory) Watch(ctx context.Context, prefix string, after int64) (<-chan WatchResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	out := make(chan WatchResponse)
	m.wg.Go(func() { m.runWatch(ctx, prefix, after, out) })
	return out, nil
}

// runWatch feeds one watch from the history until ctx or the directory ends.
func (m *Memory) runWatch(ctx context.Context, prefix string, after int64, out chan<- WatchResponse) {
	defer close(out)
	for {
		batches, upTo, changed, err := m.pending(prefix, after)
		if err != nil {
			m.send(ctx, out, WatchResponse{Err: err})
			return
		}
		for _, b := range batches {
			if !m.send(ctx, out, b) {
				return
			}
		}
		after = upTo
		select {
		case <-changed:
		case <-ctx.Done():
			return
		case <-m.ctx.Done():
			return
		}
	}
}

// pending returns the events after rev under prefix, one batch per revision,
// the revision they were read up to, and the channel that closes on the next
// change.
func (m *Memory) pending(prefix string, after int64) ([]WatchResponse, int64, <-chan struct{}, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, 0, nil, ErrClosed
	}
	if after+1 < m.firstKept {
		return nil, 0, nil, fmt.Errorf("watch after %d, oldest kept %d: %w", after, m.firstKept, ErrCompacted)
	}
	i := sort.Search(len(m.history), func(i int) bool { return m.history[i].KV.ModRev > after })
	var out []WatchResponse
	for _, ev := range m.history[i:] {
		if !strings.HasPrefix(ev.KV.Key, prefix) {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Revision == ev.KV.ModRev {
			out[n-1].Events = append(out[n-1].Events, copyEvent(ev))
			continue
		}
		out = append(out, WatchResponse{Events: []Event{copyEvent(ev)}, Revision: ev.KV.ModRev})
	}
	return out, m.rev, m.changed, nil
}

func (m *Memory) send(ctx context.Context, out chan<- WatchResponse, r WatchResponse) bool {
	select {
	case out <- r:
		return true
	case <-ctx.Done():
		return false
	case <-m.ctx.Done():
		return false
	}
}

// Close implements Directory: it ends every watch and waits for their
// goroutines.
func (m *Memory) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
	return nil
}

func copyKV(kv KV) KV {
	kv.Value = slices.Clone(kv.Value)
	return kv
}

func copyEvent(ev Event) Event {
	ev.KV = copyKV(ev.KV)
	return ev
}
