package node

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fenec-go/fenec/engine"
	"github.com/fenec-go/fenec/wire"
)

// followExt ends the file beside a replica's that says whom it follows.
const followExt = ".follow"

// errImageTaken ends a follower whose tenant is being replaced by an
// image from its primary.
var errImageTaken = errors.New("image taken from the primary")

// errFeedEnded closes a follower's ack stream as it stops reading.
var errFeedEnded = errors.New("replication feed ended")

// followState is a replica file's role, kept beside it: the node it
// follows and whether it has heard a hello from that node since it was
// told to follow it (what lets it be promoted whatever history it holds).
type followState struct {
	From string `json:"from"`
	// As is the name this copy follows under (its node's name in the
	// directory), sent with every feed request: a primary counts only the
	// copy its lease list names as holding a write. Empty: unnamed.
	As      string    `json:"as,omitempty"`
	Heard   bool      `json:"heard"`
	HeardAt time.Time `json:"heard_at,omitzero"`
}

func (r *registry) followPath(name string) string {
	return filepath.Join(r.dir, name+followExt)
}

// loadFollow reads a tenant's follow state; nil for a primary's file.
func (r *registry) loadFollow(name string) (*followState, error) {
	b, err := os.ReadFile(r.followPath(name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read follow state: %w", err)
	}
	var st followState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("read follow state of %s: %w", name, err)
	}
	return &st, nil
}

// storeFollow keeps st beside the tenant's file, written whole and
// renamed into place.
func (r *registry) storeFollow(name string, st followState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return writeFileAtomic(r.dir, r.followPath(name), b)
}

// dropFollow makes a file a primary's again on disk.
func (r *registry) dropFollow(name string) error {
	if err := os.Remove(r.followPath(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove follow state: %w", err)
	}
	return syncDir(r.dir)
}

// writeFileAtomic writes b to a temp file in dir, syncs it and renames it
// to path, then syncs dir.
func writeFileAtomic(dir, path string, b []byte) error {
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	_, werr := tmp.Write(b)
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return syncDir(dir)
}

// syncDir makes a rename or remove in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	return nil
}

// lineageID names a file's lineage: its first history.
func lineageID(l []engine.LineageEntry) uint64 {
	if len(l) == 0 {
		return 0
	}
	return l[0].History
}

// onLineage says whether history h is on l.
func onLineage(l []engine.LineageEntry, h uint64) bool {
	for _, e := range l {
		if e.History == h {
			return true
		}
	}
	return false
}

// startFollower has t follow st.From: a goroutine the tenant owns, holding
// a reference so the replica stays open.
func (r *registry) startFollower(t *tenant, st *followState) {
	r.mu.Lock()
	t.refs++
	r.mu.Unlock()
	ctx, cancel := context.WithCancel(t.ctx)
	done := make(chan struct{})
	t.mu.Lock()
	t.followCancel, t.followDone = cancel, done
	t.mu.Unlock()
	t.follow.Store(st)
	t.role.Store(int32(RoleReplica))
	t.wg.Go(func() {
		defer close(done)
		defer r.release(t)
		defer cancel()
		t.runFollower(ctx, st.From)
	})
}

