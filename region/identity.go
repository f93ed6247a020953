package region

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/region/nodeapi"
)

// Nodes' identities. Every node keeps an id of its own (node.id in its
// directory, GET /_admin/node). The router records it with the node and
// refuses to record one node under two names, whatever spelling of its
// address reaches it; every admin call names the id it means
// (wire.HeaderNode), so a node an address was re-pointed at refuses it;
// and nothing deletes a tenant's file on a node before both that node and
// the one whose file must stay have been asked who they are, then and
// there. A record written before ids (none in it) learns its node's id on
// first contact.

var (
	// ErrNodeTwice: the node is already recorded under another name.
	ErrNodeTwice = errors.New("node already recorded under another name")
	// ErrOtherNode: a recorded address reaches another node than the one
	// recorded (re-pointed, or its directory replaced).
	ErrOtherNode = errors.New("address reaches another node than the one recorded")
)

// identified is node name's record as the node answers now: its id asked
// then and there, and learned into the directory when the record has none
// yet. A node answering another id than the one recorded is ErrOtherNode.
func (rt *Router) identified(ctx context.Context, s *global.Store, name string) (global.Node, error) {
	rec, err := s.GetNode(ctx, name)
	if err != nil {
		return global.Node{}, errNotFoundAs(err, ErrUnknownNode)
	}
	n := rec.Value
	id, err := rt.nodes.Identify(ctx, n)
	if err != nil {
		return n, fmt.Errorf("node %s: %w", name, err)
	}
	switch {
	case n.ID != "" && id != n.ID:
		return n, fmt.Errorf("node %s at %s: %w: it answers as node %s, recorded as %s; record it again (PUT /_shard/nodes/%s) once its address is right",
			name, n.Addr, ErrOtherNode, id, n.ID, name)
	case n.ID == "" && id != "":
		rt.learnID(ctx, s, name, n.Addr, id)
		n.ID = id
	}
	return n, nil
}

// learnID records the id a node from a record written before ids answered,
// unless the record changed meanwhile.
func (rt *Router) learnID(ctx context.Context, s *global.Store, name, addr, id string) {
	rev, err := updateNode(ctx, s, name, func(n *global.Node) bool {
		if n.ID != "" || !nodeapi.SameAddr(n.Addr, addr) {
			return false
		}
		n.ID = id
		return true
	})
	if err != nil {
		rt.log.Warn("node id not recorded", "node", name, "id", id, "err", err)
		return
	}
	if rev != 0 {
		rt.log.Info("node id learned", "node", name, "id", id)
	}
}

// apart checks, asking both nodes now, that target is not keep under
// another name, before anything on target is deleted or replaced. It
// answers target's record with its id, for the calls that follow to name.
func (rt *Router) apart(ctx context.Context, s *global.Store, keep, target string) (global.Node, error) {
	k, err := rt.identified(ctx, s, keep)
	if err != nil {
		return global.Node{}, err
	}
	n, err := rt.identified(ctx, s, target)
	if err != nil {
		return global.Node{}, err
	}
	if (k.ID != "" && k.ID == n.ID) || nodeapi.SameAddr(k.Addr, n.Addr) {
		return global.Node{}, fmt.Errorf("%w: %s and %s are one node (id %s); nothing was deleted: forget one of the names (DELETE /_shard/nodes/<name>)",
			ErrNodeTwice, keep, target, n.ID)
	}
	return n, nil
}

// recordedAs names the other node record that n (about to be recorded as
// name) is, by its id or its address; "" when none is. A record from
// before ids is asked its id now, and learns it.
func (rt *Router) recordedAs(ctx context.Context, s *global.Store, name string, n global.Node) (string, error) {
	nodes, _, err := s.ListNodes(ctx)
	if err != nil {
		return "", err
	}
	var (
		mu    sync.Mutex // guards found
		found string
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(rt.cfg.SizesParallel)
	for other, rec := range nodes {
		if other == name {
			continue
		}
		if nodeapi.SameAddr(rec.Value.Addr, n.Addr) || (n.ID != "" && rec.Value.ID == n.ID) {
			return other, nil
		}
		if rec.Value.ID != "" || n.ID == "" {
			continue
		}
		g.Go(func() error {
			id, err := rt.nodes.Identify(gctx, rec.Value)
			if err != nil || id == "" {
				return nil // not reachable now: checked again before any delete
			}
			rt.learnID(gctx, s, other, rec.Value.Addr, id)
			if id == n.ID {
				mu.Lock()
				found = other
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	return found, nil
}
