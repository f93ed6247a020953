package region

import (
	"context"

	"github.com/fenec-go/fenec/global"
)

// settleTo waits (bounded) until the router's view is current to rev.
func (rt *Router) settleTo(ctx context.Context, rev int64) {
	ctx, cancel := context.WithTimeout(ctx, rt.cfg.NodeTimeout)
	defer cancel()
	if err := rt.watcher.WaitRev(ctx, rev); err != nil {
		rt.log.Warn("view behind a change", "rev", rev, "err", err)
	}
}

// settle waits until the router's own view holds a write it made, so a read
// on this router right after a change sees it.
func (c *shardCall) settle(rev int64) { c.rt.settleTo(c.r.Context(), rev) }

// settleNow waits until the router's view is current to the directory's
// revision now, for a change whose own revision is not returned.
func (c *shardCall) settleNow(s *global.Store) {
	_, rev, err := s.Directory().List(c.r.Context(), global.KeyTerm)
	if err != nil {
		c.rt.log.Warn("read the directory's revision", "err", err)
		return
	}
	c.settle(rev)
}
