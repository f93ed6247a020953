// Package engine is one tenant's database in one file: an append-only log
// of framed, checksummed records replayed into memory, collections and
// their indexes, the query language, the change sequence, the lineage,
// images and compaction, and the hooks a server needs (write gate, quota,
// watchers, raw records for replication).
//
// It knows nothing of HTTP, nodes or routers.
package engine
