package region

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/fenec-go/fenec/global"
)

// ErrStandbyNode: a move onto a standby, which holds only copies.
var ErrStandbyNode = errors.New("node is a standby: it takes only copies; move the tenant to a node that is not one (GET /_shard/nodes lists them), or record this node again without \"standby\" first")

// standbyOf is the standby recorded for node n ("" when none).
func (rt *Router) standbyOf(ctx context.Context, n string) (string, error) {
	sb, err := rt.store.GetStandby(ctx, n)
	if isNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read standby of %s: %w", n, err)
	}
	return sb.Value, nil
}

// replicaTarget picks the node that takes a copy of a tenant whose
// primary is on primary: the primary's standby if it has one; else, under
// --replicas, the other node of its region (standbys left out) holding
// the fewest copies of primary's tenants, then the fewest bytes. ""
// when none is to be made.
func (rt *Router) replicaTarget(ctx context.Context, s *global.Store, t global.Tenant) (string, error) {
	return rt.pickReplica(ctx, s, t, rt.cfg.Replicas)
}

// pickReplica is replicaTarget; spread picks a node of the region when
// the primary has no standby (--replicas, or an operator's POST
// /_shard/replicas). A tenant set to survive its region (region/copies)
// always gets a copy, on a node of another region leased by the global
// tier, its primary's standby left out.
func (rt *Router) pickReplica(ctx context.Context, s *global.Store, t global.Tenant, spread bool) (string, error) {
	primary := t.Node
	region := t.Survive == global.SurviveRegion
	if !region {
		sb, err := rt.standbyOf(ctx, primary)
		if err != nil || sb != "" {
			return sb, err
		}
		if !spread {
			return "", nil
		}
	}
	nodes, _, err := s.ListNodes(ctx)
	if err != nil {
		return "", err
	}
	p, ok := nodes[primary]
	if !ok {
		return "", fmt.Errorf("%w: %s", ErrUnknownNode, primary)
	}
	tenants, _, err := s.ListTenants(ctx)
	if err != nil {
		return "", err
	}
	copies := map[string]int{}
	if region {
		copies = rt.copies.RegionCandidates(ctx, s, t, p.Value, nodes)
	} else {
		for name, n := range nodes {
			if name != primary && !n.Value.Standby && n.Value.Region == p.Value.Region && !t.ReadCopies.Has(name) {
				copies[name] = 0
			}
		}
	}
	if len(copies) == 0 {
		return "", nil
	}
	for _, t := range tenants {
		if t.Value.Node == primary && t.Value.Replica != "" {
			if _, ok := copies[t.Value.Replica]; ok {
				copies[t.Value.Replica]++
			}
		}
	}
	fewest := slices.Min(slicesValues(copies))
	tied := map[string]global.Node{}
	for name, c := range copies {
		if c == fewest {
			tied[name] = nodes[name].Value
		}
	}
	if len(tied) == 1 {
		for name := range tied {
			return name, nil
		}
	}
	best, err := leastBytes(measureEach(ctx, rt.nodes, tied, rt.cfg.SizesParallel))
	if err != nil { // none answered its sizes: fall back on the name
		names := make([]string, 0, len(tied))
		for name := range tied {
			names = append(names, name)
		}
		return slices.Min(names), nil
	}
	return best, nil
}

