package node

// Many promotions in one call (POST /_admin/promote): a router failing a
// node over sends the copies this node holds of the lost node's tenants
// in batches rather than one call each. Each tenant is checked as the
// one-tenant route checks it; their follow states are removed and the
// directory synced once for all, and their files forked, a bounded number
// at a time.

import (
	"fmt"
	"net/http"

	"golang.org/x/sync/errgroup"

	"github.com/fenec-go/fenec/internal/jsonerr"
	"github.com/fenec-go/fenec/wire"
)

// promoteParallel bounds the tenants one call checks or forks at once.
const promoteParallel = 16

// adminPromoteMany serves POST /_admin/promote.
func (c *call) adminPromoteMany() {
	body, err := c.promoteManyBody()
	if err != nil {
		c.fail(err)
		return
	}
	if why := c.s.lease.fencedPromote(body.Dir, body.Epoch, body.Term); why != "" {
		c.failWith(fmt.Errorf("%w: %s", ErrPromoteRefused, why), map[string]any{"leased_by": c.s.lease.lease.Bound().Dir})
		for _, t := range body.Tenants {
			c.s.auditf(c, "promote", t.Tenant, why)
		}
		return
	}
	ps := make([]promotion, len(body.Tenants))
	c.eachPromotion(ps, func(i int) {
		t := body.Tenants[i]
		ps[i] = c.s.checkPromote(c.r.Context(), t.Tenant, wire.Promote{Lineage: t.Lineage, ForkedHistory: t.ForkedHistory, Force: body.Force})
	})
	c.s.unfollowAll(ps)
	c.eachPromotion(ps, func(i int) {
		if ps[i].t != nil {
			ps[i].fork()
		}
	})
	ans := wire.PromotedMany{Tenants: make([]wire.PromotedTenant, len(ps))}
	for i, p := range ps {
		ans.Tenants[i] = c.promotedTenant(p)
	}
	writeJSON(c.w, http.StatusOK, ans)
	for _, p := range ps {
		if p.err == nil {
			c.promoted(p, body.Force)
		} else if p.why != "" {
			c.s.auditf(c, "promote", p.name, p.why)
		}
	}
}

// promoteManyBody reads and checks the body: valid tenant names, each
// once, at least one and at most wire.MaxPromoteMany.
func (c *call) promoteManyBody() (wire.PromoteMany, error) {
	var body wire.PromoteMany
	b, err := c.readBody()
	if err != nil {
		return body, err
	}
	if err := jsonerr.Decode(b, &body, jsonerr.KnownFields); err != nil {
		return body, fmt.Errorf("%w: promote: %w", ErrBadRequest, err)
	}
	switch n := len(body.Tenants); {
	case n == 0:
		return body, fmt.Errorf("%w: promote: no tenant named", ErrBadRequest)
	case n > wire.MaxPromoteMany:
		return body, fmt.Errorf("%w: promote: %d tenants, at most %d a call", ErrBadRequest, n, wire.MaxPromoteMany)
	}
	seen := make(map[string]bool, len(body.Tenants))
	for _, t := range body.Tenants {
		if !wire.ValidName(t.Tenant) {
			return body, fmt.Errorf("%w: %q", ErrBadName, t.Tenant)
		}
		if seen[t.Tenant] {
			return body, fmt.Errorf("%w: promote: tenant %s named twice", ErrBadRequest, t.Tenant)
		}
		seen[t.Tenant] = true
	}
	return body, nil
}

// eachPromotion runs fn for every index of ps, promoteParallel at a time.
func (c *call) eachPromotion(ps []promotion, fn func(i int)) {
	var g errgroup.Group
	g.SetLimit(promoteParallel)
	for i := range ps {
		g.Go(func() error { fn(i); return nil })
	}
	_ = g.Wait()
}

// unfollowAll removes the follow state of every checked promotion and
// syncs the directory once; one that fails is not forked.
func (s *Server) unfollowAll(ps []promotion) {
	held := false
	for i := range ps {
		if ps[i].t == nil {
			continue
		}
		if err := s.reg.unfollow(ps[i].name); err != nil {
			s.reg.release(ps[i].t)
			ps[i].t, ps[i].err = nil, err
			continue
		}
		held = true
	}
	if !held {
		return
	}
	if err := syncDir(s.reg.dir); err != nil {
		for i := range ps {
			if ps[i].t != nil {
				s.reg.release(ps[i].t)
				ps[i].t, ps[i].err = nil, err
			}
		}
	}
}

// promotedTenant is one promotion as the answer lists it.
func (c *call) promotedTenant(p promotion) wire.PromotedTenant {
	out := wire.PromotedTenant{Tenant: p.name, Status: http.StatusOK}
	if p.err != nil {
		err := c.s.pathless(p.err)
		out.Status, _ = statusOf(err)
		out.Error = err.Error()
		if l, ok := p.fields["lineage"].(uint64); ok {
			out.Lineage = l
		}
		return out
	}
	out.Promoted, out.Seq, out.History = p.ans.Promoted, p.ans.Seq, p.ans.History
	return out
}
