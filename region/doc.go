// Package region is the router, fenec-shard: the control plane over a
// directory (package global) around the data plane in region/forward.
//
// It is not the forwarding path: what happens to a request below
// /t/<tenant>/ is region/forward's, which this package feeds with
// placements (placement.go) and tells of failovers (Cut). Nor is it the
// cross-tenant merge: region/merge's rules run on the rows query.go reads.
// Nor is it the leasing: region/leasing grants nodes their leases and
// fails lapsed ones over, through the dependencies leases.go hands it.
// Nor is it the client of nodes' admin API: region/nodeapi's Client makes
// every call to a node's /_admin/ routes (Router.nodes). Nor where a
// tenant's other copies live across regions: region/copies places read
// copies and a surviving tenant's voting copy, through the dependencies
// shard_copies.go hands it.
// Nor is it a region's link to the global directory: region/link copies
// records between the two directories and takes the region's steps of a
// handoff, through the dependencies link.go hands it. Nor does it hold
// the lead itself: region/lead claims it, is promoted, fences every change
// on the term and steps down, over the store and view router.go hands it.
// Nor does it hold its certificate, the directory's key and password or
// the router token: region/trust loads and reloads them, closes the
// directory, checks and seals its node records, and judges a call's
// token, through the dependencies trust.go hands it.
// Nor is it a node's failover: region/failover holds a node's tenants,
// promotes their copies and points the directory at them, ends a
// restore's hold on the node, and says the 503 of a tenant left on a
// lapsed node, through the dependencies failover.go hands it.
// It talks to nodes only over HTTP, and to the directory only through
// package global.
//
// # Where each thing lives
//
// The router and its wiring:
//   - router.go: Router — Start (the directory, the watcher, the
//     forwarder, the lead, leasing, the link or the repair loop, then
//     serving), Close, ServeHTTP (/t/ to the forwarder, /_shard/,
//     /_metrics, /_health).
//   - trust.go: the router's certificate, the directory's secrets and
//     the router token (package region/trust, Router.trust) wired over
//     the router's logger, goroutines, lead and view; Reload; and
//     authorize, which answers a call refused on the router's own surface
//     (403, 401, 429 with Retry-After), counts it and audits it.
//   - router_config.go: Config, DefaultConfig, AddFlags, Validate (the
//     TLS and exposure checks region/trust's, over trustConfig).
//   - router_errors.go: the control plane's sentinels and its one table
//     from error to status (shardStatus).
//   - control_metrics.go: the control plane's series. The audit log of
//     every change, and of refusals counted per address and minute, is
//     package internal/audit, the nodes' own.
//   - audit_control.go: the audit lines of the router's own doing —
//     every region record it writes, a node refusing its grants for
//     another binding, a forced takeover.
//   - placement.go: the forwarder's Placements over the watcher (on a
//     region's router, its far tenants too: global.Far), the
//     watcher callback that cuts requests out to a failed-over node, and
//     measuring nodes for a placement (least bytes on disk).
//   - identity.go: nodes' ids — one node under one name, and asking both
//     nodes who they are before anything on either is deleted. The calls
//     to nodes' /_admin/ routes (bounded, with the request's id) and the
//     one spelling of an address are region/nodeapi's.
//
// /_shard/, route by route:
//   - shard.go: serveShard — the token, reads on every router, changes
//     only on the leader (fenced on its term), audit.
//   - answer.go: cpJSON and cpError, how every route writes its answer
//     or its refusal (by router_errors.go's table).
//   - notfound.go: the directory's not-found said as the route's own
//     (unknown node, unknown tenant, by the name the API uses).
//   - settle.go: waiting, bounded, until the router's view holds a change
//     it made, so a read on this router right after sees it.
//   - shard_nodes.go, shard_tenants.go: nodes and tenants (record,
//     forget, place, delete).
//   - move.go: a tenant's move (freeze, image, flip, delete source), and
//     recovering moves left unfinished by a router that stopped.
//   - quota.go: quotas, stored in the directory and sent to the nodes;
//     a PUT conditioned on the quota read (If-Match on GET's ETag).
//   - shard_copies.go: PUT /_shard/tenants/<t>/read-copies and /survive,
//     their bodies checked here, the rest region/copies' (Router.copies,
//     whose Point the repair loop calls every round).
//   - repair.go: the repair (package region/repair, Router.repair)
//     wired over the router's directory, lead, opMu, ownership, identity
//     check, quotas, moves' sources, copies, audit log and clock. It
//     places, makes and deletes tenants' voting copies (after a
//     placement, a move, a failover) and runs the loop that has
//     failed-over nodes' stale copies follow again, retries copies owed
//     (read again from the directory at each term), replaces copies their
//     nodes report damaged and deletes a move's source left frozen. It
//     reaches the router only through repair.Deps.
//   - replica.go: PUT /_shard/nodes/<n>'s standby and POST
//     /_shard/replicas, answered over the repair.
//   - failover.go: region/failover wired over the router's lead, node
//     client, opMu, view, quotas, repair and leasing; FailoverNode
//     (its answer, FailoverResult, is region/leasing's type, which fails
//     nodes over through it) and POST /_shard/nodes/<n>/failover over it.
//   - shard_file.go: a tenant's image out (backup) and in (restore, as a
//     new history, its lineage recorded; a failover of its node ends its
//     hold and cancels it rather than wait for it: region/failover's
//     Restoring).
//   - query.go: the cross-tenant read (POST /_shard/query): reads each
//     tenant through its node's admin read route, bounded by timeout_ms
//     each, merges with region/merge.
//
// Who leads, and leases (docs/regions.md is the protocol):
//   - router.go builds the lead (package region/lead: claiming it,
//     every claim moving the term on, the fenced Store every change goes
//     through, stepping down when the view shows a later term or a node
//     took a higher one); shard.go's promotion route asks it to promote.
//   - owner.go: sides (Router.sides), which side owns a region's
//     placements (the side leasing it), the 409 naming where to send a
//     change, the store guarded on the region record every change writes
//     through, the fence a promotion carries.
//   - leases.go: the leasing (--auto-failover, package region/leasing)
//     wired over the router's lead, view, transport and failover, the
//     forwarder's LeaseRetry, and GET /_shard/leases. The leasing itself
//     reaches the router only through leasing.Deps and the lead only
//     through leasing.Lead (a *lead.Lead); the router keeps the
//     clock it hands it (Router.clock), which the handoff's steps read.
//   - handoff.go: POST /_shard/regions/<r>/handoff and a forced
//     takeover; handoff_global.go: the global tier's steps of a handoff.
//     The rules both sides share are package global's.
//   - link.go: a region's leading router's link to the global directory
//     (--global, package region/link) wired over the router's directory,
//     lead, leasing, audit log and clock: the region records kept in
//     line, the region's records copied down or up by who leases, its far
//     records (global.Far) down whoever leases, the region's steps of a
//     handoff. The link reaches the router only through link.Deps and the
//     lead only through link.Lead (the same *lead.Lead).
//
// # Locks, in order
//
// A lock to the left may be held while one to its right is taken, never
// the other way round; every other lock is a leaf, under which nothing
// else is locked:
//
//	Router.opMu (failover.Deps.OpMu) → repair.Repairer.mu
//	leasing.Leasing.syncMu → leasing.Leasing.mu → lease.Leaser's own (SetList, SetTerms)
//
// opMu serialises the changes that must not interleave on the leader (a
// placement choosing a node against that node's removal, a move's start,
// a failover's release and flip, recording a node against another name
// for it, the repair's deletion of a move's source left frozen), and is
// held across their directory calls (and, recording a node, across asking
// nodes recorded before ids who they are; the repair, across its one
// node call). region/failover takes opMu only to release a batch of
// promoted tenants onto their copies, telling the repair loop under it
// (Repair.FailedOff, region/repair's Repairer.FailedOff), never across a
// node call; region/failover's own Failover.mu and its restores' mu are
// leaves. region/repair takes opMu through repair.Deps.OpMu, across its
// one node call, and holds Repairer.mu across no call out of it. leasing.Leasing.mu is never held across a
// failover, a grant or the directory: it is released before the Failover
// dependency (FailoverNode), which takes opMu. lead.Lead.mu, link.Link.mu,
// globalHandoffs.mu, audit.Log's mu, region/leasing's answerNotifier.mu
// and the bad-token book's mu (region/trust's back-off; the trust holds
// no lock of its own) guard their own fields and call nothing that locks.
// No router lock is held while
// the forwarder is called, and the forwarder holds none of its own while
// it calls back (LeaseRetry, Placements); inside region/forward the order
// is pool.mu → flight.mu.
package region
