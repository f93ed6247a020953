// Package node is fenec-node: one process serving a directory of tenant
// files over HTTP. Every <tenant>.fenec file in the directory is one tenant,
// served below /t/<tenant>/ (queries, blocks, REST reads and writes by
// filter, subscriptions, the change feed, the replication feed) and driven
// by routers through /_admin/ (create, delete, freeze, thaw, image out and
// in, follow, promote, quotas, leases).
//
// The node opens a tenant on first use, closes it when idle or when the
// open tenants pass the memory ceiling, and owns everything a request
// needs around the engine: tokens, idempotency keys, held claims
// (Fenec-Wait), read-your-writes waits (Fenec-After), the write gate
// (frozen, replica, lease) and quotas, metrics, the audit log and graceful
// shutdown. A tenant file's role is its own: a replica's is kept beside it
// (<tenant>.follow) with whether it has heard from the node it follows,
// and its quota beside it too (<tenant>.quota).
//
// Under --sync always a write is answered once its file and every copy
// following it hold it durably, and nothing read shows a write before that:
// a query, REST read, change feed or subscription event that saw it waits
// as the write does. Without that, a value could be read, then lost with
// the node and its copy promoted, and read as never written. A copy that
// makes a write wait out its bound (5 s) is not waited for again until it
// has caught up; the writes answered meanwhile are counted
// (fenec_node_writes_unreplicated_total) and the primary's replication
// status lists each copy streaming from it with lagging true, since a
// failover onto that copy now may lack them.
//
// Under --lease that is not the node's call alone: a tenant whose copy
// the leasing router's list has in step (the directory counts on it) is
// answered only once a copy holds the write, connected or not, or once
// the router has recorded the copy behind at the node's ask (instep.go);
// no failover then promotes that copy unforced, until the node says it
// caught up. Every rule between a landed write and its answer — these
// waits, and the lease checked again as it is answered — is in settle.go.
//
// A replica's file follows its primary: what it keeps beside the file
// (follow.go), the follower's loop (follower.go), and what promoting it
// checks (promote.go).
//
// REST filters (?field=[not.]op.value) become a where clause whose values
// are $n parameters, never statement text. A value is read as JSON when it
// is a number, true, false, null or a "quoted string", and as text
// otherwise: ?code=eq."42" compares with the text 42.
//
// A node has an id of its own (node.id in its directory, GET
// /_admin/node): routers record it and refuse to take one node for two;
// an admin request naming another id in Fenec-Node is refused 409 and
// changes nothing, so a call meant for one node that an address re-pointed
// at another is harmless. An image restored in a tenant's place (PUT
// .../file?replace=true) is replayed whole beside it first: a damaged one
// is refused and leaves the tenant serving as it was. A tenant closed idle
// or at shutdown is checkpointed only where that makes its file smaller
// (or an open would replay more than a checkpoint keeps); compact, the
// statement or POST /_admin/tenants/<t>/compact, rewrites it at once. No
// answer shows where the node keeps its files.
//
// It is not the database itself (package engine is), not the lease
// protocol (package lease judges grants; the node serves and asks it), and
// not the router: it never forwards a request to another node and never
// picks a tenant from anything but the request path.
package node
