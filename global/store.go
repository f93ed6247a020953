package global

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Store reads and writes fenec's typed records in a Directory. Every read
// returns the record's revision; every write is one transaction conditioned
// on revisions the caller read (Txn), so two routers acting on the same
// reading cannot both succeed.
//
// A Store may be fenced on the term it read (Fenced): each of its
// transactions then also requires the term key unchanged, so a router deposed
// by a promotion writes nothing more.
type Store struct {
	dir     Directory
	now     func() time.Time
	fence   bool
	termRev int64
	guards  []Cond // conditions every transaction also requires
}

// StoreOption configures a Store.
type StoreOption func(*Store)

// WithClock sets the clock used for the times the Store records (a
// leader's since); time.Now by default.
func WithClock(now func() time.Time) StoreOption { return func(s *Store) { s.now = now } }

// NewStore returns a Store over d. It does not own d.
func NewStore(d Directory, opts ...StoreOption) *Store {
	s := &Store{dir: d, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Directory returns the directory the Store reads and writes.
func (s *Store) Directory() Directory { return s.dir }

// Fenced returns a Store whose every transaction also requires the term key
// to be at termRev (as read with Term): once a promotion moves the term on,
// its writes fail with ErrConflict.
func (s *Store) Fenced(termRev int64) *Store {
	c := *s
	c.fence, c.termRev = true, termRev
	return &c
}

// Guarded returns a Store whose every transaction also requires conds
// (say, a region record at the revision its owner was checked at: a
// handoff that moves the record on makes the change fail rather than land
// on the side that no longer owns the region).
func (s *Store) Guarded(conds ...Cond) *Store {
	c := *s
	c.guards = append(append([]Cond(nil), s.guards...), conds...)
	return &c
}

// Fence reads the term and returns the Store fenced on it, with the term
// read. A router that moves the term itself (Promote, ClaimLeader) fences
// again afterwards.
func (s *Store) Fence(ctx context.Context) (*Store, Versioned[uint64], error) {
	term, err := s.Term(ctx)
	if err != nil {
		return nil, Versioned[uint64]{}, fmt.Errorf("fence: %w", err)
	}
	return s.Fenced(term.Rev), term, nil
}

// get reads and decodes one record; ErrNotFound if absent, a
// *RecordNotFound when the key is a record's of the layout.
func get[T any](ctx context.Context, s *Store, key string) (Versioned[T], error) {
	kv, err := s.dir.Get(ctx, key)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return Versioned[T]{}, notFound(key)
		}
		return Versioned[T]{}, err
	}
	return decode[T](kv)
}

// notFound names the record at key, absent, by its kind and name.
func notFound(key string) error {
	for prefix, kind := range map[string]string{PrefixNodes: "node", PrefixTenants: "tenant", PrefixRegions: "region", PrefixQuotas: "quota"} {
		if name, ok := strings.CutPrefix(key, prefix); ok {
			return &RecordNotFound{Kind: kind, Name: name}
		}
	}
	return fmt.Errorf("%s: %w", key, ErrNotFound)
}

// getMeta reads a meta record, the zero value at revision 0 if absent.
func getMeta[T any](ctx context.Context, s *Store, key string) (Versioned[T], error) {
	v, err := get[T](ctx, s, key)
	if errors.Is(err, ErrNotFound) {
		return Versioned[T]{}, nil
	}
	return v, err
}

// list reads every record under prefix, by name, and the list's revision.
func list[T any](ctx context.Context, s *Store, prefix string) (map[string]Versioned[T], int64, error) {
	kvs, rev, err := s.dir.List(ctx, prefix)
	if err != nil {
		return nil, 0, err
	}
	out := make(map[string]Versioned[T], len(kvs))
	for _, kv := range kvs {
		name := strings.TrimPrefix(kv.Key, prefix)
		if !ValidName(name) {
			continue // not a record of the layout: left alone
		}
		v, err := decode[T](kv)
		if err != nil {
			return nil, 0, err
		}
		out[name] = v
	}
	return out, rev, nil
}

// Term returns the directory's term (0 at revision 0 before any).
func (s *Store) Term(ctx context.Context) (Versioned[uint64], error) {
	return getMeta[uint64](ctx, s, KeyTerm)
}

