package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ErrBadQuota: a quota with a negative limit.
var ErrBadQuota = errors.New("a quota is never negative")

// Quota is a tenant's limits, PUT and GET /_admin/tenants/<t>/quota, and
// the record the directory keeps for it; 0 means no limit.
type Quota struct {
	Bytes     int64   `json:"bytes,omitempty"`       // file bytes
	Rows      int64   `json:"rows,omitempty"`        // rows outside the server's own collections
	Streams   int64   `json:"streams,omitempty"`     // subscriptions open
	Requests  int64   `json:"requests,omitempty"`    // data requests running
	RowsPerS  float64 `json:"rows_per_s,omitempty"`  // rows written a second
	BytesPerS float64 `json:"bytes_per_s,omitempty"` // bytes written a second
}

// Validate refuses a negative limit (ErrBadQuota), naming it.
func (q Quota) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"bytes", float64(q.Bytes)}, {"rows", float64(q.Rows)}, {"streams", float64(q.Streams)},
		{"requests", float64(q.Requests)}, {"rows_per_s", q.RowsPerS}, {"bytes_per_s", q.BytesPerS},
	} {
		if f.v < 0 {
			return fmt.Errorf("%w: %s is %v", ErrBadQuota, f.name, f.v)
		}
	}
	return nil
}

// Usage is what a tenant holds, GET /_admin/tenants/<t>/usage.
type Usage struct {
	Bytes    int64 `json:"bytes"`
	Rows     int64 `json:"rows"`
	Streams  int64 `json:"streams"`
	Requests int64 `json:"requests"`
}

// Follow is the body of POST /_admin/tenants/<t>/follow: the tenant's file
// follows the node at From ("http://host:port"), as the node named As
// (the name its primary's lease list gives the replica; "" for a copy
// followed by hand), in the role Role: RoleVoting ("" too) or RoleRead.
type Follow struct {
	From string `json:"from"`
	As   string `json:"as,omitempty"`
	Role string `json:"role,omitempty"`
}

// The roles of a copy (Follow.Role).
const (
	// RoleVoting is a replica a write may wait for and a failover may
	// promote: it is sent every durable record as it lands.
	RoleVoting = "voting"
	// RoleRead is a read copy: never waited for, never promoted, and sent
	// only what the tenant has committed — what a voting copy the write
	// waits for holds, so that it never shows a write a failover could
	// lose. A node refuses to promote one (409): follow again as voting.
	RoleRead = "read"
)

// Followed is the answer to Follow.
type Followed struct {
	Tenant string `json:"tenant"`
	From   string `json:"from"`
	Role   string `json:"role"`
}

// Promote is the body of POST /_admin/tenants/<t>/promote: the tenant's
// lineage and the history its primary forked at its last failover, which
// the copy must fit, unless Force.
type Promote struct {
	Lineage       uint64 `json:"lineage"`
	ForkedHistory uint64 `json:"forked_history"`
	Force         bool   `json:"force"`
	// Dir, Epoch and Term name the promoting router's directory, the
	// node's region's leasing epoch and the router's term: a node under
	// --lease bound to another directory, or to a later epoch or term of
	// the same, refuses the promotion whatever Force says (the router no
	// longer owns the node's region: a request of its held on the network
	// and read late). Empty from an operator by hand.
	Dir   string `json:"dir,omitempty"`
	Epoch uint64 `json:"epoch,omitempty"`
	Term  uint64 `json:"term,omitempty"`
}

// PromoteMany is the body of POST /_admin/promote: many tenants' copies
// promoted in one call, each checked as Promote checks one, with Force,
// Dir, Epoch and Term the call's, for every tenant. A tenant is named once;
// at most MaxPromoteMany of them.
type PromoteMany struct {
	Tenants []PromoteTenant `json:"tenants"`
	Force   bool            `json:"force"`
	Dir     string          `json:"dir,omitempty"`
	Epoch   uint64          `json:"epoch,omitempty"`
	Term    uint64          `json:"term,omitempty"`
}

// MaxPromoteMany bounds the tenants of one PromoteMany.
const MaxPromoteMany = 1000

// PromoteTenant is one tenant of a PromoteMany: its lineage and the
// history its primary forked at its last failover, as in Promote.
type PromoteTenant struct {
	Tenant        string `json:"tenant"`
	Lineage       uint64 `json:"lineage"`
	ForkedHistory uint64 `json:"forked_history"`
}

// PromotedMany is the answer to PromoteMany: one entry per tenant, in the
// order asked.
type PromotedMany struct {
	Tenants []PromotedTenant `json:"tenants"`
}

// PromotedTenant is one tenant's outcome in a PromotedMany: Status is 200
// with Promoted, Seq and History as Promote answers them, or the status
// POST /_admin/tenants/<t>/promote would have answered with its error
// (409 refused, saying why, with the file's Lineage; 404 no such tenant).
type PromotedTenant struct {
	Tenant   string `json:"tenant"`
	Status   int    `json:"status"`
	Promoted bool   `json:"promoted"`
	Seq      uint64 `json:"seq,omitempty"`
	History  uint64 `json:"history,omitempty"`
	Error    string `json:"error,omitempty"`
	Lineage  uint64 `json:"lineage,omitempty"`
}

