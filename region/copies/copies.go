package copies

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/region/nodeapi"
)

// Deps are everything the copies use of the router. Every store passed
// with them is the one the call was given.
type Deps struct {
	// Nodes is the router's client for nodes' admin API.
	Nodes *nodeapi.Client
	// Own guards s on region's record, or refuses when this router's side
	// does not lease region (the router's owner.go).
	Own func(ctx context.Context, s *global.Store, region string) (*global.Store, error)
	// Apart asks both nodes, now, that target is not keep under another
	// name, and answers target's record with its id (the router's
	// identity.go): nothing on target is deleted before.
	Apart func(ctx context.Context, s *global.Store, keep, target string) (global.Node, error)
	// Fittest is the node of cands with the fewest bytes on disk, or why
	// none answered its sizes.
	Fittest func(ctx context.Context, cands map[string]global.Node) (string, error)

	// The router's voting copies (package region/repair). PickReplica is the node
	// the router would place t's voting copy on ("" when none can take
	// it; spread: one of the region's, not only a standby); AddReplica
	// gives tenant name a voting copy on target, the one it had deleted
	// once the new one follows; RecordLineage records the lineage off the
	// tenant's primary; AwaitCopy waits until the copy on n holds its
	// primary's image; RemoveStale deletes the tenant's file on stale once
	// stale has been told apart from every node of keep.
	PickReplica   func(ctx context.Context, s *global.Store, t global.Tenant, spread bool) (string, error)
	AddReplica    func(ctx context.Context, s *global.Store, name, target string) error
	RecordLineage func(ctx context.Context, s *global.Store, name string) (global.Versioned[global.Tenant], error)
	AwaitCopy     func(ctx context.Context, n global.Node, tenant string, lineage uint64) error
	RemoveStale   func(ctx context.Context, s *global.Store, tenant, stale string, keep ...string) error

	// Settle waits (bounded) until the router's view holds revision rev.
	Settle func(ctx context.Context, rev int64)
	// UnknownNode and UnknownTenant say the directory's not-found as the
	// API does (the router's notfound.go); any other error is returned as
	// it is. Held is the refusal of a tenant another operation holds.
	UnknownNode   func(err error) error
	UnknownTenant func(err error) error
	Held          func(tenant, by string) error
	Log           *slog.Logger
}

// Copies places, keeps and drops tenants' copies in other regions than
// their primary's. Its methods may run at once, but Point only from one
// goroutine (the router's repair loop).
type Copies struct {
	deps Deps
	log  *slog.Logger
	// seen is, per read copy ("tenant/node"), the primary's address it was
	// last seen following, so Point asks a copy again only when its
	// tenant's primary changed. Point's alone.
	seen map[string]string
}

// New returns the copies over deps.
func New(deps Deps) *Copies {
	if deps.Log == nil {
		deps.Log = slog.New(slog.DiscardHandler)
	}
	return &Copies{deps: deps, log: deps.Log, seen: map[string]string{}}
}

// GloballyLeased refuses node n unless its region is leased by the global
// tier (a region that leases itself places its own nodes' files, and no
// directory outside it could follow its failovers).
func (c *Copies) GloballyLeased(ctx context.Context, s *global.Store, n string) error {
	node, err := s.GetNode(ctx, n)
	if err != nil {
		return c.deps.UnknownNode(err)
	}
	if _, err := c.deps.Own(ctx, s, node.Value.Region); err != nil {
		return fmt.Errorf("node %s's region %q is not leased by the global tier: %w", n, node.Value.Region, err)
	}
	return nil
}
