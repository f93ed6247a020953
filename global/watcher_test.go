package global

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/fenec-go/fenec/internal/testkit"
)

func startWatcher(t testing.TB, d Directory) *Watcher {
	t.Helper()
	w := StartWatcher(context.Background(), d, nil)
	t.Cleanup(func() { w.Close() })
	select {
	case <-w.Ready():
	case <-testCtx(t).Done():
		t.Fatal("watcher never ready")
	}
	return w
}

// changeLog gathers the changes a subscriber saw.
type changeLog struct {
	mu  sync.Mutex
	got []TenantChange
}

func (l *changeLog) add(c TenantChange) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, c)
}

func (l *changeLog) all() []TenantChange {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]TenantChange(nil), l.got...)
}

func TestWatcher(t *testing.T) {
	cases := []struct {
		name string
		fn   func(t *testing.T, open func(testing.TB) Directory)
	}{
		{"ReadyAndLookup", testWatcherReady},
		{"Updates", testWatcherUpdates},
		{"Notifications", testWatcherNotifications},
		{"Relist", testWatcherRelist},
		{"Close", testWatcherClose},
	}
	forEachDirectory(t, func(t *testing.T, open func(testing.TB) Directory) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) { c.fn(t, open) })
		}
	})
}

func testWatcherReady(t *testing.T, open func(testing.TB) Directory) {
	s := newTestStore(t, open(t))
	placeT1(t, s)
	if _, err := s.Promote(testCtx(t), "r1"); err != nil {
		t.Fatal(err)
	}
	w := StartWatcher(context.Background(), s.Directory(), nil)
	t.Cleanup(func() { w.Close() })
	<-w.Ready()
	tn, node, ok := w.Lookup("t1")
	if !ok || tn.Node != "n1" || node.Addr != "http://n1" || tn.Replica != "n2" {
		t.Fatalf("lookup t1: %+v %+v %v", tn, node, ok)
	}
	if _, _, ok := w.Lookup("nope"); ok {
		t.Fatal("lookup of an unknown tenant succeeded")
	}
	v := w.View()
	if v.Term != 1 || v.Leader.Router != "r1" || v.NumTenants() != 1 {
		t.Fatalf("view term %d leader %+v tenants %d", v.Term, v.Leader, v.NumTenants())
	}
	// A one-off load reads the same records; a record that does not decode
	// is named and left out.
	if _, err := s.Directory().Put(testCtx(t), TenantKey("junk"), []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	lv, bad, err := LoadView(testCtx(t), s.Directory())
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) != 1 || bad[0] != TenantKey("junk") {
		t.Fatalf("undecodable keys %v, want [%s]", bad, TenantKey("junk"))
	}
	lt, _ := lv.Tenant("t1")
	wt, _ := v.Tenant("t1")
	ln, _ := lv.Node("n1")
	if lt != wt || ln.Addr != "http://n1" || lv.Term != 1 || lv.NumTenants() != 1 {
		t.Fatalf("loaded view: t1 %+v n1 %+v term %d tenants %d", lt, ln, lv.Term, lv.NumTenants())
	}
	testkit.Eventually(t, testTimeout, func() error {
		if w.Rev() < lv.Rev {
			return fmt.Errorf("watcher at %d, behind %d", w.Rev(), lv.Rev)
		}
		return nil
	})
	if _, ok := w.View().Tenant("junk"); ok {
		t.Fatal("watcher holds a tenant that does not decode")
	}
}

