package region

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/wire"
)

// A move by following: the target's copy follows the source over the
// replication feed while the source takes writes; once it is close, the
// switch freezes the source, waits for the copy to hold the source's last
// seq, promotes it and flips the directory. The source's writes pause for
// the switch alone, a few round trips, whatever the tenant's size. Each
// step is recorded in the tenant's record (global.MoveFollowing,
// MoveSwitching, MovePromoting), and recoverMoves finishes or puts back
// from there.

// moveCloseLag is how far behind the source (in seqs) the copy may be for
// the switch to begin: what is left to catch up with the source frozen.
const moveCloseLag = 32

// moveCloseWait bounds the wait, once the copy holds the source's image,
// for it to come within moveCloseLag: a source written faster than its
// copy applies is not switched (the move is put back).
const moveCloseWait = 30 * time.Second

// moveHearWait bounds the wait for the copy to hear from the source at
// all: one that has not is not going to follow it.
const moveHearWait = 15 * time.Second

// moveSwitchWait bounds the wait, with the source frozen, for the copy to
// apply the source's last seq; past it the source thaws and the move is
// put back, nothing lost.
const moveSwitchWait = 5 * time.Second

// errCannotFollow: the target cannot follow (no --replication-token):
// the move copies the frozen source's image instead.
var errCannotFollow = errors.New("the target cannot follow its source")

// startFollow makes the target's file anew (whatever it held of the
// tenant deleted first) and has it follow the source, then records the
// step. A target without a replication token is errCannotFollow, its new
// file deleted again.
func (m *moveRun) startFollow(ctx context.Context) error {
	dst, err := m.rt.apart(ctx, m.s, m.at.Value.Node, m.at.Value.Target)
	if err != nil {
		return fmt.Errorf("move %s to %s: %w", m.name, m.at.Value.Target, err)
	}
	m.dst = dst
	to := m.at.Value.Target
	if _, err := m.rt.nodes.Remove(ctx, dst, m.name); err != nil {
		return fmt.Errorf("delete a stale copy of %s on %s: %w", m.name, to, err)
	}
	if err := m.rt.nodes.Create(ctx, dst, m.name); err != nil {
		return fmt.Errorf("create the copy of %s on %s: %w", m.name, to, err)
	}
	if err := m.rt.nodes.Follow(ctx, dst, to, m.name, m.src); err != nil {
		if errors.Is(err, wire.ErrCannotFollow) {
			_, _ = m.rt.nodes.Remove(ctx, dst, m.name)
			return fmt.Errorf("%w: %w", errCannotFollow, err)
		}
		return fmt.Errorf("have the copy of %s on %s follow %s: %w", m.name, to, m.at.Value.Node, err)
	}
	// The quota goes with the copy, before the switch: the move's hold
	// keeps it from changing meanwhile.
	m.rt.carryQuota(ctx, m.s, dst, to, m.name)
	at, err := m.write(ctx, m.at, func(at global.Versioned[global.Tenant]) (global.Versioned[global.Tenant], error) {
		return m.s.StepMove(ctx, m.name, at, global.MoveFollowing, 0)
	})
	if err != nil {
		return fmt.Errorf("record the move of %s following: %w", m.name, err)
	}
	m.at = at
	m.rt.movePause(ctx, global.MoveFollowing)
	return nil
}

