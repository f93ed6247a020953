package region

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/wire"
)

// Read copies (docs/regions.md, "Reads near the reader"): a tenant's
// copies in other regions that follow its primary with what it has
// committed and answer reads a router near them sends there. They are the
// global tier's: set by its leading router, only for tenants and on nodes
// of regions it leases, so that one directory places them and follows
// every failover and move of their primary. Whether a copy's answer is
// fresh enough is the copy's to prove (package node, Fenec-Staleness-Ms):
// nothing here decides it, and a copy left following a primary that moved
// on answers no bounded read until it follows the new one.

// ErrReadCopy: a read copy cannot be placed or kept where asked (409).
var ErrReadCopy = errors.New("read copy refused")

// readCopiesBody is PUT /_shard/tenants/<t>/read-copies: the nodes that
// are to hold the tenant's read copies, all of them (an empty list drops
// every one), or the regions to hold one each (the router picks the node:
// readregions.go).
type readCopiesBody struct {
	Nodes   *[]string `json:"nodes"`
	Regions *[]string `json:"regions"`
}

// readCopiesAnswer is what the PUT answers: the tenant's primary and its
// read copies now, and what changed.
type readCopiesAnswer struct {
	Tenant     string   `json:"tenant"`
	Node       string   `json:"node"`
	ReadCopies []string `json:"read_copies"`
	Added      []string `json:"added"`
	Dropped    []string `json:"dropped"`
}

// putReadCopies sets tenant name's read copies to the nodes the body
// lists: new ones made (each caught up with the primary's image before it
// is recorded), ones no longer listed dropped from the record first and
// then deleted on their nodes.
func (c *shardCall) putReadCopies(s *global.Store, name string) (int, any, error) {
	if c.rt.mirroring() {
		return 0, nil, fmt.Errorf("%w: read copies are set on the global tier's leading router", ErrMirrored)
	}
	var body readCopiesBody
	if err := c.decode(&body); err != nil {
		return 0, nil, err
	}
	switch {
	case body.Nodes != nil && body.Regions != nil:
		return 0, nil, fmt.Errorf(`%w: name the nodes to hold the tenant's read copies ({"nodes": ["us1"]}) or the regions to hold one each ({"regions": ["us"]}), not both`, ErrBadRequest)
	case body.Nodes == nil && body.Regions == nil:
		return 0, nil, fmt.Errorf(`%w: the body names the nodes to hold the tenant's read copies: {"nodes": ["us1"]}, or the regions to hold one each: {"regions": ["us"]} ({"nodes": []} drops them all)`, ErrBadRequest)
	}
	want, what := body.Nodes, "node"
	if body.Regions != nil {
		want, what = body.Regions, "region"
	}
	if err := checkNames(*want, what); err != nil {
		return 0, nil, err
	}
	ctx := c.r.Context()
	at, err := s.GetTenant(ctx, name)
	if err != nil {
		return 0, nil, errNotFoundAs(err, ErrUnknownTenant)
	}
	if err := c.rt.globallyLeased(ctx, s, at.Value.Node); err != nil {
		return 0, nil, fmt.Errorf("%w: tenant %s: %w", ErrReadCopy, name, err)
	}
	if body.Regions != nil {
		if want, err = c.rt.readCopyNodes(ctx, s, name, at.Value, *body.Regions); err != nil {
			return 0, nil, err
		}
	}
	return c.setReadCopies(s, name, at, *want)
}

// checkNames refuses a list of read copies' nodes or regions that is too
// long, holds something not a name, or names one twice.
func checkNames(names []string, what string) error {
	if len(names) > global.MaxReadCopies {
		return fmt.Errorf("%w: %d read copies asked, at most %d", ErrBadRequest, len(names), global.MaxReadCopies)
	}
	for i, n := range names {
		if !global.ValidName(n) {
			return fmt.Errorf("%w: %s name %q is not a name", ErrBadRequest, what, n)
		}
		if slices.Contains(names[:i], n) {
			return fmt.Errorf("%w: %s %s listed twice", ErrBadRequest, what, n)
		}
	}
	return nil
}

