package node

// Promotion: a replica's file takes writes, its history forked, once it
// has been checked to be the tenant's (POST /_admin/tenants/<t>/promote,
// and POST /_admin/promote for many tenants in one call).

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/fenec-go/fenec/engine"
	"github.com/fenec-go/fenec/internal/jsonerr"
	"github.com/fenec-go/fenec/wire"
)

// adminPromote makes a replica's file take writes: its history forks.
// It refuses a copy of another lineage, and an old primary's copy that
// has not heard from the node it follows since it was told to follow it,
// unless forced.
func (c *call) adminPromote(name string) {
	var body wire.Promote
	if b, err := c.readBody(); err != nil {
		c.fail(err)
		return
	} else if len(bytes.TrimSpace(b)) > 0 {
		if err := jsonerr.Decode(b, &body, 0); err != nil {
			c.fail(fmt.Errorf("%w: promote: %w", ErrBadRequest, err))
			return
		}
	}
	if why := c.s.lease.fencedPromote(body.Dir, body.Epoch, body.Term); why != "" {
		c.failWith(fmt.Errorf("%w: %s", ErrPromoteRefused, why), map[string]any{"leased_by": c.s.lease.lease.Bound().Dir})
		c.s.auditf(c, "promote", name, why)
		return
	}
	p := c.s.checkPromote(c.r.Context(), name, body)
	if p.t != nil {
		if err := c.s.reg.dropFollow(name); err != nil {
			c.s.reg.release(p.t)
			c.fail(err)
			return
		}
		p.fork()
	}
	if p.err != nil {
		c.failWith(p.err, p.fields)
		if p.why != "" {
			c.s.auditf(c, "promote", name, p.why)
		}
		return
	}
	writeJSON(c.w, http.StatusOK, p.ans)
	c.promoted(p, body.Force)
}

// promotion is one tenant's promotion under way: checked (and, while t is
// held, to be forked), or answered already — ans, or err with fields
// beside it and why for the audit log.
type promotion struct {
	name   string
	reg    *registry
	t      *tenant // held, checked, its follower stopped: fork it
	ans    wire.Promoted
	err    error
	fields map[string]any
	why    string
}

// checkPromote holds tenant name, stops its follower and checks its copy
// may be promoted as body asks; the promotion returned holds the tenant
// (t set) if so. A refused copy follows on as it did; a file already a
// primary's (a promotion finished before) is answered as it is, if of the
// tenant's lineage.
func (s *Server) checkPromote(ctx context.Context, name string, body wire.Promote) promotion {
	p := promotion{name: name, reg: s.reg}
	t, err := s.reg.acquire(ctx, name)
	if err != nil {
		p.err = err
		return p
	}
	if st := t.follow.Load(); st != nil && st.Role == wire.RoleRead {
		// Never, forced or not: a read copy holds only what its primary
		// had committed when it last heard, and no router counts it among
		// the tenant's voting copies. Following again as a voting copy is
		// one call, and makes the choice explicit. It follows on as it
		// did.
		defer s.reg.release(t)
		p.why = "the copy is a read copy"
		p.err = fmt.Errorf("%w: the copy of %s is a read copy, which is never promoted: make it a voting copy first (POST /_admin/tenants/%s/follow {\"from\": %q, \"role\": %q}) and promote it once it has caught up",
			ErrPromoteRefused, name, name, st.From, wire.RoleVoting)
		p.fields = map[string]any{"role": wire.RoleRead, "lineage": lineageID(t.db.Lineage())}
		return p
	}
	// Stop following at once (a connect to a lost primary is not waited
	// out), so the file holds still while it is checked; an open feed is
	// first given a moment to end on its own, so what a lost primary sent
	// before it went is applied.
	t.drainFollower(ctx, promoteDrain)
	t.stopFollower()
	st := t.follow.Load()
	lineage := t.db.Lineage()
	if st == nil {
		defer s.reg.release(t)
		if !body.Force && body.Lineage != 0 && lineageID(lineage) != body.Lineage {
			p.why = "the file is of another lineage"
			p.err, p.fields = fmt.Errorf("%w: %s", ErrPromoteRefused, p.why), map[string]any{"lineage": lineageID(lineage)}
			return p
		}
		p.ans = wire.Promoted{Promoted: false, Seq: t.db.Seq(), History: t.db.History()}
		return p
	}
	if !body.Force {
		if why := promoteRefusal(body, st, lineage); why != "" {
			s.reg.startFollower(t, st) // refused: it follows on as it did
			s.reg.release(t)
			p.why = why
			p.err, p.fields = fmt.Errorf("%w: %s", ErrPromoteRefused, why), map[string]any{"lineage": lineageID(lineage)}
			return p
		}
	}
	p.t = t
	return p
}

// fork makes the held, checked file a primary's (its follow state gone
// durably first) and lets the tenant go.
func (p *promotion) fork() {
	t := p.t
	defer p.reg.release(t)
	p.t = nil
	t.follow.Store(nil)
	h, err := t.db.Fork()
	if err != nil {
		p.err = fmt.Errorf("promote: %w", err)
		return
	}
	t.role.Store(int32(RolePrimary))
	p.ans = wire.Promoted{Promoted: true, Seq: t.db.Seq(), History: h}
}

// promoted records a promotion done in the audit log and the node's log.
func (c *call) promoted(p promotion, force bool) {
	if !p.ans.Promoted {
		return
	}
	detail := ""
	if force {
		detail = "forced"
	}
	c.s.auditf(c, "promote", p.name, detail)
	c.log.Info("admin change", "what", "promote", "tenant", p.name, "forced", force)
}

// promoteRefusal says why a copy may not be promoted ("" if it may).
func promoteRefusal(b wire.Promote, st *followState, lineage []engine.LineageEntry) string {
	if b.Lineage != 0 && lineageID(lineage) != b.Lineage {
		return "the copy is of another lineage"
	}
	if !st.Heard && b.ForkedHistory != 0 && !onLineage(lineage, b.ForkedHistory) {
		return "the copy has not heard from the new primary since its last failover"
	}
	return ""
}

// promoteDrain bounds how long a promotion lets an open feed run on: a
// primary that died has its stream end (after what it sent) well within
// it; one cut off or still alive is stopped when it passes, or as soon as
// its feed has brought nothing for promoteQuiet. Under --sync always what
// the primary answered is already in this file (the copy acknowledged
// it), so the drain only saves what a primary sent and had not answered.
const (
	promoteDrain = 250 * time.Millisecond
	promoteQuiet = 20 * time.Millisecond
)

// drainFollower waits until the follower's feed is not open, has been
// quiet for promoteQuiet, or d has passed.
func (t *tenant) drainFollower(ctx context.Context, d time.Duration) {
	if !t.followLive.Load() {
		return
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for t.followLive.Load() {
		if quiet := time.Since(time.Unix(0, t.followFrame.Load())); quiet >= promoteQuiet {
			return
		}
		select {
		case <-deadline.C:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