// awaitClose waits until the copy holds the source's image (its lineage)
// and is within moveCloseLag of the source's seq. It returns the copy's
// bytes on disk then.
func (m *moveRun) awaitClose(ctx context.Context) (int64, error) {
	to, from := m.at.Value.Target, m.at.Value.Node
	heard := time.Now().Add(moveHearWait)
	var held time.Time // when the copy first held the lineage
	var last string    // what the last look saw, for the error
	for pause := 5 * time.Millisecond; ; pause = min(2*pause, 100*time.Millisecond) {
		src, serr := m.rt.nodes.Replication(ctx, m.src, m.name)
		dst, derr := m.rt.nodes.Replication(ctx, m.dst, m.name)
		switch {
		case serr != nil:
			return 0, fmt.Errorf("read the source %s of %s: %w", from, m.name, serr)
		case derr != nil:
			last = derr.Error()
		case !dst.Heard && time.Now().After(heard):
			return 0, fmt.Errorf("%w: the copy of %s on %s has not heard from %s in %v: give both nodes the same --replication-token, and let %s reach %s's address",
				ErrCopyBehind, m.name, to, from, moveHearWait, to, from)
		case dst.LineageID() != 0 && dst.LineageID() == src.LineageID():
			if held.IsZero() {
				held = time.Now()
			}
			if src.Seq <= dst.Seq+moveCloseLag {
				sizes, err := m.rt.nodes.Sizes(ctx, m.dst)
				if err != nil {
					return 0, nil // the size is what the answer reports, no more
				}
				return sizes[m.name], nil
			}
			if time.Since(held) > moveCloseWait {
				return 0, fmt.Errorf("%w: the copy of %s on %s stayed %d seqs behind %s for %v: move it when its writes are lighter",
					ErrCopyBehind, m.name, to, src.Seq-dst.Seq, from, moveCloseWait)
			}
			last = fmt.Sprintf("seq %d of %d", dst.Seq, src.Seq)
		default:
			last = "the copy has not taken the source's image yet"
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%w: the copy of %s on %s (last: %s): %w", ErrCopyBehind, m.name, to, last, ctx.Err())
		case <-time.After(pause):
		}
	}
}

// switchOver freezes the source, waits for the copy to apply the
// source's last seq, promotes it and flips the directory onto it. It
// returns how long the source was frozen before the flip. A failure
// leaves the move for putBack (which thaws the source).
func (m *moveRun) switchOver(ctx context.Context) (time.Duration, error) {
	from, to := m.at.Value.Node, m.at.Value.Target
	frozen := time.Now()
	last, err := m.rt.nodes.FreezeAt(ctx, m.src, m.name) // the source's last seq
	if err != nil {
		return 0, fmt.Errorf("freeze %s on %s: %w", m.name, from, err)
	}
	read := time.Now()
	if err := m.recordSwitch(ctx, func() error { return m.awaitSeq(ctx, last) }); err != nil {
		return 0, err
	}
	caught := time.Now()
	m.rt.movePause(ctx, global.MoveSwitching)
	at, err := m.write(ctx, m.at, func(at global.Versioned[global.Tenant]) (global.Versioned[global.Tenant], error) {
		return m.s.StepMove(ctx, m.name, at, global.MovePromoting, last)
	})
	if err != nil {
		return 0, fmt.Errorf("record the promotion of %s on %s: %w", m.name, to, err)
	}
	m.at = at
	// The source is asked again as the copy is promoted: one started
	// again meanwhile has lost its freeze, and may have taken writes the
	// copy lacks.
	still := make(chan error, 1)
	go func() { still <- m.stillFrozen(ctx, last) }()
	ans, err := m.promote(ctx)
	if serr := <-still; err == nil {
		err = serr
	}
	if err != nil {
		return 0, err
	}
	promoted := time.Now()
	m.rt.movePause(ctx, global.MovePromoting)
	if err := m.flipForked(ctx, ans.History); err != nil {
		return 0, err
	}
	m.rt.log.Info("move switched", "tenant", m.name, "from", from, "to", to, "seq", last,
		"freeze_ms", read.Sub(frozen).Milliseconds(), "catch_up_ms", caught.Sub(read).Milliseconds(),
		"promote_ms", promoted.Sub(caught).Milliseconds(), "flip_ms", time.Since(promoted).Milliseconds())
	return time.Since(frozen), nil
}

