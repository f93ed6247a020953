package node

import (
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/fenec-go/fenec/internal/forwarded"
)

// Bad-token back-off: after badTokenLimit refusals within badTokenWindow
// from one client on one surface, that client is answered 429 there for
// badTokenPenalty, whatever token it sends.
const (
	badTokenLimit   = 5
	badTokenWindow  = time.Minute
	badTokenPenalty = time.Minute
)

// A holder of the admin or the replication token — an address that
// presented it (or a router's proof of the admin token) within holderFor —
// is never refused unheard on that surface: its right token is taken even
// while its address is held off. So a router's grants and admin calls, and
// a copy's feed, are never refused for strikes others made from its
// address. The data surface has no holders: a guesser sharing an address
// with a data client would be told its guesses. At most maxHolders are
// remembered.
const (
	holderFor  = 24 * time.Hour
	maxHolders = 256
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

	mu sync.Mutex // guards proofs, strikes, holders
	// proofs are forwarded.Proof of the admin token (and, until the next
	// reload, of the one a reload replaced); none takes no proof.
	proofs []string
	// strikes is the recent refusals per client and surface.
	strikes map[strikeKey]*strikes
	// holders is when each address last presented the admin or the
	// replication token (or a proof of the admin token), by surface.
	holders map[strikeKey]time.Time
}

// strikes is one client's recent bad tokens on one surface.
type strikes struct {
	times   []time.Time // refusals within the window, oldest first
	blocked time.Time   // refused outright until then
}

func newGuard(now func() time.Time, adminToken string) *guard {
	return &guard{
		now: now, proofs: proofsOf(adminToken),
		strikes: make(map[strikeKey]*strikes), holders: make(map[strikeKey]time.Time),
	}
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
	g.mu.Lock()
	defer g.mu.Unlock()
	client, err := g.clientLocked(r, now)
	if err != nil {
		return err
	}
	return g.checkLocked(r, strikeKey{s, client}, want, also, now)
}

// clientLocked is the client a request's strikes count against: the one a
// router names beside a proof that matches, else the remote address. A
// proof that does not match is a strike on the remote address's admin
// surface (it is a guess at the admin token's hash).
func (g *guard) clientLocked(r *http.Request, now time.Time) (string, error) {
	remote := clientKey(clientAddr(r))
	got := r.Header.Get(forwarded.HeaderProof)
	if got == "" {
		return remote, nil
	}
	k := strikeKey{surfaceAdmin, remote}
	if s := g.strikes[k]; s != nil && now.Before(s.blocked) && !g.holdsLocked(k, now) {
		return "", backoffError{s.blocked.Sub(now)}
	}
	if !g.proofMatchesLocked(got) {
		g.strikeLocked(k, now)
		return "", ErrBadProof
	}
	g.holdLocked(k, now)
	ip, err := netip.ParseAddr(r.Header.Get(forwarded.HeaderClient))
	if err != nil {
		return "unnamed client of " + remote, nil
	}
	return clientKey(ip.String()), nil
}

// checkLocked checks want against the request's bearer token for key.
func (g *guard) checkLocked(r *http.Request, key strikeKey, want, also string, now time.Time) error {
	s := g.strikes[key]
	blocked := s != nil && now.Before(s.blocked)
	if blocked && !g.holdsLocked(key, now) {
		return backoffError{s.blocked.Sub(now)}
	}
	if tokenMatches(r, want) || also != "" && tokenMatches(r, also) {
		g.holdLocked(key, now)
		return nil
	}
	g.strikeLocked(key, now)
	if blocked { // a holder's wrong token while its address is held off
		return backoffError{g.strikes[key].blocked.Sub(now)}
	}
	return ErrUnauthorized
}

// strikeLocked counts one bad token for key, and holds key off for the
// penalty once it has badTokenLimit within the window.
func (g *guard) strikeLocked(key strikeKey, now time.Time) {
	s := g.strikes[key]
	if s == nil {
		s = &strikes{}
		g.strikes[key] = s
	}
	s.times = append(dropBefore(s.times, now.Add(-badTokenWindow)), now)
	if len(s.times) >= badTokenLimit {
		s.blocked = now.Add(badTokenPenalty)
		s.times = nil
	}
	g.sweepLocked(now)
}

// holdsLocked says whether key's client presented key's surface's token
// lately.
func (g *guard) holdsLocked(key strikeKey, now time.Time) bool {
	at, ok := g.holders[key]
	return ok && now.Sub(at) < holderFor
}

// holdLocked records that key's client presented its surface's token now
// (the data surface keeps no holders), forgetting the longest silent
// holder when the set is full.
func (g *guard) holdLocked(key strikeKey, now time.Time) {
	if key.surface == surfaceData {
		return
	}
	if _, ok := g.holders[key]; !ok && len(g.holders) >= maxHolders {
		var oldest strikeKey
		first := true
		for k, at := range g.holders {
			if first || at.Before(g.holders[oldest]) {
				oldest, first = k, false
			}
		}
		delete(g.holders, oldest)
	}
	g.holders[key] = now
}

// sweepLocked forgets clients with nothing recent, so the map stays
// bounded by the clients seen in the last window.
func (g *guard) sweepLocked(now time.Time) {
	if len(g.strikes) < 1024 {
		return
	}
	for k, s := range g.strikes {
		s.times = dropBefore(s.times, now.Add(-badTokenWindow))
		if len(s.times) == 0 && !now.Before(s.blocked) {
			delete(g.strikes, k)
		}
	}
}

// who names a request's client for the audit log: the client a router
// named beside a proof that matches (via the router's address), else the
// remote address. It counts nothing.
func (g *guard) who(r *http.Request) (client, via string) {
	remote := clientAddr(r)
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

// dropBefore keeps the times at or after cut.
func dropBefore(ts []time.Time, cut time.Time) []time.Time {
	i := 0
	for i < len(ts) && ts[i].Before(cut) {
		i++
	}
	return ts[i:]
}

// tokenMatches compares the bearer token in constant time.
func tokenMatches(r *http.Request, want string) bool {
	got, ok := bearerToken(r.Header.Get("Authorization"))
	if !ok {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// bearerToken is the token of an Authorization header of the Bearer
// scheme, whose name is matched case-insensitively (RFC 7235 §2.1), with
// one or more spaces after it.
func bearerToken(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimLeft(token, " ")
	return token, token != ""
}

// clientAddr is the request's remote host without its port.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// clientKey is what strikes are counted against for an address: an IPv6
// address by its /64, which one client holds whole, so that it cannot step
// out of its back-off by taking another address of its own.
func clientKey(addr string) string {
	ip, err := netip.ParseAddr(addr)
	if err != nil || !ip.Is6() || ip.Is4In6() {
		return addr
	}
	p, err := ip.Prefix(64)
	if err != nil {
		return addr
	}
	return p.String()
}
