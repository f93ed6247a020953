// Package fmap is a read-only mapping of a tenant file shared by reference
// count: the store maps a file to replay it, an HNSW graph and a
// collection's documents served from the mapping take a reference for as
// long as they read there, each search takes one for as long as it runs,
// and a read's rows encoded after its lock is given back one until they
// are. The last release unmaps. A mapping does not hold the flock the
// store takes on the file (Map).
//
// It is not a cache, nor a writer: nothing ever writes through a mapping
// (it is PROT_READ), and the file under it is never shortened while it is
// mapped (the store writes images to a new file and renames it; the old
// inode lives on until its last mapping goes).
package fmap
