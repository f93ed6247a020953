// Package wire is the contract between a fenec node and those that drive
// it: the names and values of the Fenec-* headers (among them those of
// bounded-staleness reads: Fenec-Max-Staleness and Fenec-Copy-Wait, read
// by ParseMillis, Fenec-Staleness-Ms, and a copy's decline,
// StatusDeclined with a Declined body), the bodies and answers of the
// node's admin API (/_admin/: quota, usage, follow, promote, replication
// status, stats, freeze, the node's id, a restore in place, compact), and
// AdminClient, a typed client of that API, which names the node it means
// (HeaderNode) when it knows its id.
// The node decodes what the router, the CLI and the tests send with these
// types, and they decode its answers with the same ones, so a field is
// named once. ValidName is the one rule for a tenant's, node's, region's
// or router's name, checked alike by each of them.
//
// It is a leaf: the standard library only, nothing of fenec's. It is not
// the data API's bodies (queries and rows are the engine's, passed
// through untouched), nor the grant (package lease holds both sides of
// POST /_admin/lease), nor the router's /_shard/ API.
package wire
