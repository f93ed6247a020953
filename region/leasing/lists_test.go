package leasing

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/lease"
)

func TestGainedAndLists(t *testing.T) {
	for _, c := range []struct {
		old, list []string
		want      bool
	}{
		{nil, nil, false},
		{nil, []string{"a"}, true},
		{[]string{"a", "b"}, []string{"a"}, false},
		{[]string{"a"}, []string{"a", "c"}, true},
	} {
		if got := gained(c.old, c.list); got != c.want {
			t.Errorf("gained(%v, %v) = %v, want %v", c.old, c.list, got, c.want)
		}
	}
}

// A tenant whose move froze its source for the switch (switching, then
// promoting) is off its source's list — a source started again meanwhile,
// its freeze forgotten, never takes its writes — and on it again at once
// when the move is put back; while its copy follows it stays on it. The
// source's other tenants are as they were.
func TestLeasingSwitchingMoveOffItsSourceSim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newLeaseSim(t)
		s.lead.lead(t)
		s.l.Start(t.Context())
		s.addNode("a", true)
		s.addNode("b", true)
		s.sleepTo(200 * time.Millisecond)
		s.place("m", "a", "")
		s.place("other", "a", "")
		ctx := context.Background()
		st, _ := s.lead.Changes(ctx)
		at, err := st.GetTenant(ctx, "m")
		if err != nil {
			t.Fatal(err)
		}
		step := func(name string, fn func(global.Versioned[global.Tenant]) (global.Versioned[global.Tenant], error)) {
			t.Helper()
			next, err := fn(at)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			at = next
			s.settle(at.Rev)
			s.sleepTo(s.clock.Now() + simLeaseLen/3 + s.l.Tick()) // a round: the list reaches a
		}
		listed := func(v *global.View) bool {
			sc := globalScope(v, scopeState{})
			_, ok := slices.BinarySearch(leaseLists(v, sc.terms, nil, 0)["a"].Tenants, "m")
			return ok
		}
		stepTo := func(to string) func(global.Versioned[global.Tenant]) (global.Versioned[global.Tenant], error) {
			return func(at global.Versioned[global.Tenant]) (global.Versioned[global.Tenant], error) {
				return st.StepMove(ctx, "m", at, to, 7)
			}
		}

		step("begin", func(at global.Versioned[global.Tenant]) (global.Versioned[global.Tenant], error) {
			return st.BeginMove(ctx, "m", at, "b")
		})
		step(global.MoveFollowing, stepTo(global.MoveFollowing))
		if !listed(s.w.View()) || !s.net.writable("a", "m") {
			t.Fatal("a tenant whose copy follows is off its source's list")
		}
		for _, to := range []string{global.MoveSwitching, global.MovePromoting} {
			step(to, stepTo(to))
			if listed(s.w.View()) || s.net.writable("a", "m") {
				t.Fatalf("a tenant %s is on its source's list", to)
			}
			if !s.net.writable("a", "other") || s.net.writable("b", "m") {
				t.Fatalf("%s: a's other tenant not writable, or the target writes m", to)
			}
			// The source started again: its first grants name m no more.
			s.net.mu.Lock()
			s.net.nodes["a"].lease = lease.NewNodeLease(lease.Binding{}, nil)
			s.net.mu.Unlock()
			s.sleepTo(s.clock.Now() + simLeaseLen/3 + s.l.Tick())
			if s.net.writable("a", "m") || !s.net.writable("a", "other") {
				t.Fatalf("%s: a started again writes m (%v) or not its other tenant (%v)", to, s.net.writable("a", "m"), s.net.writable("a", "other"))
			}
		}
		back, err := st.AbortMove(ctx, "m", at)
		if err != nil {
			t.Fatal(err)
		}
		s.settle(back.Rev)
		s.sleepTo(s.clock.Now() + s.l.Tick())
		if !listed(s.w.View()) || !s.net.writable("a", "m") {
			t.Fatal("a move put back: its tenant not back on its source's list at once")
		}
	})
}
