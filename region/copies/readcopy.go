package copies

import (
	"context"
	"fmt"
	"slices"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/wire"
)

// Read copies (docs/regions.md, "Reads near the reader"): a tenant's
// copies in other regions that follow its primary with what it has
// committed and answer reads a router near them sends there. A copy left
// following a primary that moved on answers no bounded read until it
// follows the new one (Point).

// ReadCopies is what PUT /_shard/tenants/<t>/read-copies answers: the
// tenant's primary and its read copies now, and what changed.
type ReadCopies struct {
	Tenant     string   `json:"tenant"`
	Node       string   `json:"node"`
	ReadCopies []string `json:"read_copies"`
	Added      []string `json:"added"`
	Dropped    []string `json:"dropped"`
}

// Set makes tenant name's read copies (its record at) the nodes of want:
// those not named dropped from the record first and then deleted on their
// nodes, new ones made (each caught up with the primary's image before it
// is recorded). It answers once the router's view holds the change.
func (c *Copies) Set(ctx context.Context, s *global.Store, name string, at global.Versioned[global.Tenant], want []string) (ReadCopies, error) {
	have := at.Value.ReadCopies.Names()
	ans := ReadCopies{Tenant: name, Node: at.Value.Node, Added: []string{}, Dropped: []string{}}
	for _, n := range have {
		if !slices.Contains(want, n) {
			if err := c.drop(ctx, s, name, n); err != nil {
				return ReadCopies{}, err
			}
			ans.Dropped = append(ans.Dropped, n)
		}
	}
	for _, n := range want {
		if slices.Contains(have, n) {
			continue
		}
		if err := c.add(ctx, s, name, n); err != nil {
			return ReadCopies{}, err
		}
		ans.Added = append(ans.Added, n)
	}
	now, err := s.GetTenant(ctx, name)
	if err != nil {
		return ReadCopies{}, err
	}
	c.deps.Settle(ctx, now.Rev)
	ans.Node, ans.ReadCopies = now.Value.Node, now.Value.ReadCopies.Names()
	if ans.ReadCopies == nil {
		ans.ReadCopies = []string{}
	}
	return ans, nil
}

// add makes a read copy of tenant name on node target: the node makes the
// file anew and follows the primary as a read copy; once it holds the
// primary's image the directory records it.
func (c *Copies) add(ctx context.Context, s *global.Store, name, target string) error {
	at, err := c.deps.RecordLineage(ctx, s, name)
	if err != nil {
		return err
	}
	t := at.Value
	if t.HeldBy != "" {
		return c.deps.Held(name, t.HeldBy)
	}
	if target == t.Node || target == t.Replica || target == t.Target {
		return fmt.Errorf("%w: %s holds tenant %s already (its primary, its voting copy or a move's target): choose another node", ErrReadCopy, target, name)
	}
	node, err := s.GetNode(ctx, target)
	if err != nil {
		return c.deps.UnknownNode(err)
	}
	if err := c.GloballyLeased(ctx, s, target); err != nil {
		return fmt.Errorf("%w: %w", ErrReadCopy, err)
	}
	if node.Value.Standby {
		return fmt.Errorf("%w: %s is a standby, kept for failovers: choose another node", ErrReadCopy, target)
	}
	primary, err := s.GetNode(ctx, t.Node)
	if err != nil {
		return c.deps.UnknownNode(err)
	}
	if node.Value.Region == primary.Value.Region {
		return fmt.Errorf("%w: %s is in %s's own region %q, where its voting copy serves: a read copy serves readers of another region", ErrReadCopy, target, name, node.Value.Region)
	}
	if err := c.deps.Nodes.CheckToken(ctx, primary.Value); err != nil {
		return fmt.Errorf("primary %s of %s does not answer: %w", t.Node, name, err)
	}
	if err := c.makeCopy(ctx, s, name, target, t, primary.Value); err != nil {
		return err
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
	c.deps.Settle(ctx, rec.Rev)
	c.log.Info("read copy made", "tenant", name, "primary", t.Node, "read_copy", target, "region", node.Value.Region)
	return nil
}

// makeCopy has target, once told apart from t's primary, hold a new file of
// tenant name following primary as a read copy, caught up with its image.
func (c *Copies) makeCopy(ctx context.Context, s *global.Store, name, target string, t global.Tenant, primary global.Node) error {
	dst, err := c.deps.Apart(ctx, s, t.Node, target)
	if err != nil {
		return fmt.Errorf("read copy of %s on %s: %w", name, target, err)
	}
	if _, err := c.deps.Nodes.Remove(ctx, dst, name); err != nil {
		return fmt.Errorf("delete a stale file of %s on %s: %w", name, target, err)
	}
	if err := c.deps.Nodes.Create(ctx, dst, name); err != nil {
		return fmt.Errorf("create a read copy of %s on %s: %w", name, target, err)
	}
	if err := c.deps.Nodes.FollowAs(ctx, dst, target, name, primary, wire.RoleRead); err != nil {
		return fmt.Errorf("read copy of %s on %s: %w", name, target, err)
	}
	if err := c.deps.AwaitCopy(ctx, dst, name, t.Lineage); err != nil {
		return fmt.Errorf("read copy of %s on %s: %w", name, target, err)
	}
	return nil
}

// drop takes node n off tenant name's read copies, then deletes its file
// there (best effort once the record no longer names it: no router sends
// it a read from then on).
func (c *Copies) drop(ctx context.Context, s *global.Store, name, n string) error {
	at, err := s.GetTenant(ctx, name)
	if err != nil {
		return c.deps.UnknownTenant(err)
	}
	rec, err := s.UpdateTenant(ctx, name, at, func(t *global.Tenant) error {
		t.ReadCopies = global.MakeNodeList(slices.DeleteFunc(t.ReadCopies.Names(), func(x string) bool { return x == n })...)
		return nil
	})
	if err != nil {
		return fmt.Errorf("forget the read copy of %s on %s: %w", name, n, err)
	}
	c.deps.Settle(ctx, rec.Rev)
	if err := c.deps.RemoveStale(ctx, s, name, n, rec.Value.Node, rec.Value.Replica); err != nil {
		c.log.Warn("read copy forgotten but its file not deleted", "tenant", name, "node", n, "err", err)
	}
	c.log.Info("read copy dropped", "tenant", name, "node", n)
	return nil
}
