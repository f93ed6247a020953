package region

import (
	"context"
	"fmt"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/audit"
)

// The router writes to its audit log, beside the changes asked over
// /_shard/, what its own goroutines decide about who leases a region:
// every region record it writes (a handoff's step, a record copied from
// one directory to the other, a forced takeover) and every node that
// refused its grants for another binding.

// auditControl records one line of the router's own doing (no client).
func (rt *Router) auditControl(what, node, detail string) {
	e := audit.Entry{Time: rt.now(), Router: rt.id, Who: rt.id, What: what, Node: node, Outcome: "ok", Detail: detail}
	if err := rt.audit.Record(e); err != nil {
		rt.log.Error("audit", "err", err)
	}
}

// auditRegion records a region record this router wrote into dir (the
// directory's name), as it was and as it is now.
func (rt *Router) auditRegion(dir string, was, now global.Region) {
	rt.auditControl("region_record", "", fmt.Sprintf("region %s in %s: %s -> %s", now.Name, dir, regionLine(was), regionLine(now)))
}

// regionLine describes a region record in one line.
func regionLine(r global.Region) string {
	s := fmt.Sprintf("leaser %s epoch %d", r.LeasedBy(), r.Epoch)
	if h := r.Handoff; h != nil {
		s += fmt.Sprintf(" handoff %d %s %s->%s force %v", h.Seq, h.State, h.From, h.To, h.Force)
	}
	return s
}

// writeRegion rewrites region name in s (the directory dir names) as
// global.Store.UpdateRegion does, and audits the record written.
func (rt *Router) writeRegion(ctx context.Context, s *global.Store, dir, name string, at global.Versioned[global.Region], fn func(*global.Region) error) (global.Versioned[global.Region], error) {
	out, err := s.UpdateRegion(ctx, name, at, fn)
	if err == nil {
		was := at.Value
		was.Name = name
		rt.auditRegion(dir, was, out.Value)
	}
	return out, err
}
