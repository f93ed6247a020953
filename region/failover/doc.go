// Package failover fails a node's tenants over to their copies: by hand
// (POST /_shard/nodes/<n>/failover, which package region serves) or on a
// lapsed lease (package region/leasing, through its Deps.Failover). Each
// tenant of the node is held in the directory, its copy promoted (the node
// sent the tenant's lineage and the history its primary forked at its last
// failover, and a fence naming the directory, the region's leasing epoch
// and the lead's term), and the directory pointed at the copy, in batches:
// one transaction holds a batch, one call per copy node promotes it, and
// one transaction per copy node releases its tenants onto it as soon as
// it answered (a copy node lost too holds up only its own tenants). A
// tenant another operation holds is failed over when that operation ends,
// onto the copy it had then; a restore's hold is not waited for but ended,
// and the restore cancelled (restore.go).
//
// It also says what a router answers for a tenant left on a node recorded
// lapsed (lapsed.go): 503 at once, naming the tenant, the node, its region
// and since when, rather than a dial to a node gone.
//
// It reaches the router only through Deps: the lead's fenced store, the
// router's ownership of a node's region, the node client (package
// region/nodeapi), the router's opMu, the promotion's fence, the view and
// waiting for it, carrying a quota, the repair loop (Repair) and the
// leasing (HeldEnded). The router (package region) builds it, closes it,
// serves the route over Node and tells it of the restores it runs
// (Restoring).
//
// # Where each thing lives
//
//   - failover.go: Deps, Repair, Failover (New, Close), Node — a node's
//     tenants and the nodes read (at once, with the guard on its region),
//     sorted into batches, held ones waited for.
//   - batch.go: a batch held, promoted and pointed at its copies per copy
//     node, each step's time logged ("failover: copies released"); the
//     fall back to one tenant at a time when a transaction loses a race.
//   - held.go: waiting, on a goroutine the Failover owns, for the
//     operation holding a tenant to end.
//   - restore.go: the restores running on this router, and a failover
//     ending a restore's hold (HoldRestore, RestoreBroken).
//   - lapsed.go: Unavailable, a lapsed node's tenant as the forwarder
//     answers it.
//   - answering.go: Answering, whether a node answers its admin token now.
//   - errors.go: the sentinels, which package region answers with too.
//
// # Locks, in order
//
//	Deps.OpMu (the router's opMu) → the repair loop's own (Repair.FailedOff)
//
// OpMu is held only while a batch is released onto its copies (the
// directory's transaction; the view settling on it is waited for after),
// never across a call to a node: the failovers of nodes lapsing together
// (a region lost whole) each wait for the others' transactions only, not
// for their views. A failover that fell back to one tenant at a time
// holds it across each tenant's two writes and their settling. Failover.mu guards closed and is a leaf; restores.mu guards the
// restores running and is a leaf (a restore's cancel func takes no lock).
//
// It is not the leasing (package region/leasing decides when a node has
// lapsed and calls Node), nor the cut of requests in flight to a failed
// node (package region's placement.go, on the watcher's change), nor the
// repair of the copies a failover used up (package region's repair loop,
// told through Repair). It imports neither package region nor node.
package failover
