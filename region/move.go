package region

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/region/nodeapi"
	"github.com/fenec-go/fenec/region/repair"
)

// moveAnswer is POST /_shard/tenants/<t>/move's answer. The source's file
// is deleted after it (removeSource).
type moveAnswer struct {
	Tenant string `json:"tenant"`
	From   string `json:"from"`
	To     string `json:"to"`
	// By is how the target got the tenant: moveByFollow or moveByImage.
	By    string `json:"by"`
	Bytes int64  `json:"bytes"`
	MS    int64  `json:"ms"`
	// PauseMS is how long the source refused writes (frozen) before the
	// directory pointed at the target.
	PauseMS int64 `json:"pause_ms"`
}

// How a move gives the target the tenant (moveAnswer.By).
const (
	// moveByFollow: the target's copy followed the source, which took
	// writes until the switch (move_follow.go).
	moveByFollow = "follow"
	// moveByImage: the source froze for the copy of its image (a target
	// with no --replication-token, or a router run with --move-image).
	moveByImage = "image"
)

// moveTenant serves the move route: {"to": node}.
func (c *shardCall) moveTenant(s *global.Store, name string) (int, any, error) {
	if err := global.CheckName("tenant", name); err != nil {
		return 0, nil, err
	}
	var req struct {
		To string `json:"to"`
	}
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	if err := global.CheckName("node", req.To); err != nil {
		return 0, nil, fmt.Errorf("%w: move needs a node to move to: %w", ErrBadRequest, err)
	}
	if err := c.rt.moveRegions(c.r.Context(), s, name, req.To); err != nil {
		return 0, nil, err
	}
	// The move runs to its end even if its client goes away, bounded by
	// the router's life and the move timeout.
	ctx, cancel := context.WithTimeout(c.rt.ctx, c.rt.cfg.MoveTimeout)
	defer cancel()
	ctx = nodeapi.WithRequestID(ctx, c.r.Header.Get("X-Request-Id"))
	ans, err := c.rt.move(ctx, s, name, req.To)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, ans, nil
}

// moveRun is one move's state as it goes.
type moveRun struct {
	rt       *Router
	s        *global.Store
	name     string
	at       global.Versioned[global.Tenant] // the record as last written
	from     string                          // the source's name
	src, dst global.Node
	// copyDropped: the target held the tenant's copy, which the move
	// replaces; put back, the tenant is owed a new one.
	copyDropped bool
}

// move moves tenant name onto node to: the directory marks it moving
// (held by the move); the target's copy follows the source until it is
// close, then the switch freezes the source, lets the copy catch up,
// promotes it and flips the directory (move_follow.go) — or, by image,
// the source freezes and its image streams into the target, then the
// directory flips; and the source's file is deleted. A failure before the
// flip thaws the source, deletes the target's copy and puts the record
// back.
func (rt *Router) move(ctx context.Context, s *global.Store, name, to string) (moveAnswer, error) {
	start := time.Now()
	at, err := s.GetTenant(ctx, name)
	if err != nil {
		rt.metrics.moves.WithLabelValues(MoveRefused).Inc()
		return moveAnswer{}, errNotFoundAs(err, ErrUnknownTenant)
	}
	m := &moveRun{rt: rt, s: s, name: name}
	// A move of the tenant back onto the last one's source must not race
	// that source's deletion.
	if err := rt.sources.wait(ctx, name, to); err != nil {
		return moveAnswer{}, err
	}
	rt.opMu.Lock() // a move's target must not be forgotten as it begins
	err = m.begin(ctx, at, to)
	rt.opMu.Unlock()
	if err != nil {
		rt.metrics.moves.WithLabelValues(MoveRefused).Inc()
		return moveAnswer{}, err
	}
	ans := moveAnswer{Tenant: name, From: at.Value.Node, To: to, By: moveByFollow}
	began := time.Now()
	n, pause, err := m.byFollowing(ctx)
	if errors.Is(err, errCannotFollow) || rt.cfg.MoveImage {
		if err != nil {
			rt.log.Info("a move's target cannot follow: its image is copied, the source frozen meanwhile", "tenant", name, "to", to, "err", err)
		}
		ans.By = moveByImage
		n, pause, err = m.byImage(ctx)
	}
	ans.Bytes, ans.PauseMS = n, pause.Milliseconds()
	flipped := time.Now()
	if err != nil {
		outcome := MoveAborted
		if perr := m.putBack(ctx); perr != nil {
			outcome = MoveStuck
			err = errors.Join(err, perr)
		}
		rt.metrics.moves.WithLabelValues(outcome).Inc()
		rt.log.Warn("move failed", "tenant", name, "from", ans.From, "to", to, "outcome", outcome, "err", err)
		if m.copyDropped {
			rt.repair.Later(name) // its copy was the target's file
		}
		return moveAnswer{}, err
	}
	m.removeSourceLater(ctx)
	rt.repair.AfterMove(ctx, s, name, m.copyDropped) // the copy follows the new node (region/repair)
	ans.MS = time.Since(start).Milliseconds()
	rt.metrics.moves.WithLabelValues(MoveDone).Inc()
	rt.log.Info("tenant moved", "tenant", name, "from", ans.From, "to", to, "by", ans.By, "bytes", n, "ms", ans.MS,
		"begin_ms", began.Sub(start).Milliseconds(), "copy_ms", flipped.Sub(began).Milliseconds()-ans.PauseMS,
		"pause_ms", ans.PauseMS)
	return ans, nil
}

