package forward

import (
	"sync"

	"github.com/fenec-go/fenec/internal/badtoken"
)

// minBodyRoom is the first room a body is read into; the room doubles as
// bytes arrive.
const minBodyRoom = 16 << 10

// smallBody is the largest body the budget's reserve serves: a body
// whose room grows past it may take the budget only up to its last
// reserveShare, so that large bodies — a stranger's 60 MiB floods, or
// many honest uploads at once — never leave the small writes that are
// most of a deployment's traffic without room.
const smallBody = 1 << 20

// reserveShare: the part of the budget in all (1/8) kept for bodies of at
// most smallBody.
const reserveShare = 8

// bodyBudget bounds the request bodies the forwarder holds at once: in
// all, and from one client address (an IPv6 one by its /64). A body is
// buffered whole so that a resend replays it byte for byte, and it is
// charged as its buffer grows — by the room allocated, never by the
// length its head declares — so that what strangers send is bounded by
// the budget rather than by the connections they may open times the
// largest body. A charge past either bound is refused, and the request
// answered 503 (all) or 429 (the address) with Retry-After before the
// rest of its body is read.
type bodyBudget struct {
	total   int64 // 0: no bound
	perAddr int64 // 0: no bound

	mu   sync.Mutex
	held int64            // guarded by mu
	by   map[string]int64 // guarded by mu: held by address key
}

func newBodyBudget(total, perAddr int64) *bodyBudget {
	return &bodyBudget{total: total, perAddr: perAddr, by: map[string]int64{}}
}

// take charges n bytes to key for a body that holds body bytes once they
// are charged, or says which bound refuses them. A body past smallBody
// is refused the budget's reserve (its last reserveShare).
func (b *bodyBudget) take(key string, n, body int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	limit := b.total
	if body > smallBody {
		limit -= b.total / reserveShare
	}
	switch {
	case b.total > 0 && b.held+n > limit:
		return ErrBodyMemory
	case b.perAddr > 0 && b.by[key]+n > b.perAddr:
		return ErrBodyMemoryAddr
	}
	b.held += n
	b.by[key] += n
	return nil
}

// give returns n bytes charged to key.
func (b *bodyBudget) give(key string, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held -= n
	if left := b.by[key] - n; left > 0 {
		b.by[key] = left
	} else {
		delete(b.by, key)
	}
}

// Held is the bytes charged now.
func (b *bodyBudget) Held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}

// bodyKey is the address a request's body is charged to.
func bodyKey(remoteAddr string) string {
	return badtoken.ClientKey(clientIP(remoteAddr))
}
