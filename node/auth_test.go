package node

import (
	"errors"
	"net/http"
	"testing"

	"github.com/fenec-go/fenec/internal/forwarded"
)

// guardReq is a request from remote (an IP) bearing token ("" none) and,
// when client is not "", a router's proof and client header.
func guardReq(remote, token, proof, client string) *http.Request {
	r, _ := http.NewRequest("GET", "/", nil)
	r.RemoteAddr = remote + ":4242"
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	if proof != "" {
		r.Header.Set(forwarded.HeaderProof, proof)
		r.Header.Set(forwarded.HeaderClient, client)
	}
	return r
}

// strikeOut sends five bad tokens on surface s.
func strikeOut(t *testing.T, g *guard, r *http.Request, s surface) {
	t.Helper()
	for i := range badTokenLimit {
		if err := g.check(r, s, "right"); !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("bad token %d: %v", i+1, err)
		}
	}
}

// A router's proof makes the node count strikes against the client it
// names: a client's bad tokens through the router hold that client off,
// not the router's other clients, and not the router's own address.
func TestGuardKeysOnTheForwardedClient(t *testing.T) {
	now := time_(0)
	g := newGuard(now.get, "admin")
	proof := forwarded.Proof("admin")
	const router = "10.0.0.9"

	strikeOut(t, g, guardReq(router, "", proof, "203.0.113.5"), surfaceData)
	if err := g.check(guardReq(router, "right", proof, "203.0.113.5"), surfaceData, "right"); !errors.Is(err, ErrBackoff) {
		t.Fatalf("the striking client with the right token: %v, want held off", err)
	}
	for _, r := range []*http.Request{
		guardReq(router, "right", proof, "203.0.113.6"), // another client of the router
		guardReq(router, "right", "", ""),               // the router's address itself
	} {
		if err := g.check(r, surfaceData, "right"); err != nil {
			t.Fatalf("%s (%s): %v", r.RemoteAddr, r.Header.Get(forwarded.HeaderClient), err)
		}
	}
	var be backoffError
	err := g.check(guardReq(router, "right", proof, "203.0.113.5"), surfaceData, "right")
	if !errors.As(err, &be) || be.RetryAfter() <= 0 || be.RetryAfter() > badTokenPenalty {
		t.Fatalf("held off with %v", err)
	}
	now.add(61)
	if err := g.check(guardReq(router, "right", proof, "203.0.113.5"), surfaceData, "right"); err != nil {
		t.Fatalf("after the penalty: %v", err)
	}
}

// A client header without a proof, or beside a wrong one, names no one:
// strikes count against the remote address, and a wrong proof is itself a
// strike on that address's admin surface.
func TestGuardTrustsNoUnprovedClient(t *testing.T) {
	now := time_(0)
	g := newGuard(now.get, "admin")
	forged := guardReq("10.0.0.7", "", "", "")
	forged.Header.Set(forwarded.HeaderClient, "198.51.100.1")
	strikeOut(t, g, forged, surfaceData)
	if err := g.check(guardReq("10.0.0.7", "right", "", ""), surfaceData, "right"); !errors.Is(err, ErrBackoff) {
		t.Fatalf("the forging address: %v, want held off", err)
	}
	if err := g.check(guardReq("10.0.0.8", "right", forwarded.Proof("admin"), "198.51.100.1"), surfaceData, "right"); err != nil {
		t.Fatalf("the client it named, through a real router: %v", err)
	}

	for i := range badTokenLimit {
		err := g.check(guardReq("10.0.0.5", "right", forwarded.Proof("guess"), "198.51.100.2"), surfaceData, "right")
		if !errors.Is(err, ErrBadProof) {
			t.Fatalf("wrong proof %d: %v", i+1, err)
		}
	}
	if err := g.check(guardReq("10.0.0.5", "right", forwarded.Proof("admin"), "198.51.100.2"), surfaceData, "right"); !errors.Is(err, ErrBackoff) {
		t.Fatalf("a right proof after five wrong ones: %v, want held off", err)
	}
	if err := g.check(guardReq("10.0.0.5", "admin", "", ""), surfaceAdmin, "admin"); !errors.Is(err, ErrBackoff) {
		t.Fatalf("the admin surface of an address guessing proofs: %v, want held off", err)
	}
	// A node without an admin token takes no proof at all.
	open := newGuard(now.get, "")
	if err := open.check(guardReq("10.0.0.5", "right", forwarded.Proof(""), "198.51.100.3"), surfaceData, "right"); err != nil {
		t.Fatalf("no proof header (an empty token has none): %v", err)
	}
	if err := open.check(guardReq("10.0.0.5", "right", forwarded.Proof("admin"), "198.51.100.3"), surfaceData, "right"); !errors.Is(err, ErrBadProof) {
		t.Fatalf("a proof to a node with no admin token: %v", err)
	}
}

