package node

import "errors"

// Sentinel errors of the node; status.go maps them (and the engine's) to
// HTTP statuses.
var (
	ErrBadRequest      = errors.New("bad request")
	ErrBadName         = errors.New("bad tenant name")
	ErrBadPath         = errors.New("bad path")
	ErrNoRoute         = errors.New("no such route")
	ErrUnknownTenant   = errors.New("unknown tenant")
	ErrTenantExists    = errors.New("tenant already exists")
	ErrBodyTooLarge    = errors.New("request body too large")
	ErrUnauthorized    = errors.New("missing or wrong token")
	ErrBackoff         = errors.New("too many bad tokens from this client")
	ErrBadProof        = errors.New("Fenec-Router-Proof does not match this node's admin token: record the node with the router again with its current admin token")
	ErrTooManyStreams  = errors.New("too many subscriptions on this tenant")
	ErrFrozen          = errors.New("tenant is frozen for a move or a copy: send it again after Retry-After")
	ErrReplica         = errors.New("tenant is a replica copy: it takes no writes")
	ErrTenantClosing   = errors.New("tenant is closing")
	ErrTenantGone      = errors.New("tenant was deleted or moved")
	ErrShuttingDown    = errors.New("node is shutting down")
	ErrKeyReused       = errors.New("idempotency key reused with another request: a new request needs a new key")
	ErrAfterTimeout    = errors.New("this copy has not reached the requested seq: read again later, or from the primary")
	ErrHistoryForked   = errors.New("this copy's history does not hold the requested write: it was lost in a failover, so write it again")
	ErrMemoryFull      = errors.New("tenant is past the node's memory ceiling: move the tenant or raise --max-memory")
	ErrQuotaBytes      = errors.New("tenant is full: bytes quota (delete and compact to make room, or raise the quota)")
	ErrQuotaRows       = errors.New("tenant is full: rows quota (delete rows to make room, or raise the quota)")
	ErrMethod          = errors.New("method not allowed")
	ErrNodeClosed      = errors.New("node is closed")
	ErrInsecureAddress = errors.New("non-loopback address with no token")
	ErrHoldNotRun      = errors.New("held request was not run within its wait")
	ErrNoLease         = errors.New("this node holds no lease for the tenant")
	ErrLeaseLapsed     = errors.New("the lease lapsed before the write was answered")
	ErrRateLimited     = errors.New("tenant is over its write rate")
	ErrPromoteRefused  = errors.New("promotion refused")
	ErrTooManyRequests = errors.New("too many requests running on this tenant")
)
