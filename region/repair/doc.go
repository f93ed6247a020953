// Package repair is where a tenant's voting copy is placed, made and kept:
// the node that takes it (its primary's standby, else under --replicas
// the other node of its region holding the fewest copies; a node of
// another region for a tenant set to survive its region), making it
// caught up with its primary before the directory records it, deleting
// the copy it replaces, and what becomes of it after a placement and a
// move (docs/http.md: PUT /_shard/nodes/<n>'s "standby", POST
// /_shard/replicas). And the router's repair loop, which runs
// while the router leads: a node failed over that answers again has its
// stale copies follow the tenants' new primaries, the copies owed (a
// placement's, a move's, a failover's, read again from the directory at
// each term) are asked again with a back-off, a copy its node reports
// damaged is replaced, and a moved tenant's source its move left frozen
// is deleted.
//
// It reaches the router only through Deps: the directory's unfenced
// store, the node client (package region/nodeapi), the lead, the
// operations' lock, the router's ownership of a region, its identity
// check (asking both nodes who they are before a file is deleted), its
// measure of nodes' bytes, its quotas, its moves' sources still to be
// deleted, its read copies (region/copies, whose Point the loop calls
// every round), its view, its audit log and its clock. The directory
// store each change goes through is passed per call (the leader's,
// fenced on its term).
//
// # Where each thing lives
//
//   - repair.go: Deps, Repairer (Start, Close), the loop, FailedOff and
//     Later (what a failover, a move, a placement owe it), the copies owed.
//   - rejoin.go: a failed-over node's stale copies followed again or
//     deleted; damaged copies replaced.
//   - replica.go: PickReplica, AddReplica, RecordLineage, AwaitCopy,
//     RemoveStale, AfterPlace, AfterMove, ReplicateAll (POST
//     /_shard/replicas).
//   - collect.go: the deletion of a move's source left frozen, and the
//     audit entries of what the repair does on its own.
//   - errors.go: the sentinels, which package region answers with too.
//
// Lock order: the router's operations' lock (Deps.OpMu) before
// Repairer.mu, which guards the loop's own state only and is never held
// across a call to a node, the directory or a dependency.
//
// It is not the failover (package region's failover.go promotes a copy
// and tells the repair with FailedOff), nor the /_shard/ routes (package
// region decodes and answers them), nor a tenant's copies in other
// regions than its primary's (region/copies), nor the node's side of
// following (package node). It imports neither package region,
// region/forward, region/copies nor node.
package repair
