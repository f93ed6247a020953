package node

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/fenec-go/fenec/internal/badtoken"
	"github.com/fenec-go/fenec/internal/forwarded"
)

// Bad-token back-off (package badtoken, the router's too): after
// badTokenLimit refusals within a minute from one client on one surface,
// that client is answered 429 there for badTokenPenalty, whatever token it
// sends.
//
// A holder of the admin or the replication token — an address that
// presented it (or a router's proof of the admin token) within holderFor —
// is never refused unheard on that surface: its right token is taken even
// while its address is held off. So a router's grants and admin calls, and
// a copy's feed, are never refused for strikes others made from its
// address. The data surface has no holders: a guesser sharing an address
// with a data client would be told its guesses.
const (
	badTokenLimit   = badtoken.Limit
	badTokenPenalty = badtoken.Penalty
	holderFor       = badtoken.HolderFor
)

// surface is what a token opens. Strikes on one surface never hold a
// client off another: bad data tokens never block the admin surface.
type surface uint8

const (
	surfaceData        surface = iota // the data token (--http-token)
	surfaceReplication                // the replication token
	surfaceAdmin                      // the admin token, and routers' proofs of it
)

// strikeKey is whose strikes on which surface.
type strikeKey struct {
	surface surface
	client  string
}

// guard checks bearer tokens and keeps the back-off per client and
// surface. The client of a request is its remote address, or, beside a
// router's proof (package forwarded), the client the router names: behind
// a router every client has the router's address.
type guard struct {
	now func() time.Time
	// book is the strikes and the holders per client and surface.
	book *badtoken.Book[strikeKey]

	mu sync.Mutex // guards proofs
	// proofs are forwarded.Proof of the admin token (and, until the next
	// reload, of the one a reload replaced); none takes no proof.
	proofs []string
	// proven, if set, is told the remote host of a request whose router
	// proof matched: the connection bound spares its address from then.
	proven func(remote string)
}

func newGuard(now func() time.Time, adminToken string) *guard {
	return &guard{now: now, proofs: proofsOf(adminToken), book: badtoken.New[strikeKey]()}
}

// proofsOf are the proofs of the admin tokens given ("" has none).
func proofsOf(tokens ...string) []string {
	var out []string
	for _, t := range tokens {
		if t != "" {
			out = append(out, forwarded.Proof(t))
		}
	}
	return out
}

// setProofs takes the proofs of the admin tokens in use (its file read
// again).
func (g *guard) setProofs(proofs []string) {
	g.mu.Lock()
	g.proofs = proofs
	g.mu.Unlock()
}

// proofMatchesLocked reports whether got is the proof of an admin token
// in use.
func (g *guard) proofMatchesLocked(got string) bool {
	ok := false
	for _, p := range g.proofs {
		if subtle.ConstantTimeCompare([]byte(got), []byte(p)) == 1 {
			ok = true
		}
	}
	return ok
}

// backoffError is ErrBackoff with the time left.
type backoffError struct{ left time.Duration }

func (e backoffError) Error() string {
	return fmt.Sprintf("%s: send again after Retry-After", ErrBackoff)
}
func (e backoffError) Unwrap() error             { return ErrBackoff }
func (e backoffError) RetryAfter() time.Duration { return e.left }

// check answers nil when the request carries want, a backoffError when
// its client is held off on surface s, ErrBadProof for a router's proof
// that does not match, and ErrUnauthorized otherwise (counting a strike).
func (g *guard) check(r *http.Request, s surface, want string) error {
	return g.checkEither(r, s, want, "")
}

// checkEither is check taking also (when set: the token a reload
// replaced, until the next reload) as well as want.
func (g *guard) checkEither(r *http.Request, s surface, want, also string) error {
	now := g.now()
	client, err := g.client(r, now)
	if err != nil {
		return err
	}
	right := tokenMatches(r, want) || also != "" && tokenMatches(r, also)
	switch v, left := g.book.Check(strikeKey{s, client}, right, s != surfaceData, now); v {
	case badtoken.HeldOff:
		return backoffError{left}
	case badtoken.Refused:
		return ErrUnauthorized
	}
	return nil
}

// client is the client a request's strikes count against: the one a
// router names beside a proof that matches, else the remote address. A
// proof that does not match is a strike on the remote address's admin
// surface (it is a guess at the admin token's hash).
func (g *guard) client(r *http.Request, now time.Time) (string, error) {
	remote := badtoken.ClientKey(badtoken.RemoteHost(r))
	got := r.Header.Get(forwarded.HeaderProof)
	if got == "" {
		return remote, nil
	}
	k := strikeKey{surfaceAdmin, remote}
	if left := g.book.Blocked(k, now); left > 0 {
		return "", backoffError{left}
	}
	g.mu.Lock()
	matches := g.proofMatchesLocked(got)
	g.mu.Unlock()
	if !matches {
		g.book.Strike(k, now)
		return "", ErrBadProof
	}
	g.book.Hold(k, now)
	if g.proven != nil {
		g.proven(r.RemoteAddr)
	}
	ip, err := netip.ParseAddr(r.Header.Get(forwarded.HeaderClient))
	if err != nil {
		return "unnamed client of " + remote, nil
	}
	return badtoken.ClientKey(ip.String()), nil
}

// hasProof says whether the request carries a router's proof that
// matches the node's admin token. It counts nothing.
func (g *guard) hasProof(r *http.Request) bool {
	got := r.Header.Get(forwarded.HeaderProof)
	if got == "" {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.proofMatchesLocked(got)
}

// who names a request's client for the audit log: the client a router
// named beside a proof that matches (via the router's address), else the
// remote address. It counts nothing.
func (g *guard) who(r *http.Request) (client, via string) {
	remote := badtoken.RemoteHost(r)
	got := r.Header.Get(forwarded.HeaderProof)
	g.mu.Lock()
	matches := got != "" && g.proofMatchesLocked(got)
	g.mu.Unlock()
	if !matches {
		return remote, ""
	}
	ip, err := netip.ParseAddr(r.Header.Get(forwarded.HeaderClient))
	if err != nil {
		return "unnamed client", remote
	}
	return ip.String(), remote
}

// tokenMatches compares the bearer token in constant time.
func tokenMatches(r *http.Request, want string) bool {
	got, ok := badtoken.Bearer(r.Header.Get("Authorization"))
	if !ok {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}