// byFollowing gives the target a copy following the source and switches
// onto it once close (move_follow.go). It returns the copy's bytes and
// how long the source was frozen. Under --move-image it does nothing.
func (m *moveRun) byFollowing(ctx context.Context) (int64, time.Duration, error) {
	if m.rt.cfg.MoveImage {
		return 0, 0, nil
	}
	if err := m.startFollow(ctx); err != nil {
		return 0, 0, err
	}
	n, err := m.awaitClose(ctx)
	if err != nil {
		return n, 0, err
	}
	pause, err := m.switchOver(ctx)
	return n, pause, err
}

// byImage freezes the source, copies its image into the target and flips
// the directory. It returns the bytes copied and how long the source was
// frozen.
func (m *moveRun) byImage(ctx context.Context) (int64, time.Duration, error) {
	frozen := time.Now()
	n, err := m.copy(ctx)
	if err == nil {
		err = m.flip(ctx)
	}
	return n, time.Since(frozen), err
}

// begin checks the move and marks the tenant moving, held by the move.
func (m *moveRun) begin(ctx context.Context, at global.Versioned[global.Tenant], to string) error {
	if at.Value.HeldBy != "" {
		return &heldError{tenant: m.name, by: at.Value.HeldBy}
	}
	if at.Value.Node == to {
		return fmt.Errorf("move %s to %s: %w", m.name, to, ErrSameNode)
	}
	if at.Value.ReadCopies.Has(to) {
		return fmt.Errorf("%w: move %s to %s, which holds its read copy: drop the read copy first (PUT /_shard/tenants/%s/read-copies without %s), or move it elsewhere", ErrReadCopy, m.name, to, m.name, to)
	}
	src, err := m.s.GetNode(ctx, at.Value.Node)
	if err != nil {
		return fmt.Errorf("move %s: source %s: %w", m.name, at.Value.Node, errNotFoundAs(err, ErrUnknownNode))
	}
	dst, err := m.s.GetNode(ctx, to)
	if err != nil {
		return fmt.Errorf("move %s: target %s: %w", m.name, to, errNotFoundAs(err, ErrUnknownNode))
	}
	if dst.Value.Standby { // only copies go to a standby (region/repair)
		return fmt.Errorf("move %s to %s: %w", m.name, to, ErrStandbyNode)
	}
	if _, err := m.rt.apart(ctx, m.s, at.Value.Node, to); err != nil {
		return fmt.Errorf("move %s to %s: %w", m.name, to, err)
	}
	if r := at.Value.Replica; r != "" && r != to {
		// The copy follows the target once it moved: it must be another
		// node, or the new primary's file would follow itself. A copy
		// that does not answer now is judged when it is told to follow.
		if _, err := m.rt.apart(ctx, m.s, r, to); errors.Is(err, ErrNodeTwice) {
			return fmt.Errorf("move %s to %s, its copy's node: %w", m.name, to, err)
		}
	}
	m.from, m.src, m.dst = at.Value.Node, src.Value, dst.Value
	// A copy on the target is replaced by the move: the directory drops
	// it as the move begins (BeginMove), and a new one is owed either way.
	m.copyDropped = at.Value.Replica == to
	moving, err := m.s.BeginMove(ctx, m.name, at, to)
	if err != nil {
		return err
	}
	m.at = moving
	return nil
}

