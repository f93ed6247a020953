package node

import (
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Bad-token back-off: after badTokenLimit refusals within badTokenWindow
// from one client address, that address is answered 429 for
// badTokenPenalty, whatever token it sends.
const (
	badTokenLimit   = 5
	badTokenWindow  = time.Minute
	badTokenPenalty = time.Minute
)

// guard checks bearer tokens and keeps the per-address back-off.
type guard struct {
	now func() time.Time

	mu sync.Mutex // guards addrs
	// addrs is the recent refusals per client address.
	addrs map[string]*strikes
}

// strikes is one address's recent bad tokens.
type strikes struct {
	times   []time.Time // refusals within the window, oldest first
	blocked time.Time   // refused outright until then
}

func newGuard(now func() time.Time) *guard {
	return &guard{now: now, addrs: make(map[string]*strikes)}
}

// check answers nil when the request carries want, ErrBackoff when its
// address is blocked, and ErrUnauthorized otherwise (counting a strike).
func (g *guard) check(r *http.Request, want string) error {
	addr := clientAddr(r)
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.addrs[addr]
	if s != nil && now.Before(s.blocked) {
		return ErrBackoff
	}
	if tokenMatches(r, want) {
		return nil
	}
	if s == nil {
		s = &strikes{}
		g.addrs[addr] = s
	}
	s.times = append(dropBefore(s.times, now.Add(-badTokenWindow)), now)
	if len(s.times) >= badTokenLimit {
		s.blocked = now.Add(badTokenPenalty)
		s.times = nil
	}
	g.sweepLocked(now)
	return ErrUnauthorized
}

// sweepLocked forgets addresses with nothing recent, so the map stays
// bounded by the addresses seen in the last window.
func (g *guard) sweepLocked(now time.Time) {
	if len(g.addrs) < 1024 {
		return
	}
	for a, s := range g.addrs {
		s.times = dropBefore(s.times, now.Add(-badTokenWindow))
		if len(s.times) == 0 && !now.Before(s.blocked) {
			delete(g.addrs, a)
		}
	}
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
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// clientAddr is the request's remote host without its port.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
