package global

import (
	"context"
	"fmt"
	"testing"
)

// benchView fills a memory directory with n tenants on 16 nodes and returns
// a ready watcher over it.
func benchWatcher(b *testing.B, n int) (*Store, *Watcher) {
	b.Helper()
	d := NewMemory()
	b.Cleanup(func() { d.Close() })
	s := NewStore(d)
	ctx := context.Background()
	for i := range 16 {
		if _, err := s.Txn().PutNode(fmt.Sprintf("n%d", i), 0, Node{Addr: "http://x", Region: "eu"}).Commit(ctx); err != nil {
			b.Fatal(err)
		}
	}
	for i := range n {
		t := Tenant{Node: fmt.Sprintf("n%d", i%16), State: StateActive, Lineage: uint64(i)}
		if _, err := s.Txn().PutTenant(fmt.Sprintf("t%d", i), 0, t).Commit(ctx); err != nil {
			b.Fatal(err)
		}
	}
	w := StartWatcher(ctx, d, nil)
	b.Cleanup(func() { w.Close() })
	<-w.Ready()
	return s, w
}

// BenchmarkLookup is the router's per-request cost of finding a tenant's
// node, from many goroutines at once.
func BenchmarkLookup(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("tenants=%d", n), func(b *testing.B) {
			_, w := benchWatcher(b, n)
			names := make([]string, 1024)
			for i := range names {
				names[i] = fmt.Sprintf("t%d", (i*7919)%n)
			}
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if _, _, ok := w.Lookup(names[i%len(names)]); !ok {
						b.Fatal("tenant not found")
					}
					i++
				}
			})
		})
	}
}

// BenchmarkLookupWorkingSet is one lookup at a time over n tenants with
// how many distinct tenants are asked: the view's size alone against the
// share of it the asking touches (what a profile of the lookup at 100 000
// tenants needs: bench/lookup-profile.txt).
func BenchmarkLookupWorkingSet(b *testing.B) {
	for _, c := range []struct{ n, asked int }{{10, 10}, {100000, 10}, {100000, 4096}, {100000, 100000}} {
		b.Run(fmt.Sprintf("tenants=%d/asked=%d", c.n, c.asked), func(b *testing.B) {
			_, w := benchWatcher(b, c.n)
			names := make([]string, max(4096, c.asked))
			for i := range names {
				names[i] = fmt.Sprintf("t%d", (i*7919)%c.asked)
			}
			b.ResetTimer()
			for i := range b.N {
				if _, _, ok := w.Lookup(names[i%len(names)]); !ok {
					b.Fatal("tenant not found")
				}
			}
		})
	}
}

// BenchmarkWatcherApply is the cost of one tenant change reaching the
// watcher's view (write, watch, copy of one shard, publish), with n tenants.
func BenchmarkWatcherApply(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("tenants=%d", n), func(b *testing.B) {
			s, w := benchWatcher(b, n)
			ctx := context.Background()
			b.ResetTimer()
			for i := range b.N {
				t := Tenant{Node: fmt.Sprintf("n%d", i%16), State: StateActive}
				val, err := encode(t)
				if err != nil {
					b.Fatal(err)
				}
				rev, err := s.Directory().Put(ctx, TenantKey(fmt.Sprintf("t%d", i%n)), val)
				if err != nil {
					b.Fatal(err)
				}
				if err := w.WaitRev(ctx, rev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTxn is one conditioned tenant update (read revision, swap) on
// each directory: the cost of one step of a failover or move.
func BenchmarkTxn(b *testing.B) {
	for _, impl := range implementations {
		b.Run(impl.name, func(b *testing.B) {
			s := NewStore(impl.open(b))
			ctx := context.Background()
			revs := seedNodes(b, s)
			v, err := s.PlaceTenant(ctx, "t1", Tenant{Node: "n1", State: StateActive}, revs["n1"])
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				to := "n2"
				if i%2 == 1 {
					to = "n1"
				}
				if v, err = s.Failover(ctx, "t1", v, to, uint64(i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