// Strikes on one surface hold a client off that surface only; an address
// that presented the admin (or the replication) token is never refused
// unheard on that surface, so strikes others made from its address do not
// lock it out, while an address that never did is held off after five.
func TestGuardSurfacesAndHolders(t *testing.T) {
	now := time_(0)
	g := newGuard(now.get, "admin")
	const router, other = "10.0.0.9", "10.0.0.10"
	strikeOut(t, g, guardReq(router, "bad", "", ""), surfaceData)
	strikeOut(t, g, guardReq(router, "bad", "", ""), surfaceReplication)
	if err := g.check(guardReq(router, "admin", "", ""), surfaceAdmin, "admin"); err != nil {
		t.Fatalf("admin after data and replication strikes: %v", err)
	}
	// The router now holds the admin token: others' strikes from its
	// address do not keep its right token out, though they are held off.
	strikeOut(t, g, guardReq(router, "guess", "", ""), surfaceAdmin)
	if err := g.check(guardReq(router, "guess", "", ""), surfaceAdmin, "admin"); !errors.Is(err, ErrBackoff) {
		t.Fatalf("a wrong admin token from the held-off holder's address: %v, want held off", err)
	}
	if err := g.check(guardReq(router, "admin", "", ""), surfaceAdmin, "admin"); err != nil {
		t.Fatalf("the holder's right admin token: %v", err)
	}
	// An address that never presented it is refused unheard.
	strikeOut(t, g, guardReq(other, "guess", "", ""), surfaceAdmin)
	if err := g.check(guardReq(other, "admin", "", ""), surfaceAdmin, "admin"); !errors.Is(err, ErrBackoff) {
		t.Fatalf("a non-holder's right admin token while held off: %v, want held off", err)
	}
	// So is a copy that presented the replication token; a data client,
	// though it presented its token, is held off unheard.
	if err := g.check(guardReq(other, "repl", "", ""), surfaceReplication, "repl"); err != nil {
		t.Fatal(err)
	}
	strikeOut(t, g, guardReq(other, "guess", "", ""), surfaceReplication)
	if err := g.check(guardReq(other, "repl", "", ""), surfaceReplication, "repl"); err != nil {
		t.Fatalf("the copy's right replication token: %v", err)
	}
	const client = "10.0.0.11"
	if err := g.check(guardReq(client, "data", "", ""), surfaceData, "data"); err != nil {
		t.Fatal(err)
	}
	strikeOut(t, g, guardReq(client, "guess", "", ""), surfaceData)
	if err := g.check(guardReq(client, "data", "", ""), surfaceData, "data"); !errors.Is(err, ErrBackoff) {
		t.Fatalf("a data client's right token while its address is held off: %v, want held off", err)
	}
	// A holder is forgotten after holderFor.
	now.add(int64(holderFor.Seconds()) + 1)
	strikeOut(t, g, guardReq(router, "guess", "", ""), surfaceAdmin)
	if err := g.check(guardReq(router, "admin", "", ""), surfaceAdmin, "admin"); !errors.Is(err, ErrBackoff) {
		t.Fatalf("a holder silent past holderFor: %v, want held off", err)
	}
}

// An IPv6 client is counted by its /64: stepping to another address of
// its own does not step out of its back-off. IPv4 addresses stay apart.
func TestGuardIPv6ByPrefix(t *testing.T) {
	now := time_(0)
	g := newGuard(now.get, "")
	strikeOut(t, g, guardReq("[2001:db8:1:2::1]", "bad", "", ""), surfaceData)
	if err := g.check(guardReq("[2001:db8:1:2::99]", "right", "", ""), surfaceData, "right"); !errors.Is(err, ErrBackoff) {
		t.Fatalf("another address of the same /64: %v, want held off", err)
	}
	if err := g.check(guardReq("[2001:db8:1:3::1]", "right", "", ""), surfaceData, "right"); err != nil {
		t.Fatalf("another /64: %v", err)
	}
	strikeOut(t, g, guardReq("192.0.2.1", "bad", "", ""), surfaceData)
	if err := g.check(guardReq("192.0.2.2", "right", "", ""), surfaceData, "right"); err != nil {
		t.Fatalf("the next IPv4 address: %v", err)
	}
}
