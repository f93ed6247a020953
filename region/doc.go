// Package region is the router, fenec-shard: it sends each request below
// /t/<tenant>/ to the node that holds the tenant, and (in other files) runs
// the router's control plane: /_shard/, leases, failover, moves, the mirror.
//
// The forwarding path (forward*.go, pool*.go, cut*.go) passes a request on
// byte for byte over its own HTTP/1.1 client and pooled connections per
// node, retries it only where the node cannot have run it or running it
// twice is harmless, and cuts out what is in flight to a node its tenants
// were failed over from. It takes placements through the small Placements
// interface and never parses a query, a body or an answer beyond the
// HTTP framing.
//
// It is not a general reverse proxy: it speaks HTTP/1.1 to nodes only,
// forwards no upgrades, and buffers request bodies (they are bounded) so
// that any resend replays them unchanged.
package region
