package leasing

import (
	"context"
	"fmt"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/lease"
)

// A node lost (DESIGN.md §10, docs/regions.md "A region lost whole"):
// once the leasing fails a node over because its lease certainly lapsed,
// it records the node lapsed (global.Node.Lapsed), and every router
// answers the tenants that failover left on it 503 at once (package
// region's unavailable), rather than sending them to a node gone. The
// leasing clears the mark once the node answers its grants again; the
// node recorded again (it answered its admin token) is cleared too, by
// the record written.

// lapseWait bounds one write of a node's lapse, marked or cleared; a
// clear not written is tried again at the leasing's next look.
const lapseWait = 10 * time.Second

// answeredSince says whether the running Leaser, lsr, has had an answer
// from node since it last called its failover: the node is not lapsed.
func answeredSince(lsr *lease.Leaser, node string) bool {
	if lsr == nil {
		return false
	}
	for _, st := range lsr.Nodes() {
		if st.Node == node {
			return st.Answered && !st.FailedOver
		}
	}
	return false
}

// FailingOver says whether the leasing is failing node over now: its
// lease certainly lapsed, and its failover has not ended. A failover
// promotes no copy there (failover.Deps.CopyLost).
func (l *Leasing) FailingOver(node string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failing[node]
}

// markLapsed records node lapsed now, once its failover by lsr ended,
// unless it answered lsr's grants since the failover was called (it is
// not lost) or is recorded lapsed already (its first lapse is kept).
func (l *Leasing) markLapsed(ctx context.Context, lsr *lease.Leaser, node string) {
	ctx, cancel := context.WithTimeout(ctx, lapseWait)
	defer cancel()
	rev, err := l.writeNode(ctx, node, func(n *global.Node) bool {
		if !n.Lapsed.IsZero() || answeredSince(lsr, node) {
			return false
		}
		n.Lapsed = l.deps.Now().UTC()
		return true
	})
	if err != nil {
		l.log.Warn("node not recorded lapsed: its tenants left on it are sent to it, and fail as it does", "node", node, "err", err)
		return
	}
	if rev > 0 {
		l.deps.Settle(ctx, rev)
		l.log.Warn("node recorded lapsed: the tenants left on it are answered 503 until it answers its grants again", "node", node)
	}
}

// clearAnsweredLocked starts clearing the lapse of every node v records
// lapsed that has answered lsr's grants since its last failover. One
// clear of a node runs at a time.
func (l *Leasing) clearAnsweredLocked(lsr *lease.Leaser, v *global.View, answered map[string]bool) {
	for node, ok := range answered {
		if n, known := v.Node(node); !ok || !known || n.Lapsed.IsZero() || l.failing[node] || l.clearing[node] {
			continue
		}
		l.clearing[node] = true
		l.goCtxLocked(func(ctx context.Context) {
			defer func() {
				l.mu.Lock()
				delete(l.clearing, node)
				l.mu.Unlock()
			}()
			l.clearLapsed(ctx, lsr, node)
		})
	}
}

// clearLapsed clears node's lapse, asking lsr again as the record is read:
// a lapse marked meanwhile, or a failover called since, keeps the mark.
func (l *Leasing) clearLapsed(ctx context.Context, lsr *lease.Leaser, node string) {
	ctx, cancel := context.WithTimeout(ctx, lapseWait)
	defer cancel()
	rev, err := l.writeNode(ctx, node, func(n *global.Node) bool {
		if n.Lapsed.IsZero() || !answeredSince(lsr, node) {
			return false
		}
		n.Lapsed = time.Time{}
		return true
	})
	if err != nil {
		l.log.Warn("node's lapse not cleared: tried again", "node", node, "err", err)
		return
	}
	if rev > 0 {
		l.deps.Settle(ctx, rev)
		l.log.Info("node answers its grants again: its lapse cleared, its tenants served", "node", node)
	}
}

// writeNode changes node's record through the lead's fenced store,
// guarded by the region's owner (Deps.OwnNode). It answers the revision
// written, 0 when change left the record as it was.
func (l *Leasing) writeNode(ctx context.Context, node string, change func(*global.Node) bool) (int64, error) {
	s, err := l.deps.Lead.Changes(ctx)
	if err == nil && l.deps.OwnNode != nil {
		s, err = l.deps.OwnNode(ctx, s, node)
	}
	if err != nil {
		return 0, err
	}
	rev, err := s.WriteNode(ctx, node, false, func(n *global.Node, _ bool) bool { return change(n) })
	if err != nil {
		l.deps.Lead.Lost(ctx, err)
		return 0, fmt.Errorf("write %s's record: %w", node, err)
	}
	return rev, nil
}