// setReadCopies makes tenant name's read copies the nodes of want: those
// not named dropped, new ones made.
func (c *shardCall) setReadCopies(s *global.Store, name string, at global.Versioned[global.Tenant], want []string) (int, any, error) {
	ctx := c.r.Context()
	have := at.Value.ReadCopies.Names()
	ans := readCopiesAnswer{Tenant: name, Node: at.Value.Node, Added: []string{}, Dropped: []string{}}
	for _, n := range have {
		if !slices.Contains(want, n) {
			if err := c.rt.dropReadCopy(ctx, s, name, n); err != nil {
				return 0, nil, err
			}
			ans.Dropped = append(ans.Dropped, n)
		}
	}
	for _, n := range want {
		if slices.Contains(have, n) {
			continue
		}
		if err := c.rt.addReadCopy(ctx, s, name, n); err != nil {
			return 0, nil, err
		}
		ans.Added = append(ans.Added, n)
	}
	now, err := s.GetTenant(ctx, name)
	if err != nil {
		return 0, nil, err
	}
	c.settle(now.Rev)
	ans.Node, ans.ReadCopies = now.Value.Node, now.Value.ReadCopies.Names()
	if ans.ReadCopies == nil {
		ans.ReadCopies = []string{}
	}
	return http.StatusOK, ans, nil
}

// globallyLeased refuses node n unless its region is leased by the global
// tier (a region that leases itself places its own nodes' files, and no
// directory outside it could follow its failovers).
func (rt *Router) globallyLeased(ctx context.Context, s *global.Store, n string) error {
	node, err := s.GetNode(ctx, n)
	if err != nil {
		return errNotFoundAs(err, ErrUnknownNode)
	}
	if _, err := rt.own(ctx, s, node.Value.Region); err != nil {
		return fmt.Errorf("node %s's region %q is not leased by the global tier: %w", n, node.Value.Region, err)
	}
	return nil
}

