// Package nodeapi is the router's client for nodes' admin API (the
// /_admin/ routes): a Client over the admin API's client (package wire)
// that bounds every short call by one timeout, sends the id of the request
// that asked along (WithRequestID), names the node's recorded id so that
// another node reached at its address refuses the call, and refuses to
// send anything to a record the router cannot use (global.UsableNode).
// Every failure is ErrNodeCall, wrapping the wire's (a *wire.Error when the
// node answered).
//
// It also holds the one spelling of a node's address the directory keeps
// (NormalizeAddr, SameAddr).
//
// # Where each thing lives
//
//   - client.go: Client, its transport, and the calls the router makes
//     (create, remove, freeze, images, replication, follow, promote,
//     quotas, the admin read route, a node's id).
//   - addr.go: NormalizeAddr and SameAddr.
//   - errors.go: the sentinels, which package region answers with too.
//
// It is not what the router decides with those answers: which node is
// asked, and what a node's id must be (package region's identity.go, which
// writes the directory), nor the lease grants (package region/leasing's
// transport). It imports neither package region, region/forward nor node.
package nodeapi
