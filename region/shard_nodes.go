package region

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/counted"
	"github.com/fenec-go/fenec/region/nodeapi"
	"github.com/fenec-go/fenec/region/trust"
)

// nodeEntry is a node as GET /_shard/nodes lists it: never its token.
type nodeEntry struct {
	Name    string `json:"name"`
	Addr    string `json:"addr"`
	Region  string `json:"region"`
	Standby bool   `json:"standby,omitempty"`
	Lease   bool   `json:"lease,omitempty"`
	ID      string `json:"id,omitempty"`
	// LapsedAt is when the node was failed over on its lapsed lease, if
	// it has not answered its grants since (region/leasing's lapsed.go).
	LapsedAt *time.Time `json:"lapsed_at,omitempty"`
}

// listNodes answers every recorded node, by name.
func (c *shardCall) listNodes() {
	v, err := c.view()
	if err != nil {
		c.fail(err)
		return
	}
	out := []nodeEntry{}
	for name, n := range v.Nodes() {
		e := nodeEntry{Name: name, Addr: n.Addr, Region: n.Region, Standby: n.Standby, Lease: n.Lease, ID: n.ID}
		if !n.Lapsed.IsZero() {
			e.LapsedAt = &n.Lapsed
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b nodeEntry) int { return cmpString(a.Name, b.Name) })
	cpJSON(c.w, http.StatusOK, out)
}

// putNode records a node once it has answered its admin token.
func (c *shardCall) putNode(s *global.Store, name string) (int, any, error) {
	if err := global.CheckName("node", name); err != nil {
		return 0, nil, err
	}
	var req struct {
		Addr    string          `json:"addr"`
		Token   string          `json:"token"`
		Region  string          `json:"region"`
		Standby json.RawMessage `json:"standby"`
	}
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	standby, standbyOf, err := parseStandby(req.Standby)
	if err != nil {
		return 0, nil, err
	}
	if standbyOf != "" && req.Addr == "" { // only naming n's standby (replica.go)
		return c.putStandby(s, name, standbyOf)
	}
	if req.Region == "" {
		req.Region = c.rt.cfg.Region
	}
	if req.Addr == "" || req.Region == "" {
		return 0, nil, fmt.Errorf("%w: a node needs an addr and a region", ErrBadRequest)
	}
	addr, err := nodeapi.NormalizeAddr(req.Addr)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	n := global.Node{Addr: addr, Token: req.Token, Region: req.Region, Standby: standby}
	if err := n.Validate(); err != nil {
		return 0, nil, err
	}
	if err := trust.CheckNodeAddr(n.Addr, c.rt.cfg.Insecure); err != nil {
		return 0, nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	ctx := c.r.Context()
	if s, err = c.rt.sides.own(ctx, s, n.Region); err != nil {
		return 0, nil, err
	}
	if n.ID, err = c.rt.nodes.Identify(ctx, n); err != nil {
		return 0, nil, fmt.Errorf("node %s at %s: %w", name, n.Addr, err)
	}
	// One node, one name: checked and recorded under the lock moves and
	// placements take, so two names cannot both pass at once.
	c.rt.opMu.Lock()
	other, err := c.rt.recordedAs(ctx, s, name, n)
	if err == nil && other != "" {
		err = fmt.Errorf("%w: %s answers as node %s, recorded as %s; record it again under %s to change its address",
			ErrNodeTwice, n.Addr, n.ID, other, other)
	}
	var rev int64
	if err == nil {
		rev, err = recordNode(ctx, s, name, n)
		if err != nil {
			err = fmt.Errorf("record node %s: %w", name, err)
		}
	}
	c.rt.opMu.Unlock()
	if err != nil {
		return 0, nil, err
	}
	c.settle(rev)
	if standbyOf != "" {
		return c.putStandby(s, name, standbyOf)
	}
	unreplicated := []string{}
	if v := c.rt.watcher.View(); v != nil {
		for t, rec := range v.Tenants() {
			if rec.Node == name && rec.Replica == "" {
				unreplicated = append(unreplicated, t)
			}
		}
	}
	slices.Sort(unreplicated)
	c.rt.log.Info("node recorded", "node", name, "addr", n.Addr, "region", n.Region)
	return http.StatusCreated, map[string]any{"node": name, "unreplicated": unreplicated}, nil
}

// deleteNode forgets a node that holds no tenant, copy or move target.
func (c *shardCall) deleteNode(s *global.Store, name string) (int, any, error) {
	if err := global.CheckName("node", name); err != nil {
		return 0, nil, err
	}
	c.rt.opMu.Lock()
	defer c.rt.opMu.Unlock()
	cur, err := s.GetNode(c.r.Context(), name)
	if err != nil {
		return 0, nil, errNotFoundAs(err, ErrUnknownNode)
	}
	tenants, _, err := s.ListTenants(c.r.Context())
	if err != nil {
		return 0, nil, err
	}
	var holds, reads []string
	for t, rec := range tenants {
		if rec.Value.Node == name || rec.Value.Replica == name || rec.Value.Target == name {
			holds = append(holds, t)
		} else if rec.Value.ReadCopies.Has(name) {
			reads = append(reads, t)
		}
	}
	if len(holds) > 0 {
		slices.Sort(holds)
		return 0, nil, fmt.Errorf("%w: %s holds %s: move them off first (POST /_shard/tenants/<t>/move), or fail the node over if it is gone", ErrNodeInUse, name, counted.Names(holds, "tenant", 10))
	}
	if len(reads) > 0 {
		slices.Sort(reads)
		return 0, nil, fmt.Errorf("%w: %s holds read copies of %s: drop them first (PUT /_shard/tenants/<t>/read-copies without it)", ErrNodeInUse, name, counted.Names(reads, "tenant", 10))
	}
	rev, err := s.Txn().DeleteNode(name, cur.Rev).Commit(c.r.Context())
	if err != nil {
		return 0, nil, fmt.Errorf("forget node %s: %w", name, err)
	}
	c.settle(rev)
	c.rt.log.Info("node forgotten", "node", name)
	return http.StatusNoContent, nil, nil
}

// updateNode changes one field of node name's record: change edits the
// record read and says whether anything changed. Another writer may change
// other fields of the same record meanwhile (the leasing router marks
// lease:true, an operator names a standby), so a lost race reads the record
// again and reapplies change rather than refusing the caller. It answers
// the revision written, or 0 when change left the record as it was.
func updateNode(ctx context.Context, s *global.Store, name string, change func(*global.Node) bool) (int64, error) {
	return s.WriteNode(ctx, name, false, func(n *global.Node, _ bool) bool { return change(n) })
}

// recordNode writes n as node name's record. A node recorded again at the
// address it already had (by any spelling) keeps lease:true: the leasing router probes each
// address once, so dropping the mark would stop its leases (and with them
// the node's writes) for good. A race lost to another change of the record
// is retried.
func recordNode(ctx context.Context, s *global.Store, name string, n global.Node) (int64, error) {
	return s.WriteNode(ctx, name, true, func(rec *global.Node, found bool) bool {
		keep := found && nodeapi.SameAddr(rec.Addr, n.Addr) && rec.Lease
		*rec = n
		rec.Lease = rec.Lease || keep
		return true
	})
}
