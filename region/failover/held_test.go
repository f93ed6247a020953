package failover

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenec-go/fenec/global"
)

// rig is a Failover over an in-memory directory holding nodes a and b and
// the tenants given (active unless they say); it calls no node (its tenants are either
// held or have nothing to promote). ended records HeldEnded's calls.
type rig struct {
	f     *Failover
	s     *global.Store
	mu    sync.Mutex
	ended []string // guarded by mu
}

func newRig(t *testing.T, tenants map[string]global.Tenant) *rig {
	t.Helper()
	mem := global.NewMemory()
	t.Cleanup(func() { mem.Close() })
	r := &rig{s: global.NewStore(mem)}
	tx := r.s.Txn().
		PutNode("a", 0, global.Node{Addr: "http://a", Region: "eu"}).
		PutNode("b", 0, global.Node{Addr: "http://b", Region: "eu"})
	for name, rec := range tenants {
		if rec.State == "" {
			rec.State = global.StateActive
		}
		tx.PutTenant(name, 0, rec)
	}
	if _, err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.f = New(Deps{
		Changes: func(context.Context) (*global.Store, error) { return r.s, nil },
		OwnNode: func(_ context.Context, s *global.Store, _ string) (*global.Store, error) { return s, nil },
		OpMu:    new(sync.Mutex),
		Settle:  func(context.Context, int64) {},
		HeldEnded: func(tenant string) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.ended = append(r.ended, tenant)
		},
		NodeTimeout: time.Second,
	})
	t.Cleanup(r.f.Close)
	return r
}

// endedOf is what HeldEnded was told so far.
func (r *rig) endedOf() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ended)
}

// waitEnded waits until HeldEnded was told of want, failing t after a while.
func (r *rig) waitEnded(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Equal(r.endedOf(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("HeldEnded told %v, want %v", r.endedOf(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A tenant another operation holds is reported as failed over when that
// operation ends and waited for on a goroutine of the Failover's: Close
// ends the wait, and the leasing is told the tenant is its node's again.
// Once closed, a failover starts no wait and tells the leasing at once.
func TestCloseEndsHeldWaits(t *testing.T) {
	r := newRig(t, map[string]global.Tenant{"t1": {Node: "a", Replica: "b", State: global.StateMoving, Target: "c", HeldBy: global.HoldMove}})
	res := r.f.Node(context.Background(), "a", false)
	if len(res.Promoted) != 0 || len(res.Failed) != 1 || res.Failed[0].Tenant != "t1" ||
		!strings.Contains(res.Failed[0].Why, `held by move: failed over onto "b" when it ends`) {
		t.Fatalf("failover of a held tenant: %+v", res)
	}
	time.Sleep(3 * heldPoll) // the wait reads the tenant, still held, a few times
	if got := r.endedOf(); len(got) != 0 {
		t.Fatalf("HeldEnded told %v while the wait runs", got)
	}
	r.f.Close()
	if got := r.endedOf(); !slices.Equal(got, []string{"t1"}) {
		t.Fatalf("HeldEnded told %v once Close returned, want [t1]", got)
	}
	r.f.Close() // a second Close returns too
	res = r.f.Node(context.Background(), "a", false)
	if len(res.Failed) != 1 || res.Failed[0].Tenant != "t1" {
		t.Fatalf("failover after Close: %+v", res)
	}
	if got := r.endedOf(); !slices.Equal(got, []string{"t1", "t1"}) {
		t.Fatalf("HeldEnded told %v after a failover past Close, want [t1 t1]", got)
	}
}

// A held tenant deleted while its failover waits ends the wait: the
// leasing is told, and nothing is left running for Close.
func TestHeldWaitEndsOnDelete(t *testing.T) {
	r := newRig(t, map[string]global.Tenant{"t1": {Node: "a", Replica: "b", State: global.StateMoving, Target: "c", HeldBy: global.HoldMove}})
	r.f.Node(context.Background(), "a", false)
	at, err := r.s.GetTenant(context.Background(), "t1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.s.Txn().DeleteTenant("t1", at.Rev).Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.waitEnded(t, "t1")
	done := make(chan struct{})
	go func() { r.f.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the wait for a deleted tenant still runs")
	}
}

// A held tenant with no copy is not waited for: the leasing is told at
// once.
func TestHeldWithoutCopyNotWaited(t *testing.T) {
	r := newRig(t, map[string]global.Tenant{"t1": {Node: "a", State: global.StateMoving, Target: "c", HeldBy: global.HoldMove}})
	res := r.f.Node(context.Background(), "a", false)
	if len(res.Failed) != 1 {
		t.Fatalf("failover: %+v", res)
	}
	if got := r.endedOf(); !slices.Equal(got, []string{"t1"}) {
		t.Fatalf("HeldEnded told %v, want [t1] at once", got)
	}
}

// A failover ends a restore's hold rather than wait for it, cancelling the
// restore running here with a RestoreBroken naming tenant and node; a
// tenant it then cannot promote (no copy) is its node's again at once.
func TestFailoverBreaksRestore(t *testing.T) {
	r := newRig(t, map[string]global.Tenant{
		"t1": {Node: "a", HeldBy: HoldRestore},
		"t2": {Node: "b", HeldBy: HoldRestore},
	})
	ctx1, cancel1 := context.WithCancelCause(context.Background())
	defer r.f.Restoring("t1", cancel1)()
	ctx2, cancel2 := context.WithCancelCause(context.Background())
	defer r.f.Restoring("t2", cancel2)()
	res := r.f.Node(context.Background(), "a", false)
	if len(res.Failed) != 1 || res.Failed[0].Tenant != "t1" || !strings.Contains(res.Failed[0].Why, ErrNoReplica.Error()) {
		t.Fatalf("failover: %+v", res)
	}
	var rb *RestoreBroken
	if err := context.Cause(ctx1); !errors.As(err, &rb) || rb.Tenant != "t1" || rb.Node != "a" || !errors.Is(err, ErrRestoreBroken) {
		t.Fatalf("t1's restore ended with %v, want a RestoreBroken of t1 on a", err)
	}
	if ctx2.Err() != nil {
		t.Fatalf("t2's restore, on a node not failed over, ended: %v", context.Cause(ctx2))
	}
	at, err := r.s.GetTenant(context.Background(), "t1")
	if err != nil || at.Value.HeldBy != "" {
		t.Fatalf("t1 after the failover: %+v, %v; want its restore's hold ended", at.Value, err)
	}
	if got := r.endedOf(); !slices.Equal(got, []string{"t1"}) {
		t.Fatalf("HeldEnded told %v, want [t1]", got)
	}
}