// recordSwitch records the move switching (global.MoveSwitching) while
// catchUp runs, and returns once both ended: the first error, the
// record's first. The step is recorded only once the source is frozen:
// the leasing keeps a switching tenant off its source's list (a source
// started again never takes its writes), and a write the source took
// before the freeze is answered under the lease that named it, not failed
// by a grant that left it out. Recorded as the copy catches up, it adds
// nothing to the pause unless the directory is the slower.
func (m *moveRun) recordSwitch(ctx context.Context, catchUp func() error) error {
	type recorded struct {
		at  global.Versioned[global.Tenant]
		err error
	}
	done := make(chan recorded, 1)
	at := m.at
	go func() {
		next, err := m.write(ctx, at, func(at global.Versioned[global.Tenant]) (global.Versioned[global.Tenant], error) {
			return m.s.StepMove(ctx, m.name, at, global.MoveSwitching, 0)
		})
		done <- recorded{next, err}
	}()
	cerr := catchUp()
	rec := <-done
	if rec.err != nil {
		return fmt.Errorf("record the switch of %s: %w", m.name, rec.err)
	}
	m.at = rec.at
	return cerr
}

// stillFrozen checks that the source is frozen at seq, its last.
func (m *moveRun) stillFrozen(ctx context.Context, seq uint64) error {
	st, err := m.rt.nodes.Replication(ctx, m.src, m.name)
	switch {
	case err != nil:
		return fmt.Errorf("read %s on %s as its copy is promoted: %w", m.name, m.at.Value.Node, err)
	case !st.Frozen || st.Seq != seq:
		return fmt.Errorf("%w: %s on %s thawed (frozen %v) or moved on (seq %d, frozen at %d) as its copy was promoted: started again? the move is put back",
			ErrNodeCall, m.name, m.at.Value.Node, st.Frozen, st.Seq, seq)
	}
	return nil
}

// awaitSeq waits, at most moveSwitchWait, until the copy has applied seq.
// Each look asks the copy and the source at once and takes the first to
// say so: the source knows what its copies acknowledged a one-way trip
// before the copy could be asked it across a wide-area link (sourceSays).
// The promotion checks the copy's seq again (promote): a look that was
// wrong costs the move, never a write.
func (m *moveRun) awaitSeq(ctx context.Context, seq uint64) error {
	ctx, cancel := context.WithTimeout(ctx, moveSwitchWait)
	defer cancel()
	var last string
	for pause := time.Millisecond; ; pause = min(2*pause, 20*time.Millisecond) {
		lctx, lcancel := context.WithCancel(ctx)
		said := make(chan string, 2) // "" when a look says the copy holds seq
		var looks sync.WaitGroup     // both looks, ended by lcancel once one said so
		looks.Go(func() {
			st, err := m.rt.nodes.Replication(lctx, m.dst, m.name)
			switch {
			case err != nil:
				said <- err.Error()
			case st.Seq >= seq:
				said <- ""
			default:
				said <- fmt.Sprintf("seq %d", st.Seq)
			}
		})
		looks.Go(func() { said <- m.sourceSays(lctx, seq) })
		held := false
		for range 2 {
			if why := <-said; why == "" {
				held = true
				break
			} else if !strings.HasPrefix(why, "source:") || last == "" {
				last = why
			}
		}
		lcancel()
		looks.Wait()
		if held {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: the copy of %s on %s did not reach the frozen source's seq %d within %v (last: %s); the source takes writes again",
				ErrCopyBehind, m.name, m.at.Value.Target, seq, moveSwitchWait, last)
		case <-time.After(pause):
		}
	}
}

// sourceSays is "" when the frozen source counts as many voting copies
// as the move expects (the target, and the tenant's own copy if it has
// one), each having acknowledged seq; else why not, prefixed "source:".
// A copy the source cannot name, one more or one fewer, makes it say no.
func (m *moveRun) sourceSays(ctx context.Context, seq uint64) string {
	st, err := m.rt.nodes.Replication(ctx, m.src, m.name)
	if err != nil {
		return "source: " + err.Error()
	}
	want, voting := 1, 0
	if m.at.Value.Replica != "" {
		want++
	}
	for _, c := range st.Copies {
		if c.Role == wire.RoleRead {
			continue
		}
		voting++
		if c.Acked < seq {
			return fmt.Sprintf("source: a copy acknowledged %d", c.Acked)
		}
	}
	if voting != want {
		return fmt.Sprintf("source: %d voting copies stream, %d expected", voting, want)
	}
	return ""
}

