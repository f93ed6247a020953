// Package store is the tenant file underneath the engine: one file, one
// writer (an exclusive flock), an append-only log of framed, checksummed
// records. It owns the file format (header, frames, images), the change
// sequence (seq), the lineage of histories, replay on open (a torn tail cut
// off, a damaged file refused, a tail lost past its last fsync bounded and
// forked past), blocks too large for memory spilled into
// the file before they land (all or nothing all the same), sync policy and
// group commit, checkpoint and compaction into side files renamed into
// place, installing an image, and the raw record feed replicas follow.
//
// It is not the database: record bodies and image state are opaque bytes
// the engine writes and reads. It knows nothing of collections, queries,
// HTTP, nodes or routers.
package store
