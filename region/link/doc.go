// Package link is a region's leading router's link to the global
// directory (fenec-shard --region R --global URLS; DESIGN.md §7,
// docs/regions.md). While the global tier leases the region, it copies
// the region's records (its nodes, their tenants and quotas, the
// longest-lease record) down into the region's directory, which the
// region's routers forward from, so they go on forwarding while the
// global directory cannot be reached. While the region leases itself, its
// directory is written first and the link copies the records up. Whoever
// leases, it copies the region's far records down (global.Far: the
// tenants of other regions with a copy in this one, and their primaries'
// nodes, under far/), never up. Either
// way it keeps the region record of both directories in line (the newer
// wins; two records whose epochs are too far apart are refused, never
// adopted), and drives the region's side of a handoff: ready, give, wait
// for the taking, take, each a compare-and-swap in the global directory.
//
// It reaches the router only through Deps — the region's directory, an
// opener of the global one, the router's lead (Lead: it runs while the
// router leads and writes through the fenced store), its leasing (Leasing:
// told of a handoff's steps), waiting for the view to hold a change, the
// audit log — and reads time only from Deps.Clock and Deps.Now, so its
// tests run over in-memory directories without a router. The router
// (package region) builds it, runs it (Run), wakes it when a change asks
// for a look (Wake), and reads what a forced takeover needs of it
// (GlobalAnswered, GlobalEpoch) and the global directory for a planned
// handoff's offer (AwaitGlobal).
//
// # Where each thing lives
//
//   - link.go: Deps, Lead, Leasing, Link — Run, its one long-lived
//     goroutine, and each step: the region records in line, the records
//     copied down or up, the series (fenec_router_mirror_*).
//   - follow.go: what the link holds of both directories, listed once and
//     then kept by their watches, so each change is copied from its event
//     (global.Mirror.SyncTracked; global.Far.SyncTracked for the far
//     records, from a set of keys of its own), and its own copies are not
//     copied back.
//   - handoff.go: the region's side of a handoff, and the region records
//     brought in line (reconcile, align, decorate, epochGap).
//   - errors.go: its sentinel.
//
// # Locks
//
// Link.mu guards the fields it names and is held across no call; what the
// link holds of the directories (linkState) is Run's goroutine's alone.
//
// It is not the mirror's rule of which records are a region's
// (global.Mirror), nor the handoff's states (global/handoff.go), nor the
// global tier's steps of a handoff or the route that asks for one
// (package region). It imports neither package region, region/forward nor
// region/leasing.
package link