func testWatcherUpdates(t *testing.T, open func(testing.TB) Directory) {
	s := newTestStore(t, open(t))
	w := startWatcher(t, s.Directory())
	ctx := testCtx(t)
	revs := seedNodes(t, s)
	v, err := s.PlaceTenant(ctx, "t1", Tenant{Node: "n1", State: StateActive}, revs["n1"])
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WaitRev(ctx, v.Rev); err != nil {
		t.Fatal(err)
	}
	if tn, n, ok := w.Lookup("t1"); !ok || tn != v.Value || n.Addr != "http://n1" {
		t.Fatalf("after WaitRev(%d): %+v %+v %v", v.Rev, tn, n, ok)
	}
	// A tenant whose node is unknown is not found.
	rev, err := s.Txn().PutTenant("orphan", 0, Tenant{Node: "gone", State: StateActive}).Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Many changes at once all arrive.
	for i := range 50 {
		if rev, err = s.Txn().PutTenant(fmt.Sprintf("b%d", i), 0, Tenant{Node: "n2", State: StateActive}).Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WaitRev(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := w.Lookup("orphan"); ok {
		t.Fatal("lookup of a tenant on an unknown node succeeded")
	}
	if got := w.View().NumTenants(); got != 52 {
		t.Fatalf("%d tenants in view, want 52", got)
	}
	view := w.View()
	if on := view.TenantsOn("n1"); fmt.Sprint(on) != "[t1]" {
		t.Fatalf("tenants on n1: %v", on)
	}
	if on := view.TenantsOn("n2"); len(on) != 50 || on[0] != "b0" || on[1] != "b1" || on[2] != "b10" {
		t.Fatalf("tenants on n2: %d, first %v", len(on), on[:3])
	}
	if on := view.TenantsOn("n3"); len(on) != 0 {
		t.Fatalf("tenants on n3: %v", on)
	}
	if err := s.RemoveTenant(ctx, "t1", v, 0); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, testTimeout, func() error {
		if _, _, ok := w.Lookup("t1"); ok {
			return fmt.Errorf("t1 still found")
		}
		return nil
	})
	if on := w.View().TenantsOn("n1"); len(on) != 0 {
		t.Fatalf("a later view still lists %v on n1", on)
	}
	if on := view.TenantsOn("n1"); fmt.Sprint(on) != "[t1]" {
		t.Fatalf("the earlier view changed: %v on n1", on)
	}
}

func testWatcherNotifications(t *testing.T, open func(testing.TB) Directory) {
	s := newTestStore(t, open(t))
	w := startWatcher(t, s.Directory())
	ctx := testCtx(t)
	var log changeLog
	unsub := w.OnTenantChange(log.add)
	v := placeT1(t, s)
	moving, err := s.BeginMove(ctx, "t1", v, "n3")
	if err != nil {
		t.Fatal(err)
	}
	moved, err := s.FinishMove(ctx, "t1", moving)
	if err != nil {
		t.Fatal(err)
	}
	failed, err := s.Failover(ctx, "t1", moved, "n2", 42)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveTenant(ctx, "t1", failed, 0); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, testTimeout, func() error {
		if n := len(log.all()); n != 5 {
			return fmt.Errorf("%d changes seen, want 5", n)
		}
		return nil
	})
	got := log.all()
	if got[0].Old != nil || *got[0].New != v.Value || got[0].Rev != v.Rev {
		t.Fatalf("placement change %+v", got[0])
	}
	if *got[1].Old != v.Value || *got[1].New != moving.Value {
		t.Fatalf("move start change %v", got[1])
	}
	if _, ok := got[2].FailedOver(); ok || got[2].New.Node != "n3" {
		t.Fatalf("move finish change %v, a failover: %v", got[2], ok)
	}
	if from, ok := got[3].FailedOver(); !ok || from != "n3" || got[3].New.Node != "n2" || got[3].Rev != failed.Rev {
		t.Fatalf("failover change %v: from %q %v", got[3], from, ok)
	}
	if got[4].New != nil || *got[4].Old != failed.Value {
		t.Fatalf("removal change %v", got[4])
	}
	for i := 1; i < len(got); i++ {
		if got[i].Rev <= got[i-1].Rev {
			t.Fatalf("changes out of order: %d after %d", got[i].Rev, got[i-1].Rev)
		}
	}
	unsub()
	rev, err := s.Txn().PutTenant("t9", 0, Tenant{Node: "n1", State: StateActive}).Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WaitRev(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if n := len(log.all()); n != 5 {
		t.Fatalf("unsubscribed but saw %d changes", n)
	}
}

// compactingDir makes the first watch fail as compacted once the test lets
// it, so the watcher lists again after changes it never saw as events.
type compactingDir struct {
	Directory
	once    sync.Once
	release chan struct{}
	err     error // what the first watch ends with (default ErrCompacted)
}

func (d *compactingDir) Watch(ctx context.Context, prefix string, after int64) (<-chan WatchResponse, error) {
	first := false
	d.once.Do(func() { first = true })
	if !first {
		return d.Directory.Watch(ctx, prefix, after)
	}
	ch := make(chan WatchResponse, 1)
	go func() {
		defer close(ch)
		select {
		case <-d.release:
			err := d.err
			if err == nil {
				err = fmt.Errorf("test: %w", ErrCompacted)
			}
			ch <- WatchResponse{Err: err}
		case <-ctx.Done():
		}
	}()
	return ch, nil
}

func testWatcherRelist(t *testing.T, open func(testing.TB) Directory) {
	for _, err := range []error{nil, errors.New("test: member lost its leader")} {
		t.Run(fmt.Sprint(err), func(t *testing.T) {
			testWatcherRelistAfter(t, &compactingDir{Directory: open(t), release: make(chan struct{}), err: err})
		})
	}
}

// testWatcherRelistAfter checks that changes made while the watcher's first
// watch stalls, and then fails with d.err, reach it by a relist.
func testWatcherRelistAfter(t *testing.T, d *compactingDir) {
	s := newTestStore(t, d)
	v := placeT1(t, s)
	ctx := testCtx(t)
	w := startWatcher(t, d)
	var log changeLog
	w.OnTenantChange(log.add)
	// Changes the watcher's (stalled) watch never delivers.
	failed, err := s.Failover(ctx, "t1", v, "n2", 7)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := s.Txn().PutTenant("t2", 0, Tenant{Node: "n3", State: StateActive}).Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tn, _, _ := w.Lookup("t1"); tn.Node != "n1" {
		t.Fatalf("watcher saw a change its watch never sent: %+v", tn)
	}
	close(d.release)
	if err := w.WaitRev(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if tn, _, ok := w.Lookup("t1"); !ok || tn != failed.Value {
		t.Fatalf("after relist t1 = %+v, want %+v", tn, failed.Value)
	}
	if _, _, ok := w.Lookup("t2"); !ok {
		t.Fatal("after relist t2 missing")
	}
	got := log.all()
	byName := map[string]TenantChange{}
	for _, c := range got {
		byName[c.Name] = c
	}
	if from, ok := byName["t1"].FailedOver(); !ok || from != "n1" {
		t.Fatalf("relist change for t1 %v not a failover from n1 (%v)", byName["t1"], got)
	}
	if c := byName["t2"]; c.Old != nil || c.New == nil || c.New.Node != "n3" {
		t.Fatalf("relist change for t2 %v", c)
	}
	if len(got) != 2 {
		t.Fatalf("relist notified %d changes, want 2: %v", len(got), got)
	}
	// The watch that follows the relist delivers later changes.
	if _, err := s.Txn().PutTenant("t3", 0, Tenant{Node: "n3", State: StateActive}).Commit(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, testTimeout, func() error {
		if _, _, ok := w.Lookup("t3"); !ok {
			return fmt.Errorf("t3 not seen")
		}
		return nil
	})
}

func testWatcherClose(t *testing.T, open func(testing.TB) Directory) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	d := open(t)
	w := StartWatcher(context.Background(), d, nil)
	<-w.Ready()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.WaitRev(testCtx(t), w.Rev()+1); err != ErrClosed {
		t.Fatalf("WaitRev after close: %v, want ErrClosed", err)
	}
	// A watcher whose context ends stops too.
	ctx, cancel := context.WithCancel(context.Background())
	w2 := StartWatcher(ctx, d, nil)
	<-w2.Ready()
	cancel()
	w2.Close()
	d.Close()
}