// copy freezes the source, deletes a stale copy on the target, and
// streams the image from one into the other, never whole in memory. It
// returns the bytes copied.
func (m *moveRun) copy(ctx context.Context) (int64, error) {
	if err := m.rt.nodes.Freeze(ctx, m.src, m.name, true); err != nil {
		return 0, fmt.Errorf("freeze %s on %s: %w", m.name, m.at.Value.Node, err)
	}
	// Asked again as the target's copy is about to go: an address may
	// have been re-pointed since the move began.
	dst, err := m.rt.apart(ctx, m.s, m.at.Value.Node, m.at.Value.Target)
	if err != nil {
		return 0, fmt.Errorf("move %s to %s: %w", m.name, m.at.Value.Target, err)
	}
	m.dst = dst
	if gone, err := m.rt.nodes.Remove(ctx, m.dst, m.name); err != nil {
		return 0, fmt.Errorf("delete a stale copy of %s on %s: %w", m.name, m.at.Value.Target, err)
	} else if gone {
		m.rt.log.Info("deleted a stale copy before a move", "tenant", m.name, "node", m.at.Value.Target)
	}
	img, err := m.rt.nodes.ImageOut(ctx, m.src, m.name)
	if err != nil {
		return 0, fmt.Errorf("read %s's image on %s: %w", m.name, m.at.Value.Node, err)
	}
	defer img.Close()
	body := &imageBody{r: img}
	err = m.rt.nodes.ImageIn(ctx, m.dst, m.name, body)
	if err != nil {
		img.Close() // unblocks a read of the source the install no longer waits for
	}
	if serr := body.failed(); serr != nil {
		err = fmt.Errorf("read from %s: %w (%v)", m.at.Value.Node, serr, err)
	}
	if err != nil {
		return body.n.Load(), fmt.Errorf("install %s's image on %s: %w", m.name, m.at.Value.Target, err)
	}
	return body.n.Load(), nil
}

// imageBody is a move's image as the target's install reads it: straight
// from the source's answer, the pieces as large as the source sends them
// (WriteTo), with no pipe or small buffer between the two connections.
type imageBody struct {
	r   io.Reader
	n   atomic.Int64 // bytes read
	mu  sync.Mutex   // guards err
	err error        // the source's failure
}

// imageBodyPiece bounds one piece copied; the source writes 256 KB.
const imageBodyPiece = 1 << 20

func (b *imageBody) Read(p []byte) (int, error) {
	k, err := b.r.Read(p)
	b.n.Add(int64(k))
	if err != nil && err != io.EOF {
		b.mu.Lock()
		if b.err == nil {
			b.err = err
		}
		b.mu.Unlock()
	}
	return k, err
}

