// Package badtoken is the bad-token back-off fenec's servers share: after
// Limit refusals within Window from one client (on one surface, as the
// caller keys it), that client is answered "too many" for Penalty,
// whatever token it sends. A client that presented the right token lately
// (a holder, for HolderFor) is never refused unheard: its right token is
// taken even while its key is held off, so a router's peers, or a node's
// leasing router and copies, are never locked out by a stranger's guesses
// from their address.
//
// It keeps the books, and reads what both servers read alike: a Bearer
// token and a request's remote host. Which key a request counts against,
// which token is right and how a refusal is answered are the caller's
// (node/auth.go, region/auth.go). It is not a rate limit on right tokens.
package badtoken
