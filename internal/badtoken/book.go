package badtoken

import (
	"net/netip"
	"sync"
	"time"
)

// The back-off's rule: Limit refusals within Window hold a key
// off for Penalty; a holder is remembered for HolderFor, MaxHolders at
// most.
const (
	Limit      = 5
	Window     = time.Minute
	Penalty    = time.Minute
	HolderFor  = 24 * time.Hour
	MaxHolders = 256
	// sweepAt is how many keys are kept before those with nothing recent
	// are forgotten.
	sweepAt = 1024
)

// Verdict is what Check made of one token.
type Verdict uint8

const (
	Pass    Verdict = iota // the right token: go on
	Refused                // a wrong token, counted: 401
	HeldOff                // too many bad tokens: 429 for the time Check gave
)

// Book is the strikes and the holders, per key. Safe for concurrent use.
type Book[K comparable] struct {
	mu      sync.Mutex
	strikes map[K]*strikes  // guarded by mu: recent refusals per key
	holders map[K]time.Time // guarded by mu: when each holder last presented its token
}

// strikes is one key's recent bad tokens.
type strikes struct {
	times   []time.Time // refusals within the window, oldest first
	blocked time.Time   // refused outright until then
}

// New returns an empty book.
func New[K comparable]() *Book[K] {
	return &Book[K]{strikes: map[K]*strikes{}, holders: map[K]time.Time{}}
}

// Check judges one token presented for key at now: right says whether it
// was the right one, holds whether a right one makes key a holder. A key
// held off and no holder is refused unheard (HeldOff, with the time left);
// a right token passes; a wrong one is a strike (Refused, or HeldOff when
// key was held off already: a holder's wrong token).
func (b *Book[K]) Check(key K, right, holds bool, now time.Time) (Verdict, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.strikes[key]
	blocked := s != nil && now.Before(s.blocked)
	if blocked && !b.holdsLocked(key, now) {
		return HeldOff, s.blocked.Sub(now)
	}
	if right {
		if holds {
			b.holdLocked(key, now)
		}
		return Pass, 0
	}
	b.strikeLocked(key, now)
	if blocked {
		return HeldOff, b.strikes[key].blocked.Sub(now)
	}
	return Refused, 0
}

// Blocked says how long key is held off at now (0: it is not, or it is a
// holder).
func (b *Book[K]) Blocked(key K, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.strikes[key]; s != nil && now.Before(s.blocked) && !b.holdsLocked(key, now) {
		return s.blocked.Sub(now)
	}
	return 0
}

// Strike counts one bad token for key at now.
func (b *Book[K]) Strike(key K, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.strikeLocked(key, now)
}

// Hold records that key presented its token at now.
func (b *Book[K]) Hold(key K, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.holdLocked(key, now)
}

// strikeLocked counts one bad token for key, and holds key off for the
// penalty once it has Limit within the window.
func (b *Book[K]) strikeLocked(key K, now time.Time) {
	s := b.strikes[key]
	if s == nil {
		s = &strikes{}
		b.strikes[key] = s
	}
	s.times = append(dropBefore(s.times, now.Add(-Window)), now)
	if len(s.times) >= Limit {
		s.blocked = now.Add(Penalty)
		s.times = nil
	}
	b.sweepLocked(now)
}

// holdsLocked says whether key presented its token lately.
func (b *Book[K]) holdsLocked(key K, now time.Time) bool {
	at, ok := b.holders[key]
	return ok && now.Sub(at) < HolderFor
}

// holdLocked records that key presented its token now, forgetting the
// longest silent holder when the set is full.
func (b *Book[K]) holdLocked(key K, now time.Time) {
	if _, ok := b.holders[key]; !ok && len(b.holders) >= MaxHolders {
		var oldest K
		first := true
		for k, at := range b.holders {
			if first || at.Before(b.holders[oldest]) {
				oldest, first = k, false
			}
		}
		delete(b.holders, oldest)
	}
	b.holders[key] = now
}

// sweepLocked forgets keys with nothing recent, so the map stays bounded
// by the clients seen in the last window.
func (b *Book[K]) sweepLocked(now time.Time) {
	if len(b.strikes) < sweepAt {
		return
	}
	for k, s := range b.strikes {
		s.times = dropBefore(s.times, now.Add(-Window))
		if len(s.times) == 0 && !now.Before(s.blocked) {
			delete(b.strikes, k)
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

// ClientKey is what strikes are counted against for an address: an IPv6
// address by its /64, which one client holds whole, so that it cannot step
// out of its back-off by taking another address of its own.
func ClientKey(addr string) string {
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