// promote promotes the copy on the target with the tenant's lineage, as a
// failover does, and checks it holds the seq recorded with the step.
func (m *moveRun) promote(ctx context.Context) (wire.Promoted, error) {
	to := m.at.Value.Target
	ans, err := m.rt.nodes.Promote(ctx, m.dst, m.name, m.at.Value, false, m.rt.sides.promoteFence(m.dst.Region))
	if err != nil {
		return ans, fmt.Errorf("promote the copy of %s on %s: %w", m.name, to, err)
	}
	if ans.Seq < m.at.Value.MoveSeq {
		return ans, fmt.Errorf("%w: the copy of %s on %s was promoted at seq %d, the source's last is %d",
			ErrCopyBehind, m.name, to, ans.Seq, m.at.Value.MoveSeq)
	}
	return ans, nil
}

// flipForked points the directory at the promoted target, recording the
// history it forked at. A write whose outcome is unknown is read back.
func (m *moveRun) flipForked(ctx context.Context, forked uint64) error {
	done, err := m.write(ctx, m.at, func(at global.Versioned[global.Tenant]) (global.Versioned[global.Tenant], error) {
		return m.s.FinishMoveForked(ctx, m.name, at, forked)
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

// dropTarget deletes the target's file of a move put back after its copy
// began following (best effort: a file left is replaced by the next move
// or copy made there, and no directory names it). A target this move told
// apart from the source already is not asked again: the source may be
// what does not answer.
func (m *moveRun) dropTarget(ctx context.Context) {
	dst, err := m.dst, error(nil)
	if dst.Addr == "" { // a move recovered: not told apart yet
		dst, err = m.rt.apart(ctx, m.s, m.at.Value.Node, m.at.Value.Target)
	}
	if err == nil {
		_, err = m.rt.nodes.Remove(ctx, dst, m.name)
	}
	if err != nil {
		m.rt.log.Warn("the copy of a move put back not deleted", "tenant", m.name, "node", m.at.Value.Target, "err", err)
	}
}

// recoverPromoting finishes a move its router left at MovePromoting if
// that is safe: the source, frozen again, holds no seq past the one the
// copy was recorded to hold, and the copy (promoted again, which a
// promoted copy answers as it is) holds it. It reports whether it did.
func (m *moveRun) recoverPromoting(ctx context.Context) bool {
	dst, err := m.rt.apart(ctx, m.s, m.at.Value.Node, m.at.Value.Target)
	if err != nil {
		m.rt.log.Warn("a promoting move not finished: its target", "tenant", m.name, "err", err)
		return false
	}
	m.dst = dst
	if err := m.rt.nodes.Freeze(ctx, m.src, m.name, true); err != nil {
		m.rt.log.Warn("a promoting move not finished: its source does not answer", "tenant", m.name, "err", err)
		return false
	}
	src, err := m.rt.nodes.Replication(ctx, m.src, m.name)
	if err != nil || src.Seq > m.at.Value.MoveSeq {
		m.rt.log.Warn("a promoting move not finished: its source holds more than its copy was recorded to",
			"tenant", m.name, "recorded", m.at.Value.MoveSeq, "source_seq", src.Seq, "err", err)
		return false
	}
	ans, err := m.promote(ctx)
	if err == nil {
		err = m.flipForked(ctx, ans.History)
	}
	if err != nil {
		m.rt.log.Warn("a promoting move not finished", "tenant", m.name, "err", err)
		return false
	}
	return true
}

// movePause holds a move at step until ctx ends, when the router was
// started to (Config.TestMovePause): a test kills the router there.
func (rt *Router) movePause(ctx context.Context, step string) {
	if rt.cfg.TestMovePause != step {
		return
	}
	rt.log.Warn("move paused for a test", "step", step)
	<-ctx.Done()
}
