package wire

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// The Fenec-* headers, in their canonical form (usable as http.Header
// keys as they are). API.md §1.1 says what each means.
const (
	// HeaderSeq is on every successful write: the tenant's change number
	// after it.
	HeaderSeq = "Fenec-Seq"
	// HeaderAfter on a read: answer once the copy's seq reaches it.
	HeaderAfter = "Fenec-After"
	// HeaderHistory with HeaderAfter: only a file whose history holds
	// that write answers. On a write's answer, beside HeaderSeq: the
	// history of the file that answered it.
	HeaderHistory = "Fenec-History"
	// HeaderWait on /query or /batch: hold a claim that took nothing for
	// up to this many milliseconds.
	HeaderWait = "Fenec-Wait"
	// HeaderNext on a change feed's answer: the since of the next page.
	HeaderNext = "Fenec-Next"
	// HeaderRefused says why a request was refused unrun: on a 503,
	// RefusedLease or RefusedReplica; on StatusDeclined (a copy's
	// answer), RefusedStale, RefusedBehind or RefusedReplica.
	HeaderRefused = "Fenec-Refused"
	// HeaderMaxStaleness on a read: answer only if every write
	// acknowledged more than this many milliseconds before the request
	// reached the node is in the answer. A decimal integer from 0 to
	// MaxStalenessMS, sent once (ParseMillis); anything else is 400. A
	// primary holding the tenant's lease always answers; a copy only if
	// it can prove the bound (else StatusDeclined, RefusedStale); a
	// primary whose lease lapsed longer ago than asked refuses 503
	// RefusedLease.
	HeaderMaxStaleness = "Fenec-Max-Staleness"
	// HeaderStaleness is on every read a node answers on its data routes
	// (GET and HEAD of a collection and of the change feed, /query and
	// /batch that wrote nothing): an upper bound, in whole milliseconds
	// rounded up, on how old the answer may be: every write
	// acknowledged more than that long before the request reached the
	// node is in it (a copy takes its bound as the answer goes, which
	// is later still). 0 from a primary holding the tenant's lease (or started
	// without --lease, which claims nothing more); from a primary whose
	// lease lapsed, the time since it lapsed; from a copy, what its
	// freshness proofs show. StalenessUnbounded when nothing bounds it (a
	// copy with no proof yet, a primary no lease has let write since the
	// node started or one frozen for a move).
	HeaderStaleness = "Fenec-Staleness-Ms"
	// HeaderCopyWait, from a router only (a node honours it beside a
	// Fenec-Router-Proof that matches its admin token, and ignores it
	// otherwise): the read was sent to a copy, which waits at most this
	// many milliseconds (0 to MaxCopyWaitMS) for Fenec-After and for a
	// proof of Fenec-Max-Staleness, then declines at once
	// (StatusDeclined) rather than answer 504 or wait on; a write it
	// declines unrun (RefusedReplica). A primary answers as ever.
	HeaderCopyWait = "Fenec-Copy-Wait"
	// HeaderServedBy, from a router, on the answer to a read that stated
	// a bound (Fenec-Max-Staleness or Fenec-After): ServedByPrimary or
	// ServedByCopy (Fenec-Node names the node, Fenec-Staleness-Ms the
	// bound its answer carries).
	HeaderServedBy = "Fenec-Served-By"
	// HeaderFeedFeatures on the answer to a replication feed
	// (GET /t/<t>/_replication): what the primary does of what its copy
	// may ask, comma-separated: FeedProbes (it answers probe frames with
	// its position) and FeedReadCopies (it honours role=read). A primary
	// from before them sends none, and its copies neither probe nor
	// follow it as read copies.
	HeaderFeedFeatures = "Fenec-Feed-Features"
	// HeaderClient, from a router to a node only: the address of the
	// client the router forwards for (internal/forwarded).
	HeaderClient = "Fenec-Client"
	// HeaderRouterProof, beside HeaderClient: the router's proof that it
	// holds the node's admin token (internal/forwarded.Proof).
	HeaderRouterProof = "Fenec-Router-Proof"
	// HeaderNode on an admin request: the id of the node it is meant
	// for; any other node refuses it (409) and changes nothing. On every
	// answer below /t/: the id of the node that gave it.
	HeaderNode = "Fenec-Node"
)