// Leader returns the leader record (zero at revision 0 before any).
func (s *Store) Leader(ctx context.Context) (Versioned[Leader], error) {
	return getMeta[Leader](ctx, s, KeyLeader)
}

// LeaseRecord returns the longest-lease record in milliseconds (0 at
// revision 0 before any).
func (s *Store) LeaseRecord(ctx context.Context) (Versioned[int64], error) {
	return getMeta[int64](ctx, s, KeyLeaseRecord)
}

// GetRegion returns region r; ErrNotFound if absent.
func (s *Store) GetRegion(ctx context.Context, r string) (Versioned[Region], error) {
	if err := CheckName("region", r); err != nil {
		return Versioned[Region]{}, err
	}
	return get[Region](ctx, s, RegionKey(r))
}

// GetNode returns node n; ErrNotFound if absent.
func (s *Store) GetNode(ctx context.Context, n string) (Versioned[Node], error) {
	if err := CheckName("node", n); err != nil {
		return Versioned[Node]{}, err
	}
	return get[Node](ctx, s, NodeKey(n))
}

// NodeRetries bounds how often a write conditioned on a node's record
// (WriteNode, a tenant placed on the node) reads the record again after
// another change to it won the race.
const NodeRetries = 8

// WriteNode reads node name's record (a zero one, found false, when there
// is none and create allows it), lets change edit it, and writes it back
// conditioned on the revision read. Another writer may change other fields
// of the same record meanwhile (the leasing router marks lease:true, an
// operator names a standby), so a lost race reads the record again and
// reapplies change rather than refusing the caller. It answers the
// revision written, or 0 when change left the record as it was.
func (s *Store) WriteNode(ctx context.Context, name string, create bool, change func(n *Node, found bool) bool) (int64, error) {
	var err error
	for range NodeRetries {
		cur, gerr := s.GetNode(ctx, name)
		found := gerr == nil
		if !found && (!create || !errors.Is(gerr, ErrNotFound)) {
			return 0, gerr
		}
		rec := cur.Value
		if !change(&rec, found) {
			return 0, nil
		}
		var rev int64
		if rev, err = s.Txn().PutNode(name, cur.Rev, rec).Commit(ctx); err == nil {
			return rev, nil
		}
		if !errors.Is(err, ErrConflict) {
			return 0, err
		}
	}
	return 0, err
}

// GetTenant returns tenant t; ErrNotFound if absent.
func (s *Store) GetTenant(ctx context.Context, t string) (Versioned[Tenant], error) {
	if err := CheckName("tenant", t); err != nil {
		return Versioned[Tenant]{}, err
	}
	return get[Tenant](ctx, s, TenantKey(t))
}

// GetQuota returns tenant t's quota; ErrNotFound if it has none.
func (s *Store) GetQuota(ctx context.Context, t string) (Versioned[Quota], error) {
	if err := CheckName("tenant", t); err != nil {
		return Versioned[Quota]{}, err
	}
	return get[Quota](ctx, s, QuotaKey(t))
}

// GetStandby returns the standby recorded for node n; ErrNotFound if it
// has none.
func (s *Store) GetStandby(ctx context.Context, n string) (Versioned[string], error) {
	if err := CheckName("node", n); err != nil {
		return Versioned[string]{}, err
	}
	return get[string](ctx, s, StandbyKey(n))
}

// ListRegions returns every region by name, and the list's revision.
func (s *Store) ListRegions(ctx context.Context) (map[string]Versioned[Region], int64, error) {
	return list[Region](ctx, s, PrefixRegions)
}

// ListNodes returns every node by name, and the list's revision.
func (s *Store) ListNodes(ctx context.Context) (map[string]Versioned[Node], int64, error) {
	return list[Node](ctx, s, PrefixNodes)
}

// ListTenants returns every tenant by name, and the list's revision.
func (s *Store) ListTenants(ctx context.Context) (map[string]Versioned[Tenant], int64, error) {
	return list[Tenant](ctx, s, PrefixTenants)
}

// ListQuotas returns every quota by tenant name, and the list's revision.
func (s *Store) ListQuotas(ctx context.Context) (map[string]Versioned[Quota], int64, error) {
	return list[Quota](ctx, s, PrefixQuotas)
}