// stopFollower ends t's follower, if it has one, and waits for it.
func (t *tenant) stopFollower() {
	t.mu.Lock()
	cancel, done := t.followCancel, t.followDone
	t.followCancel, t.followDone = nil, nil
	t.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// runFollower follows the primary at from until ctx ends or an image
// from it replaces the file, reconnecting with a back-off.
func (t *tenant) runFollower(ctx context.Context, from string) {
	wait := 50 * time.Millisecond
	for ctx.Err() == nil {
		err := t.followOnce(ctx, from)
		if errors.Is(err, errImageTaken) {
			return
		}
		if ctx.Err() == nil {
			t.reg.log.Debug("following", "tenant", t.name, "from", from, "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(wait*2, 2*time.Second)
	}
}

// followOnce reads one feed from the primary, applying what it sends,
// and acknowledges what its own file holds durably on the same request:
// its body streams acks while the answer streams records. Records are
// synced once per batch (what arrived together), then acknowledged. A
// feed silent for three keepalive periods (a primary cut off) is dropped
// and asked again.
func (t *tenant) followOnce(ctx context.Context, from string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// What the file holds is durable before the primary is told where it
	// stands: the position asked from is the first ack.
	if err := t.db.Sync(); err != nil {
		return fmt.Errorf("sync before following: %w", err)
	}
	since := t.db.Seq()
	silence := 3 * t.reg.keepAlive
	watchdog := time.AfterFunc(silence, cancel)
	defer watchdog.Stop()
	u := strings.TrimSuffix(from, "/") + "/t/" + t.name + "/_replication?since=" +
		strconv.FormatUint(since, 10) + "&history=" + strconv.FormatUint(t.db.History(), 10)
	if st := t.follow.Load(); st != nil && st.As != "" {
		u += "&copy=" + url.QueryEscape(st.As)
	}
	ackR, ackW := io.Pipe()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, ackR)
	if err != nil {
		return err
	}
	req.ContentLength = -1 // streamed, chunked
	req.Header.Set("Authorization", "Bearer "+t.reg.replToken)
	req.Header.Set("Content-Type", "application/octet-stream")
	ack := newAcker(ackW, since)
	var wg sync.WaitGroup
	wg.Go(func() { ack.run(ctx) })
	defer wg.Wait()
	defer ackW.CloseWithError(errFeedEnded) // ends an ack write held up
	defer cancel()
	res, err := t.reg.replClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("replication feed: status %d", res.StatusCode)
	}
	t.followLive.Store(true)
	defer t.followLive.Store(false)
	br := bufio.NewReaderSize(res.Body, 64<<10)
	var image *os.File
	defer func() {
		if image != nil {
			image.Close()
			os.Remove(image.Name())
		}
	}()
	unsynced := 0 // records applied since the last sync
	for {
		kind, payload, err := readFrame(br)
		if err != nil {
			return err
		}
		watchdog.Reset(silence)
		t.followFrame.Store(time.Now().UnixNano())
		switch kind {
		case frameHello:
			if err := t.heard(); err != nil {
				return err
			}
		case frameRecord:
			if len(payload) < 16 {
				return errors.New("replication record frame too short")
			}
			rec := engine.RawRecord{
				First: binary.BigEndian.Uint64(payload[:8]),
				Last:  binary.BigEndian.Uint64(payload[8:16]),
				Bytes: payload[16:],
			}
			if err := t.db.ApplyRecord(rec); err != nil {
				return fmt.Errorf("apply record %d..%d: %w", rec.First, rec.Last, err)
			}
			unsynced++
		case frameImage:
			if image == nil {
				if image, err = os.CreateTemp(t.reg.dir, t.name+".image.*.part"); err != nil {
					return fmt.Errorf("receive image: %w", err)
				}
			}
			if _, err := image.Write(payload); err != nil {
				return fmt.Errorf("receive image: %w", err)
			}
		case frameImageEnd:
			if image == nil {
				return errors.New("replication image end without an image")
			}
			return t.takeImage(image)
		}
		// The batch ends where nothing more has arrived: one sync for it,
		// then its ack. A keepalive is answered with the ack again, so
		// the primary knows the copy still listens.
		if unsynced > 0 && (br.Buffered() == 0 || unsynced >= maxAckBatch) {
			seq := t.db.Seq()
			if err := t.db.Sync(); err != nil {
				return fmt.Errorf("sync replicated records: %w", err)
			}
			unsynced = 0
			ack.offer(seq, false)
		} else if kind == frameKeep {
			ack.offer(0, true)
		}
	}
}

// maxAckBatch bounds the records a follower applies between two syncs
// (and acks) while more keep arriving.
const maxAckBatch = 512

// acker sends a follower's acks on the feed's request body: the newest
// durable seq offered, skipping any a slow connection overtook.
type acker struct {
	w     *io.PipeWriter
	wake  chan struct{} // cap 1
	mu    sync.Mutex
	want  uint64 // guarded by mu: the newest seq to acknowledge
	again bool   // guarded by mu: send it even if sent already
}

func newAcker(w *io.PipeWriter, first uint64) *acker {
	a := &acker{w: w, wake: make(chan struct{}, 1), want: first, again: true}
	a.wake <- struct{}{}
	return a
}

// offer has seq acknowledged soon; again, the newest ack sent again.
func (a *acker) offer(seq uint64, again bool) {
	a.mu.Lock()
	a.want = max(a.want, seq)
	a.again = a.again || again
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// run writes acks until ctx ends or the body is closed.
func (a *acker) run(ctx context.Context) {
	var sent uint64
	for {
		select {
		case <-ctx.Done():
			a.w.CloseWithError(ctx.Err())
			return
		case <-a.wake:
		}
		a.mu.Lock()
		seq, again := a.want, a.again
		a.again = false
		a.mu.Unlock()
		if seq <= sent && !again {
			continue
		}
		var buf [13]byte
		buf[0] = frameAck
		binary.BigEndian.PutUint32(buf[1:5], 8)
		binary.BigEndian.PutUint64(buf[5:], seq)
		if _, err := a.w.Write(buf[:]); err != nil {
			return
		}
		sent = seq
	}
}

// heard records a hello from the followed node (once, durably, since the
// node was told to follow it) and when it came.
func (t *tenant) heard() error {
	now := time.Now().UTC()
	t.mu.Lock()
	t.lastHello = now
	t.mu.Unlock()
	st := t.follow.Load()
	if st == nil || st.Heard {
		return nil
	}
	next := *st
	next.Heard, next.HeardAt = true, now
	if err := t.reg.storeFollow(t.name, next); err != nil {
		return err
	}
	t.follow.Store(&next)
	return nil
}

// takeImage installs a received image beside the file, then has the
// registry put it in the file's place (closing the tenant, so on a
// goroutine of the registry's) and open it again.
func (t *tenant) takeImage(part *os.File) error {
	if _, err := part.Seek(0, 0); err != nil {
		return fmt.Errorf("install image: %w", err)
	}
	incoming := filepath.Join(t.reg.dir, t.name+".image.new")
	os.Remove(incoming)
	if err := engine.Install(incoming, part); err != nil {
		return fmt.Errorf("install image: %w", err)
	}
	r := t.reg
	r.mu.Lock()
	if r.closed { // shutting down: the next start asks for the image again
		r.mu.Unlock()
		os.Remove(incoming)
		return errImageTaken
	}
	r.wg.Add(1) // under r.mu, so never after close began to wait
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		err := r.remove(t.name, ErrTenantClosing, func(path string) error {
			if err := os.Rename(incoming, path); err != nil {
				return fmt.Errorf("replace tenant file: %w", err)
			}
			return syncDir(r.dir)
		})
		if err != nil {
			r.log.Error("replica image not taken", "tenant", t.name, "err", err)
			os.Remove(incoming)
		}
		r.reopen(t.name)
	}()
	return errImageTaken
}

// reopen opens a tenant (a replica starts following as it opens).
func (r *registry) reopen(name string) {
	t, err := r.acquire(r.ctx, name)
	if err != nil {
		if !errors.Is(err, ErrShuttingDown) && !errors.Is(err, context.Canceled) {
			r.log.Error("reopen tenant", "tenant", name, "err", err)
		}
		return
	}
	r.release(t)
}

// startFollowers opens every replica file in the directory, so each
// follows its primary from the start.
func (r *registry) startFollowers() error {
	ents, err := os.ReadDir(r.dir)
	if err != nil {
		return fmt.Errorf("read tenant dir: %w", err)
	}
	for _, e := range ents {
		if name, ok := strings.CutSuffix(e.Name(), followExt); ok && validName(name) {
			r.reopen(name)
		}
	}
	return nil
}

// follow makes an open tenant's file a replica following from.
func (r *registry) follow(t *tenant, from, as string) error {
	t.stopFollower()
	st := &followState{From: from, As: as}
	if err := r.storeFollow(t.name, *st); err != nil {
		return err
	}
	r.startFollower(t, st)
	return nil
}

// checkFrom checks a node URL to follow.
func checkFrom(from string) error {
	u, err := url.Parse(from)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return fmt.Errorf("%w: from must be http://host:port", ErrBadRequest)
	}
	return nil
}

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

