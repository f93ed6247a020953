package global

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fenec-go/fenec/wire"
)

// Versioned is a record with the revision of its last change, as read. Rev 0
// means the record was absent; a transaction conditioned on it then requires
// that it still is.
type Versioned[T any] struct {
	Value T
	Rev   int64
}

// Leaser values of Region.Leaser: which directory leases a region's nodes.
const (
	LeaserGlobal = "global"
	LeaserRegion = "region"
)

// Leader is the router that takes changes, and the term it took the lead at.
type Leader struct {
	Router string    `json:"router"`
	Term   uint64    `json:"term"`
	Since  time.Time `json:"since"`
}

// Validate checks the record.
func (l Leader) Validate() error {
	if err := CheckName("router", l.Router); err != nil {
		return err
	}
	if l.Term == 0 {
		return fmt.Errorf("leader %s at term 0: %w", l.Router, ErrInvalidRecord)
	}
	return nil
}

// Region is one region and who leases its nodes (docs/regions.md).
type Region struct {
	Name string `json:"name"`
	// Leaser is the side leasing the region's nodes (LeaserGlobal or
	// LeaserRegion), or that leased them before a handoff in flight.
	Leaser string `json:"leaser"`
	// Epoch counts the changes of hands: +1 for a handoff, +2 for a forced
	// takeover. Grants carry it; a node refuses an earlier one.
	Epoch uint64 `json:"epoch,omitempty"`
	// Since is when Leaser last changed.
	Since time.Time `json:"since,omitzero"`
	// Router, Term and LeaseRecordMS are the leasing side's leading
	// router, its directory's term and longest-lease record, as that
	// router last wrote them (a region's router writes them into the
	// global directory too).
	Router        string `json:"router,omitempty"`
	Term          uint64 `json:"term,omitempty"`
	LeaseRecordMS int64  `json:"lease_record_ms,omitempty"`
	// Handoff is the handoff in flight, or the last one.
	Handoff *Handoff `json:"handoff,omitempty"`
}

// Handoff is one change of hands of a region's leasing (DESIGN.md §7,
// docs/regions.md): its state, and what the giver tells the taker — its
// term, the longest lease it may have granted and when it last granted —
// so the taker counts every node as granted at the handoff.
type Handoff struct {
	From  string `json:"from"` // LeaserGlobal or LeaserRegion: the giver
	To    string `json:"to"`
	State string `json:"state"` // HandoffOffered, HandoffReady, HandoffGiven, HandoffDone, HandoffRolledBack
	// Seq numbers the region's handoffs, from 1: a later one's states are
	// newer than an earlier one's, whatever their order.
	Seq uint64 `json:"seq"`
	// Force: taken by the region without the global tier.
	Force         bool      `json:"force,omitempty"`
	Term          uint64    `json:"term"`            // the giver's term when it gave
	LeaseRecordMS int64     `json:"lease_record_ms"` // the giver's longest-lease record
	LastGrant     time.Time `json:"last_grant"`      // when the giver last granted to the region's nodes
	At            time.Time `json:"at"`              // when it was asked for
	Updated       time.Time `json:"updated,omitzero"`
	Asked         string    `json:"asked,omitempty"` // the router the operator asked
	Giver         string    `json:"giver,omitempty"` // the giving router
	Taker         string    `json:"taker,omitempty"` // the taking router
	Why           string    `json:"why,omitempty"`   // why it was rolled back, or how the global tier learned of it
}

// Validate checks the record.
func (r Region) Validate() error {
	if err := CheckName("region", r.Name); err != nil {
		return err
	}
	if r.Leaser != LeaserGlobal && r.Leaser != LeaserRegion {
		return fmt.Errorf("region %s leaser %q: %w", r.Name, r.Leaser, ErrInvalidRecord)
	}
	if h := r.Handoff; h != nil {
		for _, side := range []string{h.From, h.To} {
			if side != LeaserGlobal && side != LeaserRegion {
				return fmt.Errorf("region %s handoff side %q: %w", r.Name, side, ErrInvalidRecord)
			}
		}
		switch h.State {
		case HandoffOffered, HandoffReady, HandoffGiven, HandoffDone, HandoffRolledBack:
		default:
			return fmt.Errorf("region %s handoff state %q: %w", r.Name, h.State, ErrInvalidRecord)
		}
		if h.From == h.To {
			return fmt.Errorf("region %s handoff from %s to itself: %w", r.Name, h.From, ErrInvalidRecord)
		}
	}
	return nil
}