func slicesValues(m map[string]int) []int {
	out := make([]int, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// recordLineage reads the tenant's lineage off its primary and records it
// when the directory has none yet.
func (rt *Router) recordLineage(ctx context.Context, s *global.Store, name string) (global.Versioned[global.Tenant], error) {
	at, err := s.GetTenant(ctx, name)
	if err != nil || at.Value.Lineage != 0 {
		return at, err
	}
	node, err := s.GetNode(ctx, at.Value.Node)
	if err != nil {
		return at, errNotFoundAs(err, ErrUnknownNode)
	}
	st, err := rt.nodes.Replication(ctx, node.Value, name)
	if err != nil {
		return at, fmt.Errorf("read %s's lineage on %s: %w", name, at.Value.Node, err)
	}
	if st.LineageID() == 0 {
		return at, nil
	}
	return s.UpdateTenant(ctx, name, at, func(t *global.Tenant) error {
		t.Lineage = st.LineageID()
		return nil
	})
}

// copyCatchUp bounds how long a new copy has to take its primary's image.
const copyCatchUp = 15 * time.Second

// awaitCopy waits until the copy of tenant on n holds its primary's
// lineage, i.e. has taken the primary's image. Until then the copy is not
// the tenant (a failover would refuse it, or promote an empty file), and a
// primary under --sync always would answer writes its copy has not got:
// so a copy is recorded only once it has caught up.
func (rt *Router) awaitCopy(ctx context.Context, n global.Node, tenant string, lineage uint64) error {
	if lineage == 0 {
		return nil // a primary of no history yet: nothing to take
	}
	ctx, cancel := context.WithTimeout(ctx, copyCatchUp)
	defer cancel()
	for pause := 5 * time.Millisecond; ; pause = min(2*pause, 200*time.Millisecond) {
		st, err := rt.nodes.Replication(ctx, n, tenant)
		if err == nil && st.LineageID() == lineage {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: it has not taken its primary's image (last: %v)", ErrCopyBehind, err)
		case <-time.After(pause):
		}
	}
}

// addReplica gives tenant name a following copy on target: the copy's
// node makes the file anew (a stale one deleted first) and follows the
// primary, then the directory records the copy. A primary that does not
// answer gets no copy.
func (rt *Router) addReplica(ctx context.Context, s *global.Store, name, target string) error {
	at, err := rt.recordLineage(ctx, s, name)
	if err != nil {
		return err
	}
	if at.Value.HeldBy != "" {
		return &heldError{tenant: name, by: at.Value.HeldBy}
	}
	if at.Value.Node == target {
		return fmt.Errorf("copy of %s on %s, its primary: %w", name, target, ErrSameNode)
	}
	primary, err := s.GetNode(ctx, at.Value.Node)
	if err != nil {
		return errNotFoundAs(err, ErrUnknownNode)
	}
	if err := rt.nodes.CheckToken(ctx, primary.Value); err != nil {
		return fmt.Errorf("primary %s of %s does not answer: %w", at.Value.Node, name, err)
	}
	// A moved tenant's source still to be deleted there goes first.
	if err := rt.sources.wait(ctx, name, target); err != nil {
		return err
	}
	// Whatever the target holds of the tenant goes: first make sure,
	// asking both now, that the target is not the primary by another name.
	dst, err := rt.apart(ctx, s, at.Value.Node, target)
	if err != nil {
		return fmt.Errorf("copy of %s on %s: %w", name, target, err)
	}
	if _, err := rt.nodes.Remove(ctx, dst, name); err != nil {
		return fmt.Errorf("delete a stale copy of %s on %s: %w", name, target, err)
	}
	if err := rt.nodes.Create(ctx, dst, name); err != nil {
		return fmt.Errorf("create a copy of %s on %s: %w", name, target, err)
	}
	if err := rt.nodes.Follow(ctx, dst, target, name, primary.Value); err != nil {
		return fmt.Errorf("copy of %s on %s: %w", name, target, err)
	}
	if err := rt.awaitCopy(ctx, dst, name, at.Value.Lineage); err != nil {
		return fmt.Errorf("copy of %s on %s: %w", name, target, err)
	}
	rt.carryQuota(ctx, s, dst, target, name)
	rec, err := s.UpdateTenant(ctx, name, at, func(t *global.Tenant) error {
		t.Replica = target
		return nil
	})
	if err != nil {
		return fmt.Errorf("record the copy of %s on %s: %w", name, target, err)
	}
	rt.settleTo(ctx, rec.Rev)
	rt.log.Info("replica made", "tenant", name, "primary", at.Value.Node, "replica", target)
	if old := at.Value.Replica; old != "" && old != target {
		// The copy it had before follows no more: delete it (best effort),
		// once the node is known to be neither the primary nor the new copy.
		if err := rt.removeStale(ctx, s, name, old, at.Value.Node, target); err != nil {
			rt.log.Warn("former copy not deleted", "tenant", name, "node", old, "err", err)
		}
	}
	return nil
}

// removeStale deletes tenant's file on node stale, once stale has been
// asked, with each of keep, whether it is that node under another name.
func (rt *Router) removeStale(ctx context.Context, s *global.Store, tenant, stale string, keep ...string) error {
	var n global.Node
	for _, k := range keep {
		if k == "" {
			continue
		}
		var err error
		if n, err = rt.apart(ctx, s, k, stale); err != nil {
			return err
		}
	}
	if n.Addr == "" {
		var err error
		if n, err = rt.identified(ctx, s, stale); err != nil {
			return err
		}
	}
	_, err := rt.nodes.Remove(ctx, n, tenant)
	return err
}

// afterPlace, once a tenant is placed, records its lineage and gives it
// a copy if its node has a standby or the router runs --replicas. A copy
// that cannot be made is left to the repair.
func (rt *Router) afterPlace(ctx context.Context, s *global.Store, name string) {
	at, err := rt.recordLineage(ctx, s, name)
	if err != nil {
		rt.log.Warn("lineage not recorded at placement", "tenant", name, "err", err)
		return
	}
	target, err := rt.replicaTarget(ctx, s, at.Value)
	if err != nil || target == "" {
		if err != nil {
			rt.log.Warn("no copy chosen at placement", "tenant", name, "err", err)
		}
		return
	}
	if err := rt.addReplica(ctx, s, name, target); err != nil {
		rt.log.Warn("copy not made at placement: the repair tries again", "tenant", name, "replica", target, "err", err)
		rt.repair.later(name)
	}
}

// afterMove has a moved tenant's copy follow the new primary; a copy on
// the node it moved to was replaced by the move (replaced: the directory
// dropped it as the move began), so a new one is made, wherever a copy
// would be given one by hand when the router spreads none.
func (rt *Router) afterMove(ctx context.Context, s *global.Store, name string, replaced bool) {
	at, err := s.GetTenant(ctx, name)
	if err != nil {
		return
	}
	if at.Value.Replica == "" || at.Value.Replica == at.Value.Node {
		if at.Value.Replica != "" {
			rec, err := s.UpdateTenant(ctx, name, at, func(t *global.Tenant) error {
				t.Replica = ""
				return nil
			})
			if err != nil {
				rt.log.Warn("forget a copy a move replaced", "tenant", name, "err", err)
				return
			}
			rt.settleTo(ctx, rec.Rev)
		}
		if target, err := rt.pickReplica(ctx, s, at.Value, rt.cfg.Replicas || replaced); err == nil && target != "" {
			if err := rt.addReplica(ctx, s, name, target); err != nil {
				rt.log.Warn("copy not made after a move", "tenant", name, "err", err)
				rt.repair.later(name)
			}
		}
		return
	}
	primary, perr := s.GetNode(ctx, at.Value.Node)
	dst, derr := rt.apart(ctx, s, at.Value.Node, at.Value.Replica)
	if err := errors.Join(perr, derr); err != nil {
		rt.log.Warn("copy not told to follow a moved tenant", "tenant", name, "err", err)
		return
	}
	if err := rt.nodes.Follow(ctx, dst, at.Value.Replica, name, primary.Value); err != nil {
		rt.log.Warn("copy not told to follow a moved tenant", "tenant", name, "replica", at.Value.Replica, "err", err)
	}
}

// putStandby records standby as node's standby: the standby node is marked
// so (nothing is ever placed on it) and every tenant of node gets a
// following copy on it now; those that could not are listed.
func (c *shardCall) putStandby(s *global.Store, node, standby string) (int, any, error) {
	ctx := c.r.Context()
	if err := global.CheckName("node", standby); err != nil {
		return 0, nil, err
	}
	if standby == node {
		return 0, nil, fmt.Errorf("%w: a node cannot be its own standby", ErrBadRequest)
	}
	if _, err := s.GetNode(ctx, node); err != nil {
		return 0, nil, errNotFoundAs(err, ErrUnknownNode)
	}
	sb, err := s.GetNode(ctx, standby)
	if err != nil {
		return 0, nil, errNotFoundAs(err, ErrUnknownNode)
	}
	tenants, _, err := s.ListTenants(ctx)
	if err != nil {
		return 0, nil, err
	}
	for t, rec := range tenants {
		if rec.Value.Node == standby || rec.Value.Target == standby {
			return 0, nil, fmt.Errorf("%w: %s holds tenant %s as its primary", ErrNodeInUse, standby, t)
		}
	}
	if !sb.Value.Standby {
		mark := func(n *global.Node) bool {
			if n.Standby {
				return false
			}
			n.Standby = true
			return true
		}
		if _, err := updateNode(ctx, s, standby, mark); err != nil {
			return 0, nil, fmt.Errorf("mark %s standby: %w", standby, err)
		}
	}
	rev, err := recordStandby(ctx, s, node, standby)
	if err != nil {
		return 0, nil, fmt.Errorf("record the standby of %s: %w", node, err)
	}
	c.settle(rev)
	replicated, failed := []string{}, []replicaFailure{}
	names := make([]string, 0)
	for t, rec := range tenants {
		if rec.Value.Node == node && rec.Value.Replica != standby {
			names = append(names, t)
		}
	}
	slices.Sort(names)
	for _, t := range names {
		if err := c.rt.addReplica(ctx, s, t, standby); err != nil {
			failed = append(failed, replicaFailure{Tenant: t, Why: err.Error()})
			c.rt.repair.later(t)
			continue
		}
		replicated = append(replicated, t)
	}
	c.rt.log.Info("standby recorded", "node", node, "standby", standby, "replicated", len(replicated), "failed", len(failed))
	unreplicated := make([]string, 0, len(failed))
	for _, f := range failed {
		unreplicated = append(unreplicated, f.Tenant)
	}
	return http.StatusCreated, standbyAnswer{
		Node: node, Standby: standby, Replicated: replicated, Unreplicated: unreplicated, Failed: failed,
	}, nil
}

// recordStandby writes standby as node's standby, in place of the one
// recorded before if any, and returns the write's revision.
func recordStandby(ctx context.Context, s *global.Store, node, standby string) (int64, error) {
	at, err := s.GetStandby(ctx, node)
	if err != nil && !isNotFound(err) {
		return 0, err
	}
	return s.Txn().PutStandby(node, at.Rev, standby).Commit(ctx)
}

// standbyAnswer answers the naming of a node's standby: the tenants of
// node given a copy on it, and those that were not (again under failed,
// with why).
type standbyAnswer struct {
	Failed       []replicaFailure `json:"failed"`
	Node         string           `json:"node"`
	Replicated   []string         `json:"replicated"`
	Standby      string           `json:"standby"`
	Unreplicated []string         `json:"unreplicated"`
}

// replicaFailure is a tenant that got no copy, and why.
type replicaFailure struct {
	Tenant string `json:"tenant"`
	Why    string `json:"why"`
}

// replicateAll gives every tenant without a copy one now: on its node's
// standby, else on the other node of its region holding the fewest of its
// node's copies. It returns those given one and those that failed.
func (rt *Router) replicateAll(ctx context.Context, s *global.Store) ([]string, []replicaFailure, error) {
	tenants, _, err := s.ListTenants(ctx)
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, 0, len(tenants))
	for t, rec := range tenants {
		if rec.Value.Replica == "" && rec.Value.State == global.StateActive {
			names = append(names, t)
		}
	}
	slices.Sort(names)
	replicated, failed := []string{}, []replicaFailure{}
	for _, t := range names {
		rec := tenants[t].Value
		ts, err := rt.ownTenant(ctx, s, t)
		if err != nil {
			continue // the other side's to replicate
		}
		target, err := rt.pickReplica(ctx, ts, rec, true)
		if err == nil && target == "" {
			err = fmt.Errorf("%w: no other node in %s's region", ErrNoCandidate, rec.Node)
		}
		if err == nil {
			err = rt.addReplica(ctx, ts, t, target)
		}
		if err != nil {
			failed = append(failed, replicaFailure{Tenant: t, Why: err.Error()})
			continue
		}
		replicated = append(replicated, t)
	}
	return replicated, failed, nil
}

// postReplicas serves POST /_shard/replicas: 200 when every unreplicated
// tenant got its copy, 502 when one did not.
func (c *shardCall) postReplicas(s *global.Store) (int, any, error) {
	replicated, failed, err := c.rt.replicateAll(c.r.Context(), s)
	if err != nil {
		return 0, nil, err
	}
	for _, f := range failed {
		c.rt.repair.later(f.Tenant)
	}
	code := http.StatusOK
	if len(failed) > 0 {
		code = http.StatusBadGateway
	}
	return code, replicasAnswer{Failed: failed, Replicated: replicated}, nil
}

// replicasAnswer answers POST /_shard/replicas: the tenants given a copy,
// and those that failed, with why.
type replicasAnswer struct {
	Failed     []replicaFailure `json:"failed"`
	Replicated []string         `json:"replicated"`
}

// parseStandby reads a node request's "standby": true (the node itself is
// a standby) or "<node>" (that node is this one's standby).
func parseStandby(raw json.RawMessage) (self bool, of string, err error) {
	s := strings.TrimSpace(string(raw))
	switch {
	case s == "" || s == "null" || s == "false":
		return false, "", nil
	case s == "true":
		return true, "", nil
	}
	if err := json.Unmarshal(raw, &of); err != nil {
		return false, "", fmt.Errorf("%w: standby: want true or a node's name", ErrBadRequest)
	}
	return false, of, nil
}