// adminFollow has a tenant's file follow another node's copy.
func (c *call) adminFollow(name string) {
	b, err := c.readBody()
	if err != nil {
		c.fail(err)
		return
	}
	var body wire.Follow
	if err := json.Unmarshal(b, &body); err != nil {
		c.fail(fmt.Errorf("%w: follow: %v", ErrBadRequest, err))
		return
	}
	if err := checkFrom(body.From); err != nil {
		c.fail(err)
		return
	}
	if body.As != "" && !validName(body.As) {
		c.fail(fmt.Errorf("%w: follow: as %q is not a node name", ErrBadRequest, body.As))
		return
	}
	if c.s.cfg.ReplicationToken == "" {
		c.fail(fmt.Errorf("%w: this node has no --replication-token to follow with", ErrBadRequest))
		return
	}
	t, err := c.s.reg.acquire(c.r.Context(), name)
	if err != nil {
		c.fail(err)
		return
	}
	defer c.s.reg.release(t)
	if err := c.s.reg.follow(t, body.From, body.As); err != nil {
		c.fail(err)
		return
	}
	writeJSON(c.w, http.StatusOK, wire.Followed{Tenant: name, From: body.From})
	c.s.auditf(c, "follow", name, body.From)
}

// adminReplication reports a tenant's role and position.
func (c *call) adminReplication(name string) {
	t, err := c.s.reg.acquire(c.r.Context(), name)
	if err != nil {
		c.fail(err)
		return
	}
	defer c.s.reg.release(t)
	out := wire.Replication{
		Role: "primary", Seq: t.db.Seq(), Durable: t.db.Durable(), History: t.db.History(),
		Lineage: wireLineage(t.db.Lineage()), Copies: t.copies(),
	}
	if st := t.follow.Load(); st != nil {
		t.mu.Lock()
		last := t.lastHello
		t.mu.Unlock()
		out.Role, out.From, out.Heard = "replica", st.From, st.Heard
		if !last.IsZero() {
			out.LastHello = &last
		}
	}
	writeJSON(c.w, http.StatusOK, out)
}

// wireLineage is a file's lineage as the admin API lists it.
func wireLineage(l []engine.LineageEntry) []wire.LineageEntry {
	out := make([]wire.LineageEntry, len(l))
	for i, e := range l {
		out[i] = wire.LineageEntry{History: e.History, From: e.From}
	}
	return out
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
