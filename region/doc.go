// Package region is the router, fenec-shard: the control plane over a
// directory (package global) — /_shard/, leases, failover, moves, replica
// repair, the mirror, the cross-tenant read — around the data plane in
// region/forward, which sends each request below /t/<tenant>/ to its node.
//
// It is not the forwarding path (region/forward) nor the cross-tenant
// merge's rules: it feeds the one placements and cuts, and runs the other
// on the rows it reads.
package region
