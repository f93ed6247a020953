// Package global is fenec's directory: where every node, tenant, region and
// quota is recorded, and who leads (term, leader, longest-lease record).
//
// It has three layers:
//
//   - Directory, a small versioned key/value interface (get with the key's
//     mod revision, list by prefix, put, delete, an all-or-nothing
//     compare-and-swap transaction over several keys, watch from a revision,
//     compact). Two implementations share one test suite: NewMemory, in
//     memory for tests, and EtcdDirectory over go.etcd.io/etcd/client/v3,
//     opened on an existing cluster (OpenEtcd) or on an Embedded member
//     (StartEmbedded), which wraps etcd's server/embed in one owning type.
//   - Store, the typed records of the key layout (meta/term, meta/leader,
//     meta/lease_record_ms, regions/, nodes/, tenants/, quotas/) with their
//     revisions, and Txn, which writes several of them as one transaction
//     conditioned on the revisions the caller read; ClaimLeader and Promote
//     move the lead by compare-and-swap on the term.
//   - Watcher, a router's in-memory copy of a directory kept current by a
//     watch started at the revision of its list, with a lock-free Lookup for
//     forwarding and change notifications carrying old and new tenant records.
//
// It is not the router: it decides nothing about placement, leases or
// failover, it only records the decisions of package region atomically. It
// does not talk to nodes.
package global
