// Package engine is one tenant's database in one file: an append-only log
// of framed, checksummed records (package store) replayed into memory,
// collections and their indexes, the query language's executor (package
// fql parses), the change sequence, the lineage, images and compaction,
// and the hooks a server needs (write gate, quota, watchers, raw records
// for replication).
//
// What it holds, and how:
//
//   - A collection's documents are those of the last image, read where
//     the mapped file holds them through a table of ids and offsets
//     (doctable.go), and the writes since, in an id-ordered B-tree of
//     changes over it (a document written, a tombstone for one deleted);
//     every read, index build, image and count goes through one accessor
//     that merges the two in id order. Each document's values are encoded
//     in one byte slice, decoded as they are read (strings point into it
//     when it is the heap's; a mapped document's are copied out). Indexes: @hash and
//     @unique (hash maps), @sorted and @ttl (B-trees), @text (BM25, package
//     text), @hnsw (graphs, package hnsw), and a hash index on a lookup's
//     field. All but the graphs are built from the documents on their
//     first use (collection.hashOf, sortedOf, textIndex.index), not as
//     the tenant opens or the index is created; until then writes leave
//     them be, after it they keep them in step, and MemoryBytes counts an
//     index once built. Indexes only narrow the candidates: every
//     candidate is checked against the whole where clause, so an answer
//     never depends on which index the planner picked.
//   - A block (Exec's one statement, Batch's many) runs under the write
//     lock against the live state, remembering an undo step for every
//     change; it is encoded as one binary record, asked of the gate and
//     the quota with its exact framed length, appended, and only then
//     shown to watchers. Any failure undoes it all, a panic in a hook
//     too (the lock is given back): memory and file are as they were.
//   - Opening replays the file's last image and the records after it,
//     read from the mapped file. Of an image of FNI6 or FNI5, each
//     collection's table is checked (ids in order, offsets within its
//     section) and no document is decoded or copied; a document a record
//     writes is copied into the changes. Of an older image each document
//     copies its own bytes, as every record's does. An @hnsw graph is not
//     copied: its level-0 lists (its section) are read where the mapped
//     file holds them, their checksum checked first, its live nodes'
//     vectors where their documents keep them (each vector held once).
//     Of FNI6 the section says where each vector lies in the documents
//     section, so the graph is attached without reading a document; of
//     FNI5 and older every document is read to give the graph its own.
//     A read of a mapped document or graph that faults (the file
//     shortened under the node by another program) is ErrFault, not
//     SIGBUS (fault.go). The mapping
//     lives as long as a table, a graph, a search or a read's rows still
//     to encode holds it (mapping.go; the format and what is checked when
//     in docs/design.md). A checkpoint maps the file it wrote, swaps each
//     graph for one served from it and, under the write lock, each
//     collection's table and changes for the new table.
//     A file that lost writes it may have answered (under SyncEvery,
//     stopped without closing) is then rewritten as one image past them,
//     in a new history, its id counters moved on as far as its seq: no
//     seq or id is given twice.
//   - seq moves by one per document written or deleted and per schema
//     change; a block is numbered by its last.
//   - An image (checkpoint, compact, WriteImage) streams the schemas, the
//     id counters, the live documents and each HNSW graph (head and
//     section: image.go, image_write.go, image_read.go); no other index
//     is written (each is built on its first use). The compact statement (Exec, or a Batch
//     of it alone) rewrites the file as one image and nothing before it;
//     Shrink, what a server runs as a tenant closes, checkpoints only
//     where the file comes out smaller or an open would otherwise replay
//     more records than a checkpoint keeps, so closing never grows a
//     small file. A block spilled into the file and then refused is cut
//     off it again: no dead bytes stay for a quota to count.
//   - Rows whose @ttl has passed are hidden from every read at once; a
//     sweeper goroutine (owned by DB, stopped by Close) deletes them later
//     as ordinary blocks.
//   - A statement stops when its context ends (stop.go): every few hundred
//     rows, comparisons or vectors it looks, and a stopped read answers
//     nothing, a stopped block lands nothing. What bounds a statement's
//     time is its caller's (the node's --max-statement-time), not the
//     engine's.
//   - A read's rows can be encoded after its lock is given back, a few at
//     a time (ReadStream, answer.go): documents are never changed in
//     place, so holding them holds the state the read saw, at 8 bytes a
//     row.
//
// It knows nothing of HTTP, nodes or routers.
package engine
