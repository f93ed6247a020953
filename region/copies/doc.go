// Package copies is where a tenant's other copies live across regions:
// its read copies, one per region named or on the nodes named, made
// caught up with the primary before the directory records them and
// pointed at its primary again after a failover or a move
// (docs/regions.md, "Reads near the reader"); and its survival, a voting
// copy kept in another region for a tenant that must outlive its region's
// loss, or brought home when it need not ("What a tenant survives").
//
// Both are the global tier's: set by its leading router, only for tenants
// and on nodes of regions it leases (GloballyLeased), so that one
// directory places them and follows every failover and move of their
// primary. Whether a read copy's answer is fresh enough is the copy's to
// prove (package node, Fenec-Staleness-Ms): nothing here decides it.
//
// It reaches the router only through Deps: the node client (package
// region/nodeapi), the router's ownership of a region, its identity check
// (asking both nodes who they are before a file is deleted), its voting
// copies (placing, making, awaiting and deleting one), waiting for its
// view, and how it says a record is missing or held. The directory store
// each change goes through is passed per call (the leader's, fenced on its
// term). The router (package region) serves PUT
// /_shard/tenants/<t>/read-copies and /survive over it, checking each
// request's body, and its repair loop calls Point every round.
//
// # Where each thing lives
//
//   - copies.go: Deps, Copies, GloballyLeased.
//   - readcopy.go: Set (a tenant's read copies made and dropped), and the
//     ReadCopies answer.
//   - readregions.go: ByRegion, the node of each region named to hold a
//     read copy.
//   - point.go: Point, read copies told to follow their primary anew.
//   - survive.go: SetSurvive, RegionCandidates (where a copy of a tenant
//     to survive its region may go), RefuseRegionalLeasing.
//   - errors.go: the sentinels, which package region answers with too.
//
// It is not the placement of a tenant or of its voting copy in its own
// region (package region/repair, reached through Deps), nor the
// node's side of following (package node). It imports neither package
// region, region/forward nor node.
package copies