// Node is one fenec-node: where it answers, its admin token (never returned
// by the API), its region, whether it takes leases, and the id the node
// keeps of itself (empty in a record written before ids, until the router
// learns it).
type Node struct {
	Addr    string `json:"addr"`
	Token   string `json:"token"`
	Region  string `json:"region"`
	Standby bool   `json:"standby,omitempty"`
	Lease   bool   `json:"lease"`
	ID      string `json:"id,omitempty"`
	// Sealed is the token as the directory holds it, sealed under the
	// routers' key (Sealing). A record read through Sealing has it only
	// when it did not open: such a record is not used (UsableNode).
	Sealed string `json:"sealed,omitempty"`
	// Clear marks a record read through Sealing with a key whose token the
	// directory holds in clear: not used until it is sealed (UsableNode).
	Clear bool `json:"clear,omitempty"`
	// Rekey marks a record read through Sealing whose token opened under
	// a key other than the first: usable, and sealed again under the first
	// when the leading router starts (a key rotation).
	Rekey bool `json:"rekey,omitempty"`
	// Lapsed is when the router leasing the node failed it over because
	// its lease had certainly lapsed (zero: it has not, or it answered its
	// grants since). Routers answer the tenants left on it 503 at once,
	// naming it and its region, rather than sending them to a node gone
	// (docs/regions.md, "A region lost whole"). Set and cleared only by
	// the router leasing the node; recording the node again clears it.
	Lapsed time.Time `json:"lapsed_at,omitzero"`
}

// Validate checks the record.
func (n Node) Validate() error {
	if n.Addr == "" {
		return fmt.Errorf("node without addr: %w", ErrInvalidRecord)
	}
	return CheckName("region", n.Region)
}

// TenantState is a tenant's state in the directory.
type TenantState string

// Tenant states.
const (
	StateActive TenantState = "active" // served by Node
	StateMoving TenantState = "moving" // served by Node, being copied to Target
)

// Tenant is where a tenant lives and what its failovers need to know.
type Tenant struct {
	Node  string      `json:"node"`
	State TenantState `json:"state"`
	// Replica is the node holding the tenant's copy, if any.
	Replica string `json:"replica,omitempty"`
	// Lineage is the first history of the tenant's file: a copy of another
	// lineage is not this tenant.
	Lineage uint64 `json:"lineage"`
	// ForkedHistory is the history the primary forked at its last failover
	// (0 before any).
	ForkedHistory uint64 `json:"forked_history"`
	// FailedFrom names the node the last failover took the tenant off; set
	// only by a failover, cleared by a move.
	FailedFrom string `json:"failed_from,omitempty"`
	// HeldBy names the operation holding the tenant (a quota being set, a
	// move); a failover of its node waits for it.
	HeldBy string `json:"held_by,omitempty"`
	// Target is a move's destination while State is moving.
	Target string `json:"target,omitempty"`
	// MoveStep is how far a move by following has gone while State is
	// moving (MoveFollowing, MoveSwitching, MovePromoting; "" for a move
	// by image, or before its target follows): what a router recovering
	// the move finishes or puts back from.
	MoveStep string `json:"move_step,omitempty"`
	// MoveSeq is the source's last seq once frozen, recorded with
	// MovePromoting: the target held it when it was promoted.
	MoveSeq uint64 `json:"move_seq,omitempty"`
	// ReplicaBehind, when not 0, records that the replica may lack writes
	// the primary answered: under --sync always the primary asked (at
	// this seq) for it to be recorded so before answering them, its copy
	// having acknowledged nothing for the bound. No failover promotes the
	// replica unforced until the primary says it caught up. A failover or
	// a move clears it.
	ReplicaBehind uint64 `json:"replica_behind,omitempty"`
	// ReadCopies names the nodes holding the tenant's read copies: copies
	// that follow the primary with what it has committed, are never
	// waited for nor promoted, and answer reads routed to them by a
	// router near them that ask a bound on staleness (Fenec-Max-Staleness)
	// or a seq (Fenec-After). Set only by the global tier.
	ReadCopies NodeList `json:"read_copies,omitempty"`
	// Survive is what the tenant must outlive: "" (SurviveZone, a node
	// of its region: its copy is in its region) or SurviveRegion (its
	// region lost whole: its voting copy is in another region). Set only
	// by the global tier.
	Survive string `json:"survive,omitempty"`
}

