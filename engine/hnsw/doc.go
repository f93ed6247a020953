// Package hnsw is fenec's vector index: a hierarchical navigable small
// world graph (HNSW) over fixed-dimension float32 vectors, one per
// document id, for approximate (and, on request, exact) k-nearest-neighbour
// search.
//
// Scores: higher is better. Cosine scores the cosine similarity (vectors
// are normalised as they are added), Dot the dot product, and L2 the
// negative Euclidean distance.
//
// Vectors are copied into one contiguous slice owned by the index. An
// update (Add of an id already present) retires the old node as a
// tombstone and inserts the new vector under a fresh node with links built
// for it; Remove retires the node the same way. Tombstones are traversed by
// searches but never returned, and once they pass a fraction of the graph
// they are purged: every neighbour list that names one is rebuilt from the
// live neighbours and their neighbours, and the slots are reused.
//
// WriteTo saves the graph as links — levels, neighbour lists, entry point,
// tombstones and configuration — without the live vectors, which the engine
// already keeps in its documents; Load restores it without rebuilding a
// link, reading each live vector through a callback. Tombstones' vectors
// are the exception: they belong to no document, so the graph carries them.
//
// It is not for storing documents, for choosing which field to index, or
// for persistence of vectors; nor does it lock. Concurrency: Add and Remove
// must not run concurrently with anything else on the same Index; Search,
// Len, Has and WriteTo may run concurrently with each other. The engine
// satisfies this by calling writes under its tenant write lock and reads
// under the read lock. The index starts no goroutines.
package hnsw