// Promoted is the answer to Promote: Promoted is false when the file was
// already a primary's; History is the history it writes in now.
type Promoted struct {
	Promoted bool   `json:"promoted"`
	Seq      uint64 `json:"seq"`
	History  uint64 `json:"history"`
}

// LineageEntry is one step of a file's history: history id, from seq.
type LineageEntry struct {
	History uint64 `json:"history"`
	From    uint64 `json:"from"`
}

// CopyStatus is one copy streaming from a primary's file.
type CopyStatus struct {
	// Acked is the highest seq the copy said it holds durably.
	Acked uint64 `json:"acked"`
	// Lagging: the copy acknowledged nothing for the node's bound, and
	// writes meanwhile were answered without it.
	Lagging bool `json:"lagging"`
	// Role is RoleVoting or RoleRead (a read copy is never waited for).
	Role string `json:"role"`
}

// Replication is GET /_admin/tenants/<t>/replication: the file's role and
// position; for a replica, the node it follows and whether it heard from
// it since it was told to follow it.
type Replication struct {
	Role    string         `json:"role"` // "primary" or "replica"
	Seq     uint64         `json:"seq"`
	Durable uint64         `json:"durable"`
	History uint64         `json:"history"`
	Lineage []LineageEntry `json:"lineage"`
	Copies  []CopyStatus   `json:"copies"`
	// A replica's: the node it follows, whether it heard from it since
	// it was told to follow it, and when it last did.
	From      string     `json:"from,omitempty"`
	Heard     bool       `json:"heard"`
	LastHello *time.Time `json:"last_hello,omitempty"`
	// A replica's: its role (RoleVoting or RoleRead) and what it can
	// prove of its freshness.
	CopyRole  string     `json:"copy_role,omitempty"`
	Freshness *Freshness `json:"freshness,omitempty"`
	// Frozen: the file refuses writes for a move (POST .../freeze). A
	// move's source stays so until it is deleted; one its router left
	// is what the router's repair deletes (DeleteFrozen).
	Frozen bool `json:"frozen,omitempty"`
}

// Freshness is a copy's proof of how fresh its file is, as its replication
// status shows it.
type Freshness struct {
	// StalenessMS is the bound a read of the whole file would carry now
	// (nil: none proven).
	StalenessMS *int64 `json:"staleness_ms"`
	// ProofSeq and ProofHistory: the newest position the primary answered
	// while it held the tenant's lease that the file holds (0: none).
	ProofSeq     uint64 `json:"proof_seq"`
	ProofHistory uint64 `json:"proof_history"`
	// Probing: the feed open now is to a primary that answers probes.
	Probing bool `json:"probing"`
	// Warm: a read asked it for a bound in the last 30 s, so it probes
	// every --freshness-interval rather than about once a second.
	Warm bool `json:"warm"`
}

// LineageID is the file's first history, which names its lineage (0 when
// it has none).
func (r Replication) LineageID() uint64 {
	if len(r.Lineage) == 0 {
		return 0
	}
	return r.Lineage[0].History
}

// Stats is GET /_admin/stats: the node's totals.
type Stats struct {
	Tenants int   `json:"tenants"`
	Disk    int64 `json:"disk"`
	Memory  int64 `json:"memory"`
	Open    int   `json:"open"`
}

// Frozen is the answer to POST /_admin/tenants/<t>/freeze and /thaw.
type Frozen struct {
	Tenant string `json:"tenant"`
	Frozen bool   `json:"frozen"`
	Seq    uint64 `json:"seq"`
}

// Statement is the body of POST /_admin/tenants/<t>/read (and of a
// tenant's /query): one statement and its parameters.
type Statement struct {
	Query  string          `json:"query"`
	Params json.RawMessage `json:"params,omitempty"`
}

// StatementRefused is the read route's refusal of the statement itself
// (400 with "statement_refused": true): it writes (Verb says how), does
// not parse, or its parameters do not fit. It is the same on every tenant.
type StatementRefused struct {
	Message string // the node's message
	Verb    string // the statement's verb when it writes
}

func (e *StatementRefused) Error() string { return e.Message }

// TenantChanged is the answer to PUT /_admin/tenants/<t> and to an
// image installed with PUT .../file.
type TenantChanged struct {
	Tenant string `json:"tenant"`
}

// Identity is GET /_admin/node: the id the node made at its first start
// and keeps in its directory.
type Identity struct {
	ID string `json:"id"`
}

// Restored is the answer to PUT /_admin/tenants/<t>/file?replace=true
// (200 when a live tenant was replaced, 201 when there was none): where
// the restored file starts — its seq, the history it forked, its lineage
// (the image's first history).
type Restored struct {
	Tenant   string `json:"tenant"`
	Replaced bool   `json:"replaced"`
	Seq      uint64 `json:"seq"`
	History  uint64 `json:"history"`
	Lineage  uint64 `json:"lineage"`
}

// Compacted is the answer to POST /_admin/tenants/<t>/compact: the file's
// bytes after it and before.
type Compacted struct {
	Tenant  string `json:"tenant"`
	Bytes   int64  `json:"bytes"`
	Was     int64  `json:"was"`
	Message string `json:"message"`
}
