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
// A graph may also be saved in two parts (mapped.go, docvec.go): a head
// (WriteHead, version 4: all but the level-0 lists and the vectors) and a
// section (WriteSectionAt: every node's fixed-size level-0 list, for
// Cosine an inverse norm per node, where each live node's vector lies
// among its documents' bytes, the tombstones' vectors, and their
// checksum). LoadMapped reads the head into memory and serves the section
// where it lies — a read-only mapping of the tenant file — after checking
// its sum; AttachPlaces then gives it the live nodes' vectors where the
// section places them, reading no document (places.go), or AttachVectors
// by id (a head of version 3, before places), and it reads each where its
// document keeps it (held once), scaling each by its norm
// as it measures it, to the bit the unit vector it made when the vector
// was added. A head of version 2 (before) comes with a section holding
// every vector, and is served so as it is. Writes since change the graph
// beside it (a list copied out, a new node on the heap; a mapped slot is
// never reused). The mapping is held by reference (Holder): the graph's
// own, given back by Release, and each Search's and Pin's while it runs,
// so the bytes go once the last reader is done. A read that faults on the
// mapping (its file shortened under it) is ErrFault, not a crash.
//
// It is not for storing documents, for choosing which field to index, or
// for persistence of vectors; nor does it lock. Concurrency: Add and Remove
// must not run concurrently with anything else on the same Index; Search,
// Len, Has, MemoryBytes and WriteTo may run concurrently with each other.
// The engine satisfies this by calling writes under its tenant write lock
// and reads under the read lock. The index starts no goroutines.
//
// Defaults (DefaultConfig): M 32, ef_construction 100, ef_search 256. They
// are chosen for the hardest case, random 128-d vectors with values uniform
// in [-1, 1], where a search for 10 at default settings must find at least
// 95% of the exact answer at 20 000 vectors; recall_test.go holds them to
// it. Measured there (cosine; L2 alike): the earlier M 16,
// ef_construction 200, ef_search 64 found 0.51; M 16 needs ef 512 for 0.97;
// M 32 at ef 256 finds 0.98 (0.974 over bench/search's 1 000 queries),
// computing about the same distances a search as M 16 at ef 512 (8 500).
// At 100 000 vectors the two still cost the same (11 700) and find 0.79
// (M 32; 0.784 in bench/search) and 0.78 (M 16): more links a node is
// what a high-dimensional graph lacks, and recall at fixed settings falls
// as the graph grows (bench/search measures it). ef_construction 100
// builds the M 32 graph for about the distances M 16 took at 200 at
// 20 000 vectors (an insert 5 100 against 5 700 for cosine, 9 000 against
// 6 500 for L2) and 1.8 times them at 100 000 (14 000 against 8 000);
// ef_construction 200 would cost 2.4 times at 100 000 for 0.02 more recall.
//
// What the defaults cost: a search computes about five times the
// distances of the earlier defaults (8 500 against 1 800; some 400 µs
// against 80 µs at 20 000 uniform vectors on one core). Level 0 keeps up
// to 64 links a node (260 B, against 132 B): 908 B a 128-d vector in all
// against 766 B, and the saved graph grows with its links (20.6 MB against
// 11.2 MB for 100 000 uniform vectors). A purge step rechooses longer
// lists from more candidates, so each write that carries one does more.
// Real embeddings cluster, and on clustered vectors ef 64 finds 0.995 at
// 100 000 (bench/search): a field that wants faster searches names a
// smaller ef_search (a query, a smaller ef), at its own recall.
//
// On amd64 with AVX2 and FMA the distance kernels run in assembly
// (distance_amd64.s); elsewhere in Go.
package hnsw
