// Package leasing is the router's side of --auto-failover: while the
// router leads, it grants every node recorded with lease:true the list of
// tenants the directory places there (a lease.Leaser at the lead's term),
// and fails a node over once its lease lapsed. It also serves the
// forwarder's LeaseRetry on every router, leading or not.
//
// It reaches the router only through Deps — the router's view of its
// directory, its lead (Lead), a transport to the nodes, the failover of a
// node, waiting for the view to hold a change, the region's guard — and
// decides by Deps.Clock alone (Deps.Now is only the wall time a lapse is
// recorded at), so its tests run inside a testing/synctest bubble over an
// in-memory directory. It writes the directory itself only through the
// lead's fenced store: a node taking leases, a copy behind or caught up,
// a node lapsed and its lapse cleared. The router (package
// region) builds it, starts and closes it, tells it of directory changes
// (Poke) and of a handoff's steps (GiveUp, KeepOn, Giving, SettleForce,
// ExtendRecord, Resync), and of a held tenant's wait ended (HeldEnded);
// GET /_shard/leases answers Leases.
//
// # Where each thing lives
//
//   - leasing.go: Deps, Lead, Leasing — its one long-lived goroutine that
//     follows the lead (a lease.Leaser runs while the router leads, at the
//     term it leads at; a node that took a higher term stops it, unless
//     the directory shows the router's own term standing, and then only
//     that node is doubted), the forwarder's LeaseRetry, Leases.
//   - scope.go: which nodes, on what terms (epoch, handoff): the global
//     tier's, a region's router's, a region being given, a forced
//     takeover settled; a node refusing grants for another binding.
//   - lists.go: the list each leased node should hold, from the view (a
//     pure function), and keeping the Leaser's lists in line with it.
//   - failover.go: what a lapsed node's failover does with its tenants
//     (held ones wait off its list), FailoverResult, and the copies'
//     reports of being behind or caught up.
//   - lapsed.go: a node failed over on its lapsed lease recorded lapsed
//     (global.Node.Lapsed), and the mark cleared once it answers again.
//   - probe.go: asking new nodes whether they take leases, and recording
//     those that do.
//   - notify.go: waiting for a node's next answer, and the lease age
//     series.
//   - transport.go: HTTPTransport, grants over HTTP (POST /_admin/lease)
//     and the probe (GET /_admin/lease).
//   - errors.go: the sentinels, which package region answers with too.
//
// # Locks, in order
//
//	Leasing.syncMu → Leasing.mu → lease.Leaser's own (SetList, SetTerms)
//
// Leasing.mu is never held across a failover, a grant or the directory;
// answerNotifier.mu guards its own map and calls nothing that locks.
//
// It is not the lease protocol (package lease: grants, the node's side,
// the pure rules), nor the failover itself (the router's FailoverNode,
// through Deps.Failover), nor the lead's claim or fencing (the router's
// leadership, through Lead). It imports neither package region nor
// region/forward.
package leasing
