// Package hnsw is fenec's vector index: a hierarchical navigable small
// world graph (HNSW) over fixed-dimension float32 vectors, one per
// document id, for approximate (and, on request, exact) k-nearest-neighbour
// search.
//
// Scores: higher is better. Cosine scores the cosine similarity (vectors
// are normalised as they are added), Dot the dot product, and L2 the
// negative Euclidean distance. Scores are computed in float64 from the
// stored float32 vectors; ties are broken by id, ascending.
//
// Vectors are copied into one contiguous slice owned by the index. An
// update (Add of an id already present with a different vector) retires
// the old node as a tombstone and inserts the new vector as a fresh node
// with links chosen for it, so nothing reaches the id by its old vector;
// Remove retires the node the same way. Tombstones are traversed by
// searches (they keep the graph navigable) but never returned. Once they
// pass PurgeFraction of the graph a purge begins and runs a few nodes per
// Add or Remove (purgeStepNodes), so no single write stalls on it: every
// neighbour list naming a tombstone is chosen again from the live
// neighbours and the tombstones' live neighbours, and when the walk is done
// the tombstones' slots are reused. Purge finishes one at once.
//
// Searches with a filter plan by a sample: when few rows pass, or scoring
// the rows that pass costs less than walking a graph mostly made of rows
// that do not, they are scored exhaustively (an exact answer); otherwise
// the walk collects only passing rows. Either way a search returns
// min(K, rows passing) hits, falling back to an exhaustive scan when a walk
// comes back short.
//
// WriteTo saves the graph as links — levels, neighbour lists, entry point,
// tombstones and configuration — without the live vectors, which the engine
// already keeps in its documents; Load restores it without rebuilding a
// link, reading each live vector through a callback. Tombstones' vectors
// are the exception: they belong to no document, so the graph carries them.
// The saved form is versioned, length-prefixed and checksummed.
//
// It is not for storing documents, for choosing which field to index, or
// for persistence of vectors; nor does it lock. Concurrency: Add and Remove
// must not run concurrently with anything else on the same Index; Search,
// Len, Has, MemoryBytes and WriteTo may run concurrently with each other.
// The engine satisfies this by calling writes under its tenant write lock
// and reads under the read lock. The index starts no goroutines.
//
// On amd64 with AVX2 and FMA the distance kernels run in assembly
// (distance_amd64.s); elsewhere in Go.
package hnsw
