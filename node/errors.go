package node

import (
	"errors"

	"github.com/fenec-go/fenec/internal/reqpath"
)

// Sentinel errors of the node; status.go maps them (and the engine's) to
// HTTP statuses.
var (
	ErrBadRequest      = errors.New("bad request")
	ErrBadName         = errors.New("bad tenant name: a name is 1 to 64 characters of a-z, 0-9, _ and -")
	ErrBadPath         = reqpath.ErrBadPath
	ErrNoRoute         = errors.New("no such route")
	ErrUnknownTenant   = errors.New("unknown tenant")
	ErrTenantExists    = errors.New("tenant already exists")
	ErrBodyTooLarge    = errors.New("request body too large")
	ErrBodyStalled     = errors.New("request body stopped arriving: send it again, with no pause longer than the node's --body-timeout between its bytes")
	ErrUnauthorized    = errors.New("missing or wrong token")
	ErrBackoff         = errors.New("too many bad tokens from this client")
	ErrBadProof        = errors.New("Fenec-Router-Proof does not match this node's admin token: record the node with the router again with its current admin token")
	ErrTooManyStreams  = errors.New("too many subscriptions on this tenant")
	ErrFrozen          = errors.New("tenant is frozen for a move or a copy: send it again after Retry-After")
	ErrNotFrozen       = errors.New("tenant is not frozen: its file was kept (it is served, or being placed here); delete it without if=frozen if it must go")
	ErrReplica         = errors.New("tenant is a replica copy: it takes no writes")
	ErrTenantClosing   = errors.New("tenant is closing")
	ErrTenantGone      = errors.New("tenant was deleted or moved")
	ErrTenantRestored  = errors.New("tenant was restored from an image: open it again")
	ErrImageTooLarge   = errors.New("image too large")
	ErrImageLineage    = errors.New("image of another lineage than the tenant's")
	ErrShuttingDown    = errors.New("node is shutting down")
	ErrStarting        = errors.New("node is starting: ask again in a moment")
	ErrKeyReused       = errors.New("idempotency key reused with another request: a new request needs a new key")
	ErrAfterTimeout    = errors.New("this copy has not reached the requested seq: read again later, or from the primary")
	ErrHistoryForked   = errors.New("this copy's history does not hold the requested write: it was lost in a failover, so write it again")
	ErrNoDescriptors   = errors.New("this node has no file descriptor free (its connections and open files fill its limit), so nothing ran: retry after Retry-After seconds; the operator lowers --max-conns or --max-conns-per-addr, or raises the node's LimitNOFILE")
	ErrMemoryFull      = errors.New("tenant is past the node's memory ceiling: move the tenant or raise --max-memory")
	ErrQuotaBytes      = errors.New("tenant is full: bytes quota (delete and compact to make room, or raise the quota)")
	ErrQuotaRows       = errors.New("tenant is full: rows quota (delete rows to make room, or raise the quota)")
	ErrMethod          = errors.New("method not allowed")
	ErrNodeClosed      = errors.New("node is closed")
	ErrInsecureAddress = errors.New("non-loopback address with no token")
	ErrClientCert      = errors.New("this node takes admin calls and replication feeds only with a client certificate its --tls-ca verifies: call it with one (fenec-shard and fenec-node show their --tls-cert)")
	ErrHoldNotRun      = errors.New("held request was not run within its wait")
	ErrNoLease         = errors.New("this node holds no lease for the tenant")
	ErrLeaseLapsed     = errors.New("the lease lapsed before the write was answered")
	ErrPartlyLanded    = errors.New("a /batch run one by one was refused after some of it landed")
	ErrRateLimited     = errors.New("tenant is over its write rate")
	ErrPromoteRefused  = errors.New("promotion refused")
	ErrTooManyRequests = errors.New("too many requests running on this tenant")
	ErrNotThisNode     = errors.New("admin request meant for another node")
	ErrCannotFollow    = errors.New("this node has no --replication-token to follow with")
	ErrStale           = errors.New("this copy cannot prove its answer is as fresh as Fenec-Max-Staleness asks")
	ErrBehind          = errors.New("this copy has not reached Fenec-After within Fenec-Copy-Wait")
	ErrWriteToCopy     = errors.New("write declined unrun")
	ErrStatementTime   = errors.New("past the node's --max-statement-time")
	ErrAnswerMemory    = errors.New("the node holds as many answers as --max-answer-memory lets it at once (clients are reading theirs slowly), so this read did not run: retry after Retry-After seconds")
	ErrAnswerTooLarge  = errors.New("this answer alone would hold more than the node's --max-answer-memory as it is written: give it a limit (and page on with where id > the last id), or narrow the where; a get with no lookup or group is written as it is read and holds 8 bytes a row, while a lookup's or a group's rows, and a /batch's, are held whole")
	// ErrClientGone answers a statement stopped because its client went
	// away (or its router gave up on it): no one reads the answer.
	ErrClientGone = errors.New("the client went away before the statement ended, and nothing it did landed")
)
