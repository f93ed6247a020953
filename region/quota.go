package region

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/fenec-go/fenec/global"
)

// quotaAnswer is the answer of PUT /_shard/tenants/<t>/quota: the quota
// stored, the nodes that took it, and those that did not, with why.
type quotaAnswer struct {
	Tenant string       `json:"tenant"`
	Quota  global.Quota `json:"quota"`
	Took   []string     `json:"took"`
	Failed []nodeWhy    `json:"failed,omitempty"`
}

// nodeWhy is a node that did not take a quota, and why.
type nodeWhy struct {
	Node string `json:"node"`
	Why  string `json:"why"`
}

// quotaTag is a quota's entity tag (GET's ETag, PUT's If-Match): a digest
// of its limits, so two reads of the same limits, from any router's view
// or the directory itself, carry the same tag.
func quotaTag(q global.Quota) string {
	b, _ := json.Marshal(q)
	sum := sha256.Sum256(b)
	return `"` + hex.EncodeToString(sum[:12]) + `"`
}

// quotaChangedError refuses a PUT whose If-Match names limits the tenant
// no longer has: another operator's change landed since it was read. It
// carries the limits now and their tag, for the client to apply its own
// change to them and send it again.
type quotaChangedError struct {
	tenant string
	now    global.Quota
}

func (e *quotaChangedError) Error() string {
	return fmt.Sprintf("the quota of %s changed since it was read (If-Match): another change landed first; apply yours to the quota it holds now (\"quota\", tag \"etag\") and send it again with that If-Match (fenec quota does this itself)", e.tenant)
}

func (e *quotaChangedError) Is(target error) bool { return target == ErrQuotaChanged }

// putQuota stores tenant name's quota in the directory, conditioned on the
// tenant's record and the quota as they were read — and, with If-Match,
// on the quota being the one the client read (else 409 with the quota
// now) — then sends it to the tenant's node and its copy. The directory
// is what counts: a node that does not take it (down) is logged and named
// in the answer.
func (c *shardCall) putQuota(s *global.Store, name string) (int, any, error) {
	if err := global.CheckName("tenant", name); err != nil {
		return 0, nil, err
	}
	var q global.Quota
	if err := c.decode(&q); err != nil {
		return 0, nil, err
	}
	if err := q.Validate(); err != nil {
		return 0, nil, err
	}
	ctx := c.r.Context()
	at, err := s.GetTenant(ctx, name)
	if err != nil {
		return 0, nil, errNotFoundAs(err, ErrUnknownTenant)
	}
	if at.Value.HeldBy != "" {
		// A move or delete under way: the quota would reach only the
		// node it is leaving.
		return 0, nil, &heldError{tenant: name, by: at.Value.HeldBy}
	}
	old, err := s.GetQuota(ctx, name)
	if err != nil && !isNotFound(err) {
		return 0, nil, err
	}
	if want := c.r.Header.Get("If-Match"); want != "" && want != "*" && want != quotaTag(old.Value) {
		return 0, nil, &quotaChangedError{tenant: name, now: old.Value}
	}
	rev, err := s.Txn().RequireTenant(name, at.Rev).PutQuota(name, old.Rev, q).Commit(ctx)
	if errors.Is(err, global.ErrConflict) {
		// Another change landed between the read and the write: said as
		// the quota changed, with what it holds now.
		if now, gerr := s.GetQuota(ctx, name); gerr == nil || isNotFound(gerr) {
			return 0, nil, &quotaChangedError{tenant: name, now: now.Value}
		}
	}
	if err != nil {
		return 0, nil, fmt.Errorf("store quota of %s: %w", name, err)
	}
	c.settle(rev)
	ans := quotaAnswer{Tenant: name, Quota: q, Took: []string{}}
	for _, n := range []string{at.Value.Node, at.Value.Replica} {
		if n == "" {
			continue
		}
		if err := c.rt.sendQuota(ctx, s, n, name, q); err != nil {
			c.rt.log.Warn("node did not take a quota", "tenant", name, "node", n, "err", err)
			ans.Failed = append(ans.Failed, nodeWhy{Node: n, Why: err.Error()})
			continue
		}
		ans.Took = append(ans.Took, n)
	}
	c.rt.log.Info("quota stored", "tenant", name, "took", ans.Took, "failed", len(ans.Failed))
	c.w.Header().Set("ETag", quotaTag(q))
	return http.StatusOK, ans, nil
}

// sendQuota puts q as tenant's quota on node n.
func (rt *Router) sendQuota(ctx context.Context, s *global.Store, n, tenant string, q global.Quota) error {
	node, err := s.GetNode(ctx, n)
	if err != nil {
		return errNotFoundAs(err, ErrUnknownNode)
	}
	return rt.nodes.PutQuota(ctx, node.Value, tenant, q)
}

// carryQuota sends tenant's quota, if the directory holds one, to node n:
// a move's target before the flip, a new copy as it is made, a copy as it
// is promoted. A node that does not take it is logged, not fatal: the
// tenant is served as before, and the quota is sent again at its next
// move, copy or promotion.
func (rt *Router) carryQuota(ctx context.Context, s *global.Store, n global.Node, nodeName, tenant string) {
	q, err := s.GetQuota(ctx, tenant)
	if errors.Is(err, global.ErrNotFound) {
		return
	}
	if err == nil {
		err = rt.nodes.PutQuota(ctx, n, tenant, q.Value)
	}
	if err != nil {
		rt.log.Warn("quota not carried to a node", "tenant", tenant, "node", nodeName, "err", err)
	}
}

// getQuota answers tenant name's quota as the router's copy of the
// directory holds it (all zero, no limit, when none was set).
func (c *shardCall) getQuota(name string) {
	if err := global.CheckName("tenant", name); err != nil {
		c.fail(err)
		return
	}
	v, err := c.view()
	if err != nil {
		c.fail(err)
		return
	}
	if _, ok := v.Tenant(name); !ok {
		c.fail(&notFoundError{as: ErrUnknownTenant, name: name})
		return
	}
	q, _ := v.Quota(name)
	c.w.Header().Set("ETag", quotaTag(q))
	cpJSON(c.w, http.StatusOK, q)
}
