package node

// Promotion: a replica's file takes writes, its history forked, once it
// has been checked to be the tenant's (POST /_admin/tenants/<t>/promote).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/fenec-go/fenec/engine"
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
		if err := json.Unmarshal(b, &body); err != nil {
			c.fail(fmt.Errorf("%w: promote: %v", ErrBadRequest, err))
			return
		}
	}
	if why := c.s.lease.fencedPromote(body.Dir, body.Epoch, body.Term); why != "" {
		c.failWith(fmt.Errorf("%w: %s", ErrPromoteRefused, why), map[string]any{"leased_by": c.s.lease.lease.Bound().Dir})
		c.s.auditf(c, "promote", name, why)
		return
	}
	t, err := c.s.reg.acquire(c.r.Context(), name)
	if err != nil {
		c.fail(err)
		return
	}
	defer c.s.reg.release(t)
	// Stop following at once (a connect to a lost primary is not waited
	// out), so the file holds still while it is checked; an open feed is
	// first given a moment to end on its own, so what a lost primary sent
	// before it went is applied.
	t.drainFollower(c.r.Context(), promoteDrain)
	t.stopFollower()
	st := t.follow.Load()
	lineage := t.db.Lineage()
	if st == nil {
		// Already a primary's file (a promotion finished before): it is
		// the tenant only if it is of the tenant's lineage.
		if !body.Force && body.Lineage != 0 && lineageID(lineage) != body.Lineage {
			why := "the file is of another lineage"
			c.failWith(fmt.Errorf("%w: %s", ErrPromoteRefused, why), map[string]any{"lineage": lineageID(lineage)})
			c.s.auditf(c, "promote", name, why)
			return
		}
		writeJSON(c.w, http.StatusOK, wire.Promoted{Promoted: false, Seq: t.db.Seq(), History: t.db.History()})
		return
	}
	if !body.Force {
		if why := promoteRefusal(body, st, lineage); why != "" {
			c.s.reg.startFollower(t, st) // refused: it follows on as it did
			c.failWith(fmt.Errorf("%w: %s", ErrPromoteRefused, why), map[string]any{"lineage": lineageID(lineage)})
			c.s.auditf(c, "promote", name, why)
			return
		}
	}
	if err := c.s.reg.dropFollow(name); err != nil {
		c.fail(err)
		return
	}
	t.follow.Store(nil)
	h, err := t.db.Fork()
	if err != nil {
		c.fail(fmt.Errorf("promote: %w", err))
		return
	}
	t.role.Store(int32(RolePrimary))
	writeJSON(c.w, http.StatusOK, wire.Promoted{Promoted: true, Seq: t.db.Seq(), History: h})
	detail := ""
	if body.Force {
		detail = "forced"
	}
	c.s.auditf(c, "promote", name, detail)
	c.log.Info("admin change", "what", "promote", "tenant", name, "forced", body.Force)
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
