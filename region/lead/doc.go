// Package lead is whether a router takes changes to its directory: it
// claims the leader record at start (every claim moves the term on), is
// promoted on request, and writes every change through a global.Store
// fenced on the term it leads at, so a promotion of another router fails
// every write of this one. It stops leading at once when the router's view
// shows a later term or another leader, when a fenced write fails on a
// moved term (Lost), or when a node fenced its term (StepDown).
//
// It reaches the router only through Deps: the directory's store, the
// router's view of it, the router's name and its directory's, a wall clock
// (the Since of a leader record, never decided by) and a logger. It starts
// no goroutine. The router (package region) maps its errors to statuses;
// the leasing (region/leasing) and the link (region/link) take a *Lead as
// their Lead.
//
// It is not the leasing of nodes (region/leasing) nor the route that asks
// for a promotion (region's shard.go): it only holds and checks the lead.
//
// # Where each thing lives
//
//   - lead.go: Deps, Lead — Claim, Promote, the fence, Changes, Status,
//     StepDown, Lost.
//   - errors.go: ErrNotLeader, ErrNotReady, NotLeaderError.
package lead
