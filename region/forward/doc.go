// Package forward is the router's data plane: it sends each request below
// /t/<tenant>/ to the node that holds the tenant, byte for byte, over its
// own HTTP/1.1 client and pooled connections per node, and passes the
// answer back.
//
// It retries a request only where the node cannot have run it or running
// it twice is harmless (attempt.go), answers its own refusals from one
// table (status.go), cuts out what is in flight to a node its tenants were
// failed over from (cut.go), asks again for a write a new primary refused
// for want of its lease (lease.go), and counts what it does (metrics.go).
// It learns where tenants are through the Placements interface and about
// leasing through LeaseRetry; the control plane (package region)
// implements both and calls Cut. It imports neither the directory nor the
// router, and never parses a query, a body or an answer beyond the HTTP
// framing.
//
// It is not a general reverse proxy: it speaks HTTP/1.1 to nodes only,
// forwards no upgrades, and buffers request bodies (they are bounded) so
// that any resend replays them unchanged.
package forward
