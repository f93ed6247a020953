// Package forwarded is what a router adds to a request it forwards to a
// node, and what the node checks of it: the address of the client the
// router took the request from (Fenec-Client), and a proof that a router
// holding the node's admin token named it (Fenec-Router-Proof). A node
// keys its bad-token back-off on that client rather than on the router's
// own address, so one client's bad tokens slow that client, never the
// router in front of every client.
//
// The router drops both headers from what a client sends before it adds
// its own, so a client can neither forge nor see them, and a node trusts
// Fenec-Client only beside a proof that matches its own admin token. The
// proof is a keyed hash of a fixed label under the token, not the token:
// a proof seen on the way grants no admin rights. It authenticates no
// client, and carries no data token: a forwarded request still needs the
// client's own token.
//
// It holds the proof alone: the headers' names, with the other contracts
// between node and router, are package wire's.
package forwarded

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"

	"github.com/fenec-go/fenec/wire"
)

// The headers a router adds to every request it forwards to a node (their
// names are the wire package's, with the other Fenec-* headers).
const (
	// HeaderClient names the client's address (an IP) as the router saw it.
	HeaderClient = wire.HeaderClient
	// HeaderProof is Proof(the node's admin token).
	HeaderProof = wire.HeaderRouterProof
)

// proofLabel is what the proof is a keyed hash of; changing it would make
// every router's proofs wrong to every node.
const proofLabel = "fenec router forwards for a client v1"

// Proof is the value of HeaderProof for a node whose admin token is token:
// HMAC-SHA256 of a fixed label keyed by the token, in hex. An empty token
// has no proof ("").
func Proof(token string) string {
	if token == "" {
		return ""
	}
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte(proofLabel))
	return hex.EncodeToString(m.Sum(nil))
}
