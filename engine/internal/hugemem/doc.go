// Package hugemem makes the large arrays a tenant loads (an HNSW graph's
// vectors and links, an image's graph as read) on the Go heap, asking the
// kernel to back them with huge pages.
//
// Loading a tenant writes tens of megabytes of memory the process has not
// touched before, and on a machine where a first touch of a page is dear
// (a virtual machine whose hypervisor takes a fault of its own for each
// one) most of a load's time goes to those faults: one per 4 KB page,
// against one per 2 MB huge page. Transparent huge pages are often given
// only to memory that asks for them (madvise mode), and the Go runtime
// does not ask. An array made here is asked for while still untouched, so
// its first writes fault in huge pages.
//
// Whether that pays depends on the host, so the advice is off until
// Advise turns it on (fenec-node --huge-pages). Where the hypervisor
// backs the guest's memory page by page and the guest hands freed memory
// back to it (free page reporting, as Firecracker guests do), a huge page
// is cut from the large free blocks that were handed back, and its first
// touch is the slowest of all: measured on such a guest, 200 MB of fresh
// memory took 0.7-1.0 s to touch in huge pages against 0.09-0.12 s in
// 4 KB pages, and a move onto a node process that never held the tenant
// 806-956 ms with the advice against 460-572 ms without.
//
// The arrays stay ordinary Go slices: the garbage collector owns them,
// and nothing has to be freed by hand. It is not an allocator: arrays
// below Min are made as make makes them, and where the advice is refused
// (a kernel without transparent huge pages, or a system other than Linux)
// the array is made as make makes it.
package hugemem
