// Package fmap is a read-only mapping of a tenant file shared by reference
// count: the store maps a file to replay it, an HNSW graph served from the
// mapping takes a reference for as long as it reads there, and each search
// takes one for as long as it runs. The last release unmaps.
//
// It is not a cache, nor a writer: nothing ever writes through a mapping
// (it is PROT_READ), and the file under it is never shortened while it is
// mapped (the store writes images to a new file and renames it; the old
// inode lives on until its last mapping goes).
package fmap
