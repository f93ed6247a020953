package region

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/region/nodeapi"
)

// holdDelete is the HeldBy of a tenant being deleted.
const holdDelete = "delete"

// tenantEntry is a tenant as GET /_shard/tenants lists it.
type tenantEntry struct {
	Name    string `json:"name"`
	Node    string `json:"node"`
	State   string `json:"state"`
	Replica string `json:"replica,omitempty"`
	Target  string `json:"target,omitempty"`
	HeldBy  string `json:"held_by,omitempty"`
	// MoveStep is how far a move by following has gone (global.Tenant).
	MoveStep string `json:"move_step,omitempty"`
	// ReplicaBehind: the replica may lack answered writes from this seq
	// on (see global.Tenant); a failover will not promote it unforced.
	ReplicaBehind uint64   `json:"replica_behind,omitempty"`
	ReadCopies    []string `json:"read_copies,omitempty"`
	Survive       string   `json:"survive"`
	// Far: listed by a region's router, the tenant is homed in another
	// region (Home, its primary's, once that node's record is copied
	// down) with a copy in this router's region; its placement changes at
	// the global tier's leading router.
	Far   bool   `json:"far,omitempty"`
	Home  string `json:"home,omitempty"`
	Bytes *int64 `json:"bytes,omitempty"`
}

// listTenants answers every placement, by name, a region's router its far
// tenants too (each with its home region); ?bytes adds each tenant's
// bytes on disk as its node reports them (nodes asked in parallel: a far
// tenant's are not asked, its node being another region's).
func (c *shardCall) listTenants() {
	v, err := c.view()
	if err != nil {
		c.fail(err)
		return
	}
	out := []tenantEntry{}
	used := map[string]global.Node{}
	for name, t := range v.Tenants() {
		out = append(out, newTenantEntry(name, t))
		if n, ok := v.Node(t.Node); ok {
			used[t.Node] = n
		}
	}
	for name, t := range v.FarTenants() {
		e := newTenantEntry(name, t)
		e.Far = true
		if n, ok := v.FarNode(t.Node); ok {
			e.Home = n.Region
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b tenantEntry) int { return cmpString(a.Name, b.Name) })
	if c.r.URL.Query().Has("bytes") {
		sizes := map[string]map[string]int64{}
		for _, m := range measureSizes(c.r.Context(), c.rt.nodes, used, c.rt.cfg.SizesParallel) {
			sizes[m.name] = m.sizes
		}
		for i := range out {
			if b, ok := sizes[out[i].Node][out[i].Name]; ok {
				out[i].Bytes = &b
			}
		}
	}
	cpJSON(c.w, http.StatusOK, out)
}

func newTenantEntry(name string, t global.Tenant) tenantEntry {
	return tenantEntry{Name: name, Node: t.Node, State: string(t.State),
		Replica: t.Replica, Target: t.Target, HeldBy: t.HeldBy, MoveStep: t.MoveStep, ReplicaBehind: t.ReplicaBehind,
		ReadCopies: t.ReadCopies.Names(), Survive: cmp.Or(t.Survive, global.SurviveZone)}
}

// placeTenant creates a tenant on the named node, or on the node of the
// region with the fewest bytes on disk, and records it. The file is made
// first; if recording fails, it is deleted again.
func (c *shardCall) placeTenant(s *global.Store, name string) (int, any, error) {
	if err := global.CheckName("tenant", name); err != nil {
		return 0, nil, err
	}
	var req struct {
		Node   string `json:"node"`
		Region string `json:"region"`
	}
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	ctx := c.r.Context()
	c.rt.opMu.Lock()
	defer c.rt.opMu.Unlock()
	if _, err := s.GetTenant(ctx, name); err == nil {
		return 0, nil, fmt.Errorf("%w: %s", ErrTenantExists, name)
	} else if !isNotFound(err) {
		return 0, nil, err
	}
	nodeName, err := c.chooseNode(s, req.Node, req.Region)
	if err != nil {
		return 0, nil, err
	}
	node, err := s.GetNode(ctx, nodeName)
	if err != nil {
		return 0, nil, errNotFoundAs(err, ErrUnknownNode)
	}
	if s, err = c.rt.sides.own(ctx, s, node.Value.Region); err != nil {
		return 0, nil, err
	}
	if err := c.rt.nodes.Create(ctx, node.Value, name); err != nil {
		return 0, nil, fmt.Errorf("create %s on %s: %w", name, nodeName, err)
	}
	placed, err := c.record(s, name, nodeName, node)
	if err != nil {
		// Not recorded: the empty file made above goes again.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.rt.cfg.NodeTimeout)
		defer cancel()
		if _, derr := c.rt.nodes.Remove(dctx, node.Value, name); derr != nil {
			c.rt.log.Error("delete an unrecorded tenant's file", "tenant", name, "node", nodeName, "err", derr)
		}
		return 0, nil, fmt.Errorf("record %s on %s: %w", name, nodeName, err)
	}
	c.settle(placed.Rev)
	c.rt.repair.AfterPlace(ctx, s, name) // lineage and copy (region/repair)
	c.rt.log.Info("tenant placed", "tenant", name, "node", nodeName)
	return http.StatusCreated, map[string]any{"tenant": name, "node": nodeName}, nil
}