// Values of HeaderRefused.
const (
	// RefusedLease: the node holds no lease naming the tenant (yet); a
	// router asks again once its grant reached the node.
	RefusedLease = "lease"
	// RefusedReplica: the node's file is a copy; write to its primary.
	RefusedReplica = "replica"
	// RefusedStale: the copy cannot prove Fenec-Max-Staleness; read
	// from the primary.
	RefusedStale = "stale"
	// RefusedBehind: the copy has not reached Fenec-After (or its
	// history does not hold it) within Fenec-Copy-Wait; read from the
	// primary.
	RefusedBehind = "behind"
)

// The values of HeaderServedBy.
const (
	ServedByPrimary = "primary"
	ServedByCopy    = "copy"
)

// StatusDeclined is a copy's answer to a request it did not run and the
// tenant's primary should (421 Misdirected Request): a read it cannot
// answer as asked (RefusedStale, RefusedBehind) or, sent by a router, a
// write (RefusedReplica). Its body is Declined. Nothing ran: a router
// sends the request to the primary at once.
const StatusDeclined = http.StatusMisdirectedRequest

// Declined is the body of a StatusDeclined answer: why, and where the
// copy stands — its seq and history, and the staleness bound it can prove
// now (nil: none).
type Declined struct {
	Error       string `json:"error"`
	Seq         uint64 `json:"seq"`
	History     uint64 `json:"history"`
	StalenessMS *int64 `json:"staleness_ms"`
}

// StalenessUnbounded is HeaderStaleness's value when nothing bounds how
// old an answer may be.
const StalenessUnbounded = "unbounded"

// Bounds of the millisecond headers.
const (
	// MaxStalenessMS is the largest Fenec-Max-Staleness: a day.
	MaxStalenessMS = 86_400_000
	// MaxCopyWaitMS is the largest Fenec-Copy-Wait: 30 s.
	MaxCopyWaitMS = 30_000
)

// Features of a replication feed (HeaderFeedFeatures).
const (
	FeedProbes     = "probes"
	FeedReadCopies = "read-copies"
)

// ErrBadMillis: a millisecond header that is not one decimal integer
// within its bounds.
var ErrBadMillis = errors.New("not one whole number of milliseconds within its bounds")

// ParseMillis reads the millisecond header name of h (HeaderMaxStaleness,
// HeaderCopyWait): absent is (0, false, nil); one value of decimal digits
// only, at most max, is (ms, true, nil). Anything else — repeated (as
// two fields or a list), signed, spaced, fractional, past max — is an
// error wrapping ErrBadMillis that says what is allowed.
func ParseMillis(h http.Header, name string, max int64) (int64, bool, error) {
	vs := h.Values(name)
	if len(vs) == 0 {
		return 0, false, nil
	}
	bad := fmt.Errorf("%w: %s must be sent once, as a whole number of milliseconds from 0 to %d", ErrBadMillis, name, max)
	if len(vs) > 1 || len(vs[0]) == 0 || len(vs[0]) > 18 {
		return 0, false, bad
	}
	var ms int64
	for _, c := range []byte(vs[0]) {
		if c < '0' || c > '9' {
			return 0, false, bad
		}
		ms = ms*10 + int64(c-'0')
	}
	if ms > max {
		return 0, false, bad
	}
	return ms, true, nil
}

// FormatStaleness is HeaderStaleness's value for a bound d (ok false:
// StalenessUnbounded): whole milliseconds, rounded up.
func FormatStaleness(d time.Duration, ok bool) string {
	if !ok {
		return StalenessUnbounded
	}
	return strconv.FormatInt(CeilMillis(d), 10)
}

// CeilMillis is d in whole milliseconds, rounded up (never below 0).
func CeilMillis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
