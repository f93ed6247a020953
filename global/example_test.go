package global_test

import (
	"context"
	"fmt"

	"github.com/fenec-go/fenec/global"
)

// A router's failover of one tenant, as the rest of the routers see it.
func Example() {
	ctx := context.Background()
	dir := global.NewMemory() // global.OpenEtcd(ctx, endpoints, global.DefaultPrefix) in production
	defer dir.Close()
	s := global.NewStore(dir)

	for _, n := range []string{"n1", "n2"} {
		if _, err := s.Txn().PutNode(n, 0, global.Node{Addr: "http://" + n, Region: "eu", Lease: true}).Commit(ctx); err != nil {
			panic(err)
		}
	}
	n1, _ := s.GetNode(ctx, "n1")
	t, err := s.PlaceTenant(ctx, "acme", global.Tenant{Node: "n1", State: global.StateActive, Replica: "n2", Lineage: 7}, n1.Rev)
	if err != nil {
		panic(err)
	}

	w := global.StartWatcher(ctx, dir, nil)
	defer w.Close()
	<-w.Ready()
	failovers := make(chan string, 1)
	w.OnTenantChange(func(c global.TenantChange) {
		if from, ok := c.FailedOver(); ok {
			failovers <- c.Name + " failed over from " + from + " to " + c.New.Node
		}
	})

	// The leading router promotes the replica, conditioned on the record it read.
	if _, err := s.Failover(ctx, "acme", t, "n2", 8); err != nil {
		panic(err)
	}
	// Another router acting on the same, now stale, reading changes nothing.
	_, err = s.Failover(ctx, "acme", t, "n2", 9)
	fmt.Println("stale:", err != nil)

	fmt.Println(<-failovers)
	tenant, node, _ := w.Lookup("acme")
	fmt.Println(node.Addr, tenant.FailedFrom, tenant.ForkedHistory)
	// Output:
	// stale: true
	// acme failed over from n1 to n2
	// http://n2 n1 8
}