// record writes the tenant's record on the node read at node.Rev. The
// node's record may change as the tenant's file is made on it — its id
// learned, the leasing router marking it leased — which is no reason to
// refuse: the place is recorded against the record read again, as long
// as it still names the node the file was made on.
func (c *shardCall) record(s *global.Store, name, nodeName string, node global.Versioned[global.Node]) (global.Versioned[global.Tenant], error) {
	ctx := c.r.Context()
	t := global.Tenant{Node: nodeName, State: global.StateActive}
	placed, err := s.PlaceTenant(ctx, name, t, node.Rev)
	for range global.NodeRetries {
		if !errors.Is(err, global.ErrConflict) {
			break
		}
		now, gerr := s.GetNode(ctx, nodeName)
		if gerr != nil || !nodeapi.SameAddr(now.Value.Addr, node.Value.Addr) || node.Value.ID != "" && now.Value.ID != node.Value.ID {
			break // gone, or another node by that name now
		}
		node = now
		placed, err = s.PlaceTenant(ctx, name, t, node.Rev)
	}
	return placed, err
}

// chooseNode returns the named node (which must be recorded) or the least
// full node of the region (the request's, else the router's; none: every
// node).
func (c *shardCall) chooseNode(s *global.Store, named, region string) (string, error) {
	if named != "" {
		if err := global.CheckName("node", named); err != nil {
			return "", err
		}
		n, err := s.GetNode(c.r.Context(), named)
		if err != nil {
			return "", errNotFoundAs(err, ErrUnknownNode)
		}
		if region != "" && n.Value.Region != region {
			// Data residency: a tenant asked in one region never lands in
			// another because a node was named.
			return "", fmt.Errorf("%w: node %s is in region %s, not %s: name a node of %s, or no node to have the router pick one",
				ErrBadRequest, named, n.Value.Region, region, region)
		}
		return named, nil
	}
	if region == "" {
		region = c.rt.cfg.Region
	}
	nodes, _, err := s.ListNodes(c.r.Context())
	if err != nil {
		return "", err
	}
	cands := map[string]global.Node{}
	for name, n := range nodes {
		if !n.Value.Standby && (region == "" || n.Value.Region == region) {
			cands[name] = n.Value
		}
	}
	if len(cands) == 0 {
		return "", fmt.Errorf("%w in region %q: record a node of that region (PUT /_shard/nodes/<n>), or name a region GET /_shard/regions lists", ErrNoCandidate, region)
	}
	return leastBytes(measureEach(c.r.Context(), c.rt.nodes, cands, c.rt.cfg.SizesParallel))
}

// deleteTenant holds the tenant, deletes it on its node and its copy, and
// forgets it.
func (c *shardCall) deleteTenant(s *global.Store, name string) (int, any, error) {
	if err := global.CheckName("tenant", name); err != nil {
		return 0, nil, err
	}
	ctx := c.r.Context()
	at, err := s.GetTenant(ctx, name)
	if err != nil {
		return 0, nil, errNotFoundAs(err, ErrUnknownTenant)
	}
	if at.Value.HeldBy != "" {
		return 0, nil, &heldError{tenant: name, by: at.Value.HeldBy}
	}
	held, err := s.Hold(ctx, name, at, holdDelete)
	if err != nil {
		return 0, nil, err
	}
	if err := c.rt.finishDelete(ctx, s, name, held); err != nil {
		if _, rerr := s.Release(context.WithoutCancel(ctx), name, held, holdDelete); rerr != nil {
			c.rt.log.Error("release a tenant after a failed delete", "tenant", name, "err", rerr)
		}
		return 0, nil, err
	}
	c.settleNow(s)
	c.rt.log.Info("tenant deleted", "tenant", name, "node", held.Value.Node)
	return http.StatusNoContent, nil, nil
}

// finishDelete deletes tenant name, held by a delete, on its node and its
// copies, voting and read (a file already gone is fine), then forgets it
// and its quota.
func (rt *Router) finishDelete(ctx context.Context, s *global.Store, name string, held global.Versioned[global.Tenant]) error {
	for _, n := range append([]string{held.Value.Node, held.Value.Replica}, held.Value.ReadCopies.Names()...) {
		if n == "" {
			continue
		}
		node, err := rt.identified(ctx, s, n) // the node recorded, not whoever has its address now
		if err != nil {
			return fmt.Errorf("delete %s on %s: %w", name, n, err)
		}
		if _, err := rt.nodes.Remove(ctx, node, name); err != nil {
			return fmt.Errorf("delete %s on %s: %w", name, n, err)
		}
	}
	q, err := s.GetQuota(ctx, name)
	if err != nil && !isNotFound(err) {
		return err
	}
	if err := s.RemoveTenant(ctx, name, held, q.Rev); err != nil {
		return fmt.Errorf("forget %s: %w", name, err)
	}
	return nil
}

// nodeSizes is one node's sizes per tenant, or why they could not be read.
type nodeSizes struct {
	name  string
	sizes map[string]int64
}

// measureSizes asks each node its sizes per tenant (bounded parallel);
// nodes that do not answer are left out.
func measureSizes(ctx context.Context, nc *nodeapi.Client, nodes map[string]global.Node, limit int) []nodeSizes {
	var out []nodeSizes
	for _, m := range measureEach(ctx, nc, nodes, limit) {
		if m.err == nil {
			out = append(out, nodeSizes{name: m.name, sizes: m.sizes})
		}
	}
	return out
}
