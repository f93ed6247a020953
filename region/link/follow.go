package link

import (
	"context"
	"fmt"

	"github.com/fenec-go/fenec/global"
)

// What the link holds of the two directories (link.go): it lists each
// whole once, when it starts leading or after a watch of either was lost
// (ended, compacted, or behind for mirrorCallWait), and from then on
// follows both watches from the revisions of those lists, marking the
// keys each change touches. A step copies only those keys (with the
// records they touch: global.Mirror.SyncTracked), so one change costs the
// same with 100 000 tenants as with 10. The link's own writes come back
// on the copy's watch and are waited for before the next step looks at
// the copy, and are not marked again.

// linkState is both directories' records as the link follows them.
type linkState struct {
	g, r     *global.Tracked // the global directory's records, the region's
	gch, rch <-chan global.WatchResponse
	cancel   context.CancelFunc // ends both watches
	dirty    global.Dirty       // keys to look at in the next sync
	farDirty global.Dirty       // keys to look at in the next sync of the far records
	// changed: a change other than the link's own copies came since the
	// step began (the region records it wrote itself included): step again.
	changed bool
	up      bool // the direction dirty is kept for
	// ownG and ownR are the revisions of the link's own writes into the
	// global directory and the region's that their watches have not
	// shown yet: their changes are not marked dirty.
	ownG, ownR map[int64]bool
}

