// Package global is fenec's directory: where every node, tenant, region and
// quota is recorded, and who leads (term, leader, longest-lease record).
// Routers (package region) place, move and fail over tenants through it; the
// global tier and every region keep one, with the same layout.
//
// It has three layers:
//
//   - Directory, a small versioned key/value interface: get with the key's
//     mod revision, list by prefix (with the revision of the read), put,
//     delete, an all-or-nothing transaction conditioned on mod revisions
//     (ErrConflict when one moved), watch after a revision (so a watch
//     started at a list's revision misses nothing; ErrCompacted when that
//     history is gone), compact and Close. Two implementations pass one
//     shared test suite: Memory (NewMemory), for tests, and EtcdDirectory
//     over go.etcd.io/etcd/client/v3, opened on an existing cluster
//     (OpenEtcd) or on an Embedded member (StartEmbedded), which wraps etcd's
//     server/embed in one owning type (Ready, Err, idempotent Close).
//   - Store, the typed records of the key layout under a prefix (default
//     /fenec/): meta/term, meta/leader, meta/lease_record_ms, regions/<r>,
//     nodes/<n>, tenants/<t>, quotas/<t>, standbys/<n> (a node's standby,
//     which the view leaves out). Reads return each record with its
//     revision (Versioned); Txn writes several as one transaction
//     conditioned on the revisions read, and helpers (PlaceTenant,
//     Failover, BeginMove/StepMove/FinishMove/AbortMove, Hold/Release,
//     RemoveTenant) build the usual ones. ClaimLeader and Promote move the lead by
//     compare-and-swap on the term; a Store Fenced on the term it read
//     writes nothing once a promotion moved the term on; one Guarded on a
//     region record writes nothing once a handoff moved the record on.
//     LeaseRecordStore raises and lowers the longest-lease record;
//     ClaimName names the directory (meta/name). The handoff of a region's
//     leasing is a sequence of states of its region record (Offer, Ready,
//     Give, Take, RollBack, Force: handoff.go), each written by one
//     compare-and-swap (UpdateRegion, TakeHandoff, AdoptRegion); Mirror
//     copies a region's records between the global directory and the
//     region's, down or up: Sync reads both whole, SyncTracked copies only
//     the keys a watch changed, from the records a Tracked holds of each
//     directory (tracked.go). Far copies into a region's directory,
//     under far/, the records of the tenants of other regions with a copy
//     in it and of their primaries' nodes (far.go), kept apart from the
//     region's own (View.FarTenant, View.FarNode).
//   - Watcher, a router's in-memory copy of a whole directory: it lists,
//     watches from the list's revision and lists again after a compaction,
//     publishing immutable Views through an atomic pointer, so Lookup costs
//     a couple of map reads and never waits. Subscribers get every tenant
//     change with its old and new record (TenantChange.FailedOver tells a
//     failover from a move). LoadView reads a View once.
//
// It is not the router: it decides nothing about placement, leases or
// failover and talks to no node; it records the router's decisions
// atomically and tells the routers about them.
package global
