package region

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/region/repair"
)

// A node's standby (PUT /_shard/nodes/<n> {"standby": "<node>"}) and
// POST /_shard/replicas, answered over the router's repair (package
// region/repair, wired in repair.go), which places and makes the copies.

// ErrStandbyNode: a move onto a standby, which holds only copies.
var ErrStandbyNode = errors.New("node is a standby: it takes only copies; move the tenant to a node that is not one (GET /_shard/nodes lists them), or record this node again without \"standby\" first")

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
		if err := c.rt.repair.AddReplica(ctx, s, t, standby); err != nil {
			failed = append(failed, replicaFailure{Tenant: t, Why: err.Error()})
			c.rt.repair.Later(t)
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
type replicaFailure = repair.Failure

// postReplicas serves POST /_shard/replicas: 200 when every unreplicated
// tenant got its copy, 502 when one did not.
func (c *shardCall) postReplicas(s *global.Store) (int, any, error) {
	replicated, failed, err := c.rt.repair.ReplicateAll(c.r.Context(), s)
	if err != nil {
		return 0, nil, err
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