func (b *imageBody) WriteTo(w io.Writer) (int64, error) {
	buf := make([]byte, imageBodyPiece)
	var n int64
	for {
		k, err := b.Read(buf)
		if k > 0 {
			wk, werr := w.Write(buf[:k])
			n += int64(wk)
			if werr != nil {
				return n, werr
			}
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// failed is the source's failure, if reading it failed.
func (b *imageBody) failed() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// flip points the directory at the target in one transaction. A write
// whose outcome is unknown (its answer lost) is read back: a record on the
// target means it landed.
func (m *moveRun) flip(ctx context.Context) error {
	m.rt.carryQuota(ctx, m.s, m.dst, m.at.Value.Target, m.name)
	done, err := m.write(ctx, m.at, func(at global.Versioned[global.Tenant]) (global.Versioned[global.Tenant], error) {
		return m.s.FinishMove(ctx, m.name, at)
	})
	if err == nil {
		m.at = done
		m.rt.settleTo(ctx, done.Rev)
		return nil
	}
	if cur, rerr := m.rt.store.GetTenant(ctx, m.name); rerr == nil &&
		cur.Value.Node == m.at.Value.Target && cur.Value.State == global.StateActive {
		m.at = cur
		return nil
	}
	return fmt.Errorf("flip %s onto %s: %w", m.name, m.at.Value.Target, err)
}

// putBack undoes a move that failed before its flip: the source thaws and
// the record is active on the source again. A copy that followed the
// source (or was promoted, never pointed at) is deleted; an image's copy
// on the target is left for the next move to replace. Its calls outlive
// ctx.
func (m *moveRun) putBack(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*m.rt.cfg.NodeTimeout)
	defer cancel()
	var errs []error
	thawed := true
	if err := m.rt.nodes.Freeze(ctx, m.src, m.name, false); err != nil {
		errs = append(errs, fmt.Errorf("thaw %s on %s: %w", m.name, m.at.Value.Node, err))
		thawed = false
	}
	followed := m.at.Value.MoveStep != ""
	back, err := m.write(ctx, m.at, func(at global.Versioned[global.Tenant]) (global.Versioned[global.Tenant], error) {
		return m.s.AbortMove(ctx, m.name, at)
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("put %s back on %s: %w", m.name, m.at.Value.Node, err))
	} else {
		m.rt.settleTo(ctx, back.Rev)
		if followed {
			m.dropTarget(ctx) // once the directory is back on the source
		}
		if !thawed {
			m.thawLater()
		}
	}
	return errors.Join(errs...)
}

// moveWriteTries bounds how often one of a move's writes is made again
// over changes to the record that are not the move's.
const moveWriteTries = 5

// write makes one of the move's writes to the tenant's record (a step, the
// flip, the put-back), with the record as read at at. The record takes one
// change that is not the move's while the move holds it: the tenant's copy
// recorded behind, or in step again, as its primary's node reports it
// (leasing's reports; the source's writes wait on it) — which moves the
// record's revision under the move. A write refused for that
// (global.ErrConflict) is made again on the record read anew, as long as
// nothing else in it changed; any other change fails it as before.
func (m *moveRun) write(ctx context.Context, at global.Versioned[global.Tenant], fn func(global.Versioned[global.Tenant]) (global.Versioned[global.Tenant], error)) (global.Versioned[global.Tenant], error) {
	for try := 1; ; try++ {
		next, err := fn(at)
		if err == nil || !errors.Is(err, global.ErrConflict) || try == moveWriteTries {
			return next, err
		}
		cur, rerr := m.s.GetTenant(ctx, m.name)
		if rerr != nil || !onlyBehindChanged(at.Value, cur.Value) {
			return next, err
		}
		m.rt.log.Info("a move's write made again: the tenant's copy was recorded behind or in step meanwhile",
			"tenant", m.name, "replica_behind", cur.Value.ReplicaBehind, "step", cur.Value.MoveStep)
		at = cur
	}
}

// onlyBehindChanged reports whether now differs from was in ReplicaBehind
// alone.
func onlyBehindChanged(was, now global.Tenant) bool {
	was.ReplicaBehind, now.ReplicaBehind = 0, 0
	return was == now
}

// thawLimit bounds how long a put-back move's source that did not answer
// its thaw is asked again.
const thawLimit = 10 * time.Minute

// thawLater asks the source of a move put back to thaw again, on a
// goroutine the router owns, until it does, the directory no longer
// places the tenant there active (moved or failed over since), or
// thawLimit passes: a source cut off as the move failed serves again once
// it answers, with no operator.
func (m *moveRun) thawLater() {
	m.rt.wg.Go(func() {
		ctx, cancel := context.WithTimeout(m.rt.ctx, thawLimit)
		defer cancel()
		for pause := 200 * time.Millisecond; ; pause = min(2*pause, 5*time.Second) {
			select {
			case <-ctx.Done():
				m.rt.log.Warn("a put-back move's source never thawed", "tenant", m.name, "node", m.at.Value.Node, "waited", thawLimit)
				return
			case <-time.After(pause):
			}
			if _, err := m.rt.nodes.Replication(ctx, m.src, m.name); err != nil {
				continue // not answering yet
			}
			if done := m.thawIfStill(ctx); done {
				return
			}
		}
	})
}

// thawIfStill thaws the source if the directory still places the tenant
// there, active; it reports whether it need not be asked again. It holds
// opMu, as a move's begin does: a move that begins after the look cannot
// have frozen the source for its switch before the thaw lands.
func (m *moveRun) thawIfStill(ctx context.Context) bool {
	m.rt.opMu.Lock()
	defer m.rt.opMu.Unlock()
	at, err := m.s.GetTenant(ctx, m.name)
	if err != nil && !isNotFound(err) {
		return false
	}
	if err != nil || at.Value.Node != m.at.Value.Node || at.Value.State != global.StateActive {
		return true // deleted, moved or failed over since: not this thaw's
	}
	tctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := m.rt.nodes.Freeze(tctx, m.src, m.name, false); err != nil {
		return false
	}
	m.rt.log.Info("thawed a put-back move's source once it answered", "tenant", m.name, "node", m.at.Value.Node)
	return true
}

// sourceGrace is how long a moved tenant's source stays (frozen: writes
// answer 503 and are asked again) after the flip, so that a request looked
// up just before a router saw the flip reaches a file that refuses it
// rather than none (404). A router that sees the flip later than this can
// still meet the 404.
const sourceGrace = 50 * time.Millisecond

// removeSourceLater deletes the source's file once the grace has passed,
// on a goroutine of the router's: the move answers without waiting for it.
// That is safe because it starts only after the flip (the directory points
// at the target, which serves: its install answered) and this router's
// view forwards there; the grace runs from then, as it did when the move
// waited. Until the file is gone, sources holds the source, so a move or
// a copy that would put the tenant back on that node waits for it rather
// than have its new file deleted.
func (m *moveRun) removeSourceLater(ctx context.Context) {
	id := nodeapi.RequestID(ctx)
	done := m.rt.sources.add(m.name, m.from)
	m.rt.wg.Go(func() {
		defer done()
		ctx, cancel := context.WithTimeout(m.rt.ctx, sourceGrace+2*m.rt.cfg.NodeTimeout)
		defer cancel()
		m.removeSource(nodeapi.WithRequestID(ctx, id))
	})
}

// removeSource deletes the source's file once the grace has passed and the
// directory still places nothing of the tenant on the source's node; it
// reports whether the file went.
func (m *moveRun) removeSource(ctx context.Context) bool {
	select {
	case <-time.After(sourceGrace):
	case <-ctx.Done():
	}
	if at, err := m.s.GetTenant(ctx, m.name); err == nil && repair.PlacesOn(at.Value, m.from) {
		m.rt.log.Warn("a moved tenant's source not deleted: the tenant is placed there again", "tenant", m.name, "node", m.from)
		return false
	}
	src, err := m.rt.apart(ctx, m.s, m.at.Value.Node, m.from) // the target keeps it now
	if err != nil {
		m.rt.log.Warn("a moved tenant's source not deleted", "tenant", m.name, "err", err)
		return false
	}
	if _, err := m.rt.nodes.Remove(ctx, src, m.name); err != nil {
		m.rt.log.Warn("delete a moved tenant's source", "tenant", m.name, "err", err)
		return false
	}
	m.rt.log.Info("deleted a moved tenant's source", "tenant", m.name, "node", m.from)
	return true
}

// sourceDeletes are the moved tenants whose source file is still to be
// deleted, by tenant: the source's node and a channel closed once done.
type sourceDeletes struct {
	mu sync.Mutex
	m  map[string]pendingSource
}

type pendingSource struct {
	node string
	done chan struct{}
}

// add records tenant's source on node as to be deleted; the func returned
// says it is done.
func (d *sourceDeletes) add(tenant, node string) func() {
	p := pendingSource{node: node, done: make(chan struct{})}
	d.mu.Lock()
	if d.m == nil {
		d.m = map[string]pendingSource{}
	}
	d.m[tenant] = p
	d.mu.Unlock()
	return func() {
		d.mu.Lock()
		if d.m[tenant].done == p.done {
			delete(d.m, tenant)
		}
		d.mu.Unlock()
		close(p.done)
	}
}

// pending reports whether a deletion of tenant's source on node is still
// to come.
func (d *sourceDeletes) pending(tenant, node string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.m[tenant]
	return ok && p.node == node
}

// wait returns once no deletion of tenant's source on node is pending.
func (d *sourceDeletes) wait(ctx context.Context, tenant, node string) error {
	d.mu.Lock()
	p, ok := d.m[tenant]
	d.mu.Unlock()
	if !ok || p.node != node {
		return nil
	}
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// recoverInBackground puts back, on a goroutine the router owns, every
// move a router left unfinished when it stopped or lost the lead.
func (rt *Router) recoverInBackground() {
	s, err := rt.lead.Changes(rt.ctx)
	if err != nil {
		return
	}
	rt.wg.Go(func() {
		if err := rt.recoverMoves(rt.ctx, s); err != nil {
			rt.log.Error("recover unfinished moves", "err", err)
		}
	})
}

// recoverMoves finishes or puts back every move a router left: one that
// reached global.MovePromoting is finished if the source, frozen again,
// holds nothing its promoted copy lacks (recoverPromoting); any other is
// put back — the source thawed, the record active on it again, a
// following copy on the target deleted — and a second move replaces the
// target's copy. A delete left unfinished is finished.
func (rt *Router) recoverMoves(ctx context.Context, s *global.Store) error {
	tenants, _, err := s.ListTenants(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for name, at := range tenants {
		s, err := rt.sides.ownTenant(ctx, s, name)
		if err != nil {
			continue // the other side finishes what it owns
		}
		if at.Value.HeldBy == holdDelete {
			if err := rt.finishDelete(ctx, s, name, at); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if at.Value.State != global.StateMoving || at.Value.HeldBy != global.HoldMove {
			continue
		}
		src, err := s.GetNode(ctx, at.Value.Node)
		if err != nil {
			errs = append(errs, fmt.Errorf("recover move of %s: %w", name, err))
			continue
		}
		m := &moveRun{rt: rt, s: s, name: name, at: at, from: at.Value.Node, src: src.Value}
		if at.Value.MoveStep == global.MovePromoting && m.recoverPromoting(ctx) {
			m.removeSourceLater(ctx)
			rt.repair.AfterMove(ctx, s, name, false)
			rt.log.Info("finished a move left unfinished", "tenant", name, "from", m.from, "node", m.at.Value.Node)
			continue
		}
		if err := m.putBack(ctx); err != nil {
			errs = append(errs, fmt.Errorf("recover move of %s: %w", name, err))
			continue
		}
		rt.log.Info("put back a move left unfinished", "tenant", name, "node", at.Value.Node, "target", at.Value.Target)
	}
	return errors.Join(errs...)
}

// moveRegions refuses a move between regions unless both are leased by
// the global tier (and this router is the global tier's): a region that
// leases its nodes owns its placements, and neither side can write both.
func (rt *Router) moveRegions(ctx context.Context, s *global.Store, name, to string) error {
	at, err := s.GetTenant(ctx, name)
	if err != nil {
		return nil // the move finds it unknown
	}
	src, err1 := s.GetNode(ctx, at.Value.Node)
	dst, err2 := s.GetNode(ctx, to)
	if err1 != nil || err2 != nil || src.Value.Region == dst.Value.Region {
		return nil
	}
	for _, r := range []string{src.Value.Region, dst.Value.Region} {
		rec, err := s.ReadRegion(ctx, r)
		if err != nil {
			return err
		}
		if rt.sides.mirroring() || rec.Value.LeasedBy() != global.LeaserGlobal {
			return fmt.Errorf("%w: a move between regions (%s to %s) needs both leased by the global tier, and is sent to its leading router; "+
				"region %s is leased by %q: hand it back first (POST /_shard/regions/%s/handoff {\"to\": \"global\"})",
				ErrNotOwner, src.Value.Region, dst.Value.Region, r, rec.Value.LeasedBy(), r)
		}
	}
	return nil
}