// The survival goals of a tenant (Tenant.Survive; "" is SurviveZone).
const (
	SurviveZone   = "zone"
	SurviveRegion = "region"
)

// NodeList is a list of node names kept comparable, so that a record
// holding it compares with ==: in JSON, an array of names.
type NodeList string

// MakeNodeList makes the list of names (none: "").
func MakeNodeList(names ...string) NodeList { return NodeList(strings.Join(names, ",")) }

// Names returns the names in order (none: nil).
func (l NodeList) Names() []string {
	if l == "" {
		return nil
	}
	return strings.Split(string(l), ",")
}

// Has says whether name is in the list.
func (l NodeList) Has(name string) bool { return slices.Contains(l.Names(), name) }

// MarshalJSON writes the list as an array of names.
func (l NodeList) MarshalJSON() ([]byte, error) {
	names := l.Names()
	if names == nil {
		names = []string{}
	}
	return json.Marshal(names)
}

// UnmarshalJSON reads an array of names; a name holding a comma is
// refused (CheckName would refuse it anyway).
func (l *NodeList) UnmarshalJSON(b []byte) error {
	var names []string
	if err := json.Unmarshal(b, &names); err != nil {
		return err
	}
	for _, n := range names {
		if n == "" || strings.Contains(n, ",") {
			return fmt.Errorf("node name %q in a list: %w", n, ErrInvalidRecord)
		}
	}
	*l = MakeNodeList(names...)
	return nil
}

// MaxReadCopies bounds a tenant's read copies: each costs its primary a
// feed and its node a file.
const MaxReadCopies = 8

// Validate checks the record.
func (t Tenant) Validate() error {
	if err := CheckName("node", t.Node); err != nil {
		return err
	}
	switch t.State {
	case StateActive:
		if t.Target != "" {
			return fmt.Errorf("active tenant with a move target %q: %w", t.Target, ErrInvalidRecord)
		}
	case StateMoving:
		if err := CheckName("move target", t.Target); err != nil {
			return err
		}
		if t.Target == t.Node {
			return fmt.Errorf("move from %s onto itself: %w", t.Node, ErrInvalidRecord)
		}
	default:
		return fmt.Errorf("tenant state %q: %w", t.State, ErrInvalidRecord)
	}
	for what, n := range map[string]string{"replica": t.Replica, "failed_from": t.FailedFrom} {
		if n != "" {
			if err := CheckName(what, n); err != nil {
				return err
			}
		}
	}
	if t.Replica != "" && t.Replica == t.Node {
		return fmt.Errorf("replica on its own primary %s: %w", t.Node, ErrInvalidRecord)
	}
	if t.Survive != "" && t.Survive != SurviveRegion {
		return fmt.Errorf("survive %q: %w", t.Survive, ErrInvalidRecord)
	}
	reads := t.ReadCopies.Names()
	if len(reads) > MaxReadCopies {
		return fmt.Errorf("%d read copies, more than %d: %w", len(reads), MaxReadCopies, ErrInvalidRecord)
	}
	for i, n := range reads {
		if err := CheckName("read copy", n); err != nil {
			return err
		}
		if n == t.Node || n == t.Replica || n == t.Target || slices.Contains(reads[:i], n) {
			return fmt.Errorf("read copy on %s, which holds the tenant already: %w", n, ErrInvalidRecord)
		}
	}
	return nil
}

// Quota is a tenant's limits; 0 means no limit. It is the node's own
// quota (the admin API's, package wire), kept as the directory's record.
type Quota = wire.Quota

// validator is a record that checks itself.
type validator interface{ Validate() error }

// encode validates v and returns its JSON.
func encode(v any) ([]byte, error) {
	if val, ok := v.(validator); ok {
		if err := val.Validate(); err != nil {
			if !errors.Is(err, ErrInvalidRecord) {
				err = fmt.Errorf("%w: %w", ErrInvalidRecord, err)
			}
			return nil, err
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return b, nil
}

// decode parses a stored record.
func decode[T any](kv KV) (Versioned[T], error) {
	var v T
	if err := json.Unmarshal(kv.Value, &v); err != nil {
		return Versioned[T]{}, fmt.Errorf("decode %s: %w: %w", kv.Key, ErrInvalidRecord, err)
	}
	return Versioned[T]{Value: v, Rev: kv.ModRev}, nil
}