// follow lists both directories and starts their watches from there;
// every key is looked at in the next sync.
func (l *Link) follow(ctx context.Context) error {
	gd := l.Global().Directory()
	lctx, cancel := context.WithTimeout(ctx, mirrorCallWait)
	defer cancel()
	gkvs, grev, err := gd.List(lctx, "")
	if err != nil {
		return fmt.Errorf("read the global directory: %w", err)
	}
	rkvs, rrev, err := l.deps.Dir.List(lctx, "")
	if err != nil {
		return fmt.Errorf("read the region's directory: %w", err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	gch, err := gd.Watch(wctx, "", grev)
	if err != nil {
		wcancel()
		return fmt.Errorf("watch the global directory: %w", err)
	}
	rch, err := l.deps.Dir.Watch(wctx, "", rrev)
	if err != nil {
		wcancel()
		return fmt.Errorf("watch the region's directory: %w", err)
	}
	ls := &linkState{g: global.NewTracked(gkvs, grev), r: global.NewTracked(rkvs, rrev), gch: gch, rch: rch,
		cancel: wcancel, ownG: map[int64]bool{}, ownR: map[int64]bool{}}
	ls.dirty.MarkAll()
	ls.farDirty.MarkAll()
	l.ls = ls
	l.lists.Add(1)
	l.log.Info("link: both directories listed, following their watches", "region", l.region,
		"global_records", ls.g.Len(), "global_rev", grev, "region_records", ls.r.Len(), "region_rev", rrev)
	return nil
}

// drop ends the watches and forgets what the link holds.
func (l *Link) drop() {
	if l.ls != nil {
		l.ls.cancel()
		l.ls = nil
	}
}

// take folds in one response of a watch (region: the region's directory's,
// else the global one's), marking the keys it changed; a watch that ended
// drops the link's state.
func (ls *linkState) take(l *Link, region bool, r global.WatchResponse, ok bool) {
	if l.ls != ls {
		return
	}
	if !ok || r.Err != nil {
		err := r.Err
		if err == nil {
			err = global.ErrClosed
		}
		l.log.Info("link: a directory's watch ended: listing both again", "region", l.region, "region_side", region, "err", err)
		l.drop()
		return
	}
	t, own := ls.g, ls.ownG
	if region {
		t, own = ls.r, ls.ownR
	}
	t.Apply(r, func(key string, rev int64) {
		if !own[rev] {
			ls.dirty.Mark(key)
			ls.farDirty.Mark(key)
			ls.changed = true
		}
	})
	for rev := range own {
		if rev <= t.Rev() {
			delete(own, rev)
		}
	}
}

// drain folds in every response both watches have waiting.
func (ls *linkState) drain(l *Link) {
	for l.ls == ls {
		select {
		case r, ok := <-ls.gch:
			ls.take(l, false, r, ok)
		case r, ok := <-ls.rch:
			ls.take(l, true, r, ok)
		default:
			return
		}
	}
}

// await folds in one side's watch until its records are current to rev at
// least, or ctx ends: a watch that does not get there is dropped (the next
// step lists again).
func (ls *linkState) await(ctx context.Context, l *Link, region bool, rev int64) error {
	ls.drain(l)
	for {
		if l.ls != ls {
			return errLinkLost
		}
		t, ch := ls.g, ls.gch
		if region {
			t, ch = ls.r, ls.rch
		}
		if t.Rev() >= rev {
			return nil
		}
		select {
		case r, ok := <-ch:
			ls.take(l, region, r, ok)
		case <-ctx.Done():
			l.drop()
			return fmt.Errorf("link: the watch did not show revision %d (region side %v): %w", rev, region, ctx.Err())
		}
	}
}

// sync copies the keys marked — all of them after a list or when the
// direction turned — down into the region's directory or up into the
// global one (to, fenced and guarded as the caller needs), once the
// records held are current to the region record of each side (deRev,
// dgRev). It then waits until the copy's watch shows what it wrote.
func (ls *linkState) sync(ctx context.Context, l *Link, up bool, to *global.Store, deRev, dgRev int64) (global.MirrorResult, error) {
	if err := ls.await(ctx, l, true, deRev); err != nil {
		return global.MirrorResult{}, err
	}
	if err := ls.await(ctx, l, false, dgRev); err != nil {
		return global.MirrorResult{}, err
	}
	if up != ls.up {
		ls.dirty.MarkAll()
		ls.up = up
	}
	src, dst, own := ls.g, ls.r, ls.ownR
	if up {
		src, dst, own = ls.r, ls.g, ls.ownG
	}
	res, err := global.Mirror{Region: l.region, Up: up}.SyncTracked(ctx, to, src, dst, &ls.dirty)
	for _, rev := range res.Written {
		own[rev] = true
	}
	if err == nil {
		ls.dirty.Reset()
	}
	if n := len(res.Written); n > 0 {
		if werr := ls.await(ctx, l, !up, res.Written[n-1]); werr != nil && err == nil {
			err = werr
		}
	}
	res.Rev = ls.g.Rev() // the link reports the global directory's revision
	return res, err
}

// syncFar copies the region's far records (global.Far) from the global
// directory's records held into the region's directory through s (fenced
// on the router's term), whichever side leases the region, once the
// records held are current to both region records (deRev, dgRev), and
// waits until the region's watch shows what it wrote. It keeps its own
// set of keys to look at (farDirty), marked by the same watches: the
// mirror's sync folds in what comes while it runs, which the far records
// must not miss.
func (ls *linkState) syncFar(ctx context.Context, l *Link, s *global.Store, deRev, dgRev int64) (global.MirrorResult, error) {
	if err := ls.await(ctx, l, true, deRev); err != nil {
		return global.MirrorResult{}, err
	}
	if err := ls.await(ctx, l, false, dgRev); err != nil {
		return global.MirrorResult{}, err
	}
	res, err := global.Far{Region: l.region}.SyncTracked(ctx, s, ls.g, ls.r, &ls.farDirty)
	for _, rev := range res.Written {
		ls.ownR[rev] = true
	}
	if err == nil {
		ls.farDirty.Reset()
	}
	if n := len(res.Written); n > 0 {
		if werr := ls.await(ctx, l, true, res.Written[n-1]); werr != nil && err == nil {
			err = werr
		}
	}
	return res, err
}

// snap is the global directory's region record r and own records as held.
func (ls *linkState) snap(r string) globalSnap {
	var kvs []global.KV
	for _, k := range []string{global.KeyTerm, global.KeyLeader, global.KeyLeaseRecord, global.RegionKey(r)} {
		if kv, ok := ls.g.Get(k); ok {
			kvs = append(kvs, kv)
		}
	}
	v, _ := global.ViewOf(kvs, ls.g.Rev())
	snap := globalSnap{view: v, region: global.Versioned[global.Region]{Value: v.RegionRecord(r)}}
	if kv, ok := ls.g.Get(global.RegionKey(r)); ok {
		snap.region.Rev = kv.ModRev
	}
	return snap
}