// addReadCopy makes a read copy of tenant name on node target: the node
// makes the file anew and follows the primary as a read copy; once it
// holds the primary's image the directory records it.
func (rt *Router) addReadCopy(ctx context.Context, s *global.Store, name, target string) error {
	at, err := rt.recordLineage(ctx, s, name)
	if err != nil {
		return err
	}
	t := at.Value
	if t.HeldBy != "" {
		return &heldError{tenant: name, by: t.HeldBy}
	}
	if target == t.Node || target == t.Replica || target == t.Target {
		return fmt.Errorf("%w: %s holds tenant %s already (its primary, its voting copy or a move's target): choose another node", ErrReadCopy, target, name)
	}
	node, err := s.GetNode(ctx, target)
	if err != nil {
		return errNotFoundAs(err, ErrUnknownNode)
	}
	if err := rt.globallyLeased(ctx, s, target); err != nil {
		return fmt.Errorf("%w: %w", ErrReadCopy, err)
	}
	if node.Value.Standby {
		return fmt.Errorf("%w: %s is a standby, kept for failovers: choose another node", ErrReadCopy, target)
	}
	primary, err := s.GetNode(ctx, t.Node)
	if err != nil {
		return errNotFoundAs(err, ErrUnknownNode)
	}
	if node.Value.Region == primary.Value.Region {
		return fmt.Errorf("%w: %s is in %s's own region %q, where its voting copy serves: a read copy serves readers of another region", ErrReadCopy, target, name, node.Value.Region)
	}
	if err := rt.nodes.CheckToken(ctx, primary.Value); err != nil {
		return fmt.Errorf("primary %s of %s does not answer: %w", t.Node, name, err)
	}
	dst, err := rt.apart(ctx, s, t.Node, target)
	if err != nil {
		return fmt.Errorf("read copy of %s on %s: %w", name, target, err)
	}
	if _, err := rt.nodes.Remove(ctx, dst, name); err != nil {
		return fmt.Errorf("delete a stale file of %s on %s: %w", name, target, err)
	}
	if err := rt.nodes.Create(ctx, dst, name); err != nil {
		return fmt.Errorf("create a read copy of %s on %s: %w", name, target, err)
	}
	if err := rt.nodes.FollowAs(ctx, dst, target, name, primary.Value, wire.RoleRead); err != nil {
		return fmt.Errorf("read copy of %s on %s: %w", name, target, err)
	}
	if err := rt.awaitCopy(ctx, dst, name, t.Lineage); err != nil {
		return fmt.Errorf("read copy of %s on %s: %w", name, target, err)
	}
	rec, err := s.UpdateTenant(ctx, name, at, func(t *global.Tenant) error {
		if t.Node == target || t.Replica == target || t.Target == target {
			return fmt.Errorf("%w: %s became tenant %s's primary or copy meanwhile", ErrReadCopy, target, name)
		}
		if !t.ReadCopies.Has(target) {
			t.ReadCopies = global.MakeNodeList(append(t.ReadCopies.Names(), target)...)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record the read copy of %s on %s: %w", name, target, err)
	}
	rt.settleTo(ctx, rec.Rev)
	rt.log.Info("read copy made", "tenant", name, "primary", t.Node, "read_copy", target, "region", node.Value.Region)
	return nil
}

// dropReadCopy takes node n off tenant name's read copies, then deletes
// its file there (best effort once the record no longer names it: no
// router sends it a read from then on).
func (rt *Router) dropReadCopy(ctx context.Context, s *global.Store, name, n string) error {
	at, err := s.GetTenant(ctx, name)
	if err != nil {
		return errNotFoundAs(err, ErrUnknownTenant)
	}
	rec, err := s.UpdateTenant(ctx, name, at, func(t *global.Tenant) error {
		t.ReadCopies = global.MakeNodeList(slices.DeleteFunc(t.ReadCopies.Names(), func(x string) bool { return x == n })...)
		return nil
	})
	if err != nil {
		return fmt.Errorf("forget the read copy of %s on %s: %w", name, n, err)
	}
	rt.settleTo(ctx, rec.Rev)
	if err := rt.removeStale(ctx, s, name, n, rec.Value.Node, rec.Value.Replica); err != nil {
		rt.log.Warn("read copy forgotten but its file not deleted", "tenant", name, "node", n, "err", err)
	}
	rt.log.Info("read copy dropped", "tenant", name, "node", n)
	return nil
}

// readPointer remembers, per read copy ("tenant/node"), the primary's
// address it was last seen following, so the repair asks a copy again
// only when its tenant's primary changed. Its zero value is ready; it is
// used by the repair loop alone.
type readPointer struct{ seen map[string]string }

// pointReadCopies has every read copy of the tenants in tenants follow
// its tenant's primary now (after a failover or a move): a copy that
// follows another node, or has lost its role, is told again. Copies that
// do not answer are left for the next round.
func (rt *Router) pointReadCopies(ctx context.Context, tenants map[string]global.Versioned[global.Tenant], nodes map[string]global.Versioned[global.Node]) {
	for name, rec := range tenants {
		t := rec.Value
		if t.ReadCopies == "" || t.State != global.StateActive || t.HeldBy != "" {
			continue
		}
		primary, ok := nodes[t.Node]
		if !ok || global.UsableNode(primary.Value) != nil {
			continue
		}
		want := wire.BaseURL(primary.Value.Addr)
		for _, n := range t.ReadCopies.Names() {
			if rt.reads.seen[name+"/"+n] == want {
				continue
			}
			node, ok := nodes[n]
			if !ok || global.UsableNode(node.Value) != nil {
				continue
			}
			st, err := rt.nodes.Replication(ctx, node.Value, name)
			if err != nil {
				continue // down, or lost the file: the next round asks again
			}
			if st.Role != "primary" && st.CopyRole == wire.RoleRead && st.From == want {
				rt.reads.note(name, n, want)
				continue
			}
			if st.Role == "primary" {
				rt.log.Warn("a read copy answers as a primary: left alone, drop it by hand", "tenant", name, "node", n)
				continue
			}
			if err := rt.nodes.FollowAs(ctx, node.Value, n, name, primary.Value, wire.RoleRead); err != nil {
				rt.log.Warn("read copy not told to follow its primary", "tenant", name, "node", n, "err", err)
				continue
			}
			rt.reads.note(name, n, want)
			rt.log.Info("read copy follows the tenant's primary now", "tenant", name, "node", n, "primary", t.Node)
		}
	}
	rt.reads.forget(tenants)
}

func (p *readPointer) note(tenant, node, primary string) {
	if p.seen == nil {
		p.seen = map[string]string{}
	}
	p.seen[tenant+"/"+node] = primary
}

// forget drops what it remembers of copies the directory no longer names.
func (p *readPointer) forget(tenants map[string]global.Versioned[global.Tenant]) {
	for k := range p.seen {
		t, n, _ := strings.Cut(k, "/")
		if rec, ok := tenants[t]; !ok || !rec.Value.ReadCopies.Has(n) {
			delete(p.seen, k)
		}
	}
}
