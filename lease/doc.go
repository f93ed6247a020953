// Package lease is fenec's lease protocol: the numbered grants a leading
// router sends each node, the node's judgement of them on its boot clock, and
// the router's judgement of when a node it cannot renew has certainly lost its
// lease and may be failed over.
//
// The protocol is data plus pure functions with time passed in:
//
//   - [NodeLease] is the node's side: [NodeLease.Handle] takes a [Grant] at
//     the boot-clock moment the node answers it and says what it took
//     ([Answer]); [NodeLease.Writable] says whether a tenant may take a write
//     at a given moment.
//   - [Tracker] is the router's side for one node: which grant to send next,
//     what its answers and give-ups mean, and [Tracker.Lapsed].
//
// A grant carries copy state with its list, not only tenants: of the
// tenants it names, those whose copy the directory counts on holding every
// write the node answers ([Grant].InStep), those whose copy it records
// behind, with the seq the node asked at ([Grant].Behind), and the node
// each tenant's replica follows under ([Grant].Replicas); a list's id
// covers all of it, so a change of copy state is a new list.
// [NodeLease.Step] says what a tenant's copy is held to under the list
// taken. An answer carries the node's asks back: a copy to record behind
// ([Answer].Behind) and one caught up again ([Answer].Caught), which the
// Leaser hands to its Reports callback.
//
// Around that core sits a small runtime for the router, [Leaser], which
// renews every node on a goroutine of its own, bounds each call, raises and
// lowers the directory's longest-lease record through [RecordStore], and calls
// a failover callback for a node that lapsed. The wire types ([Grant],
// [Answer], the refusals in errors.go and [ReplyStatus]/[DecodeReply]) are
// shared by the node and the router; [Handler] serves /_admin/lease over a
// NodeLease, and [TermFile] keeps a node's highest term on disk.
//
// A grant names its router's directory (Grant.Dir) and the epoch of the
// node's region's leasing (Grant.Epoch). A node is bound to one directory
// ([Binding], kept on disk by [TermFile] with its highest term): it
// compares terms only with that directory's, refuses grants of an earlier
// epoch, and takes a grant of another directory only when it carries a
// [Handoff] from its own, at a higher epoch (a *[DirectoryError]
// otherwise, which does not depose the router that meets it: the router
// counts that node alone as not answering). A node refuses a grant more
// than [EpochMargin] epochs past its own, or naming a term or epoch past
// [MaxNumber] (a *[BoundError]), and [NextEpoch] never wraps: a grant is
// sent by whoever holds the admin token, so one node's word never moves
// more than that node. A router
// taking a region over counts its nodes by the giver's record until they
// ran one of its leases ([NodeTerms], [Leaser.ExtendRecord]). docs/regions.md
// is the protocol around it.
//
// Time is always injected: the node measures on [BootClock] (CLOCK_BOOTTIME,
// which counts suspend), the router on [MonoClock]; tests pass a
// [ManualClock] or run under testing/synctest.
//
// This package is a leaf: it imports nothing of fenec's. It does not check
// the admin token (package node does, before Handler), it is not the HTTP
// transport that carries grants (package region implements [Transport]), and
// it does not decide what to do with a lapsed node's tenants: it only says
// that the node lapsed, and stops naming them.
package lease
