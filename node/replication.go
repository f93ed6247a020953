package node

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenec-go/fenec/engine"
	"github.com/fenec-go/fenec/wire"
)

// The replication feed (GET /t/<t>/_replication?since=S&history=H
// [&copy=NAME][&role=read]) is a stream of frames: a kind byte, a
// big-endian uint32 length, the payload. It is full duplex: while the
// answer streams records, the request's body streams the copy's acks and
// probes in the same frames. The answer's Fenec-Feed-Features says what
// the primary does of what a copy may ask (wire.FeedProbes,
// wire.FeedReadCopies); a copy asks nothing its primary does not say it
// does, so a primary from before either is followed as before. A primary
// passes over a frame of a kind it does not know; a copy too.
const (
	frameHello    = 'h' // JSON replHello: who the primary is now
	frameRecord   = 'r' // uint64 first, uint64 last, then a raw record
	frameImage    = 'i' // a piece of a whole image
	frameImageEnd = 'e' // the image is whole: install it, then ask again
	frameKeep     = 'k' // nothing new
	// framePosition answers a probe: uint64 probe, uint64 seq, uint64
	// history, a flags byte (positionLeased), more to be passed over
	// (freshness.go).
	framePosition = 'P'
	// The copy streams acks the other way, in the request's body, each
	// the highest seq its own file holds durably, and probes, each a
	// number the primary answers with a position frame.
	frameAck   = 'a' // uint64 seq
	frameProbe = 'p' // uint64 probe number
	maxFrame   = 256 << 20
	imageChunk = 1 << 20
)

// errCopySilent ends a feed whose copy sent no ack (it answers every
// keepalive with one) to silentKeeps keepalives in a row: cut off or gone.
var errCopySilent = errors.New("the copy answered none of three keepalives in a row")

// silentKeeps is how many keepalives in a row a copy may leave unanswered.
// Counted in keepalives sent, not in time: a primary that was itself held
// up (descheduled, its flush slow) and sent nothing meanwhile does not
// count the copy silent for the keepalives it never sent.
const silentKeeps = 3

// replHello opens every feed.
type replHello struct {
	History uint64                `json:"history"`
	Seq     uint64                `json:"seq"`
	Lineage []engine.LineageEntry `json:"lineage"`
	// Applied: the primary answers no write on its copies' acks (it runs
	// no --sync always), so a copy that itself runs --sync off may
	// acknowledge what it applied without syncing it first. A primary
	// that does not say so gets acks of what the copy synced.
	Applied bool `json:"applied,omitempty"`
}

// frameWriter writes frames and flushes them to the client.
type frameWriter struct {
	bw *bufio.Writer
	rc *http.ResponseController
}

func (f *frameWriter) frame(kind byte, parts ...[]byte) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	var hdr [5]byte
	hdr[0] = kind
	binary.BigEndian.PutUint32(hdr[1:], uint32(n))
	if _, err := f.bw.Write(hdr[:]); err != nil {
		return err
	}
	for _, p := range parts {
		if _, err := f.bw.Write(p); err != nil {
			return err
		}
	}
	return nil
}

func (f *frameWriter) flush() error {
	if err := f.bw.Flush(); err != nil {
		return err
	}
	return f.rc.Flush()
}

// Write sends image bytes as image frames (WriteImage writes into it).
func (f *frameWriter) Write(p []byte) (int, error) {
	for off := 0; off < len(p); off += imageChunk {
		if err := f.frame(frameImage, p[off:min(off+imageChunk, len(p))]); err != nil {
			return off, err
		}
	}
	return len(p), nil
}

// replicationFeed serves a copy its tenant's durable records after its
// position, for as long as it listens; a copy not on this file's lineage
// (or behind what the file keeps) is sent a whole image instead.
func (c *call) replicationFeed() {
	q, err := c.queryValues()
	if err != nil {
		c.fail(err)
		return
	}
	since, err1 := strconv.ParseUint(q.Get("since"), 10, 64)
	hist, err2 := strconv.ParseUint(q.Get("history"), 10, 64)
	copyName := q.Get("copy") // the name the copy follows under, if any
	if err1 != nil || err2 != nil {
		c.fail(fmt.Errorf("%w: since and history must be numbers", ErrBadRequest))
		return
	}
	read, err := feedRole(q.Get("role"))
	if err != nil {
		c.fail(err)
		return
	}
	old := c.s.oldFeeds.Load()
	read = read && !old
	rc := http.NewResponseController(c.w)
	if err := rc.EnableFullDuplex(); err != nil {
		c.fail(fmt.Errorf("replication feed: %w", err))
		return
	}
	// The copy's acks come as writes do, with no bound on the gap between
	// them: the body timeout armed as the request came in does not apply.
	// However the feed ends, the copy's unread acks are not read after
	// it: the server would otherwise wait on them to reuse the connection.
	_ = rc.SetReadDeadline(time.Time{})
	defer rc.SetReadDeadline(time.Now())
	// Nor is the connection used again: the server takes the deadline
	// that ends the reading of acks for the connection failing, and would
	// start the next request on it with its context already cancelled.
	c.w.Header().Set("Connection", "close")
	c.w.Header().Set("Content-Type", "application/octet-stream")
	if !old {
		c.w.Header().Set(wire.HeaderFeedFeatures, wire.FeedProbes+", "+wire.FeedReadCopies)
	}
	c.w.WriteHeader(http.StatusOK)
	defer c.cutWhenGone()()
	fw := &frameWriter{bw: bufio.NewWriterSize(c.w, 64<<10), rc: rc}
	db := c.t.db
	image := c.sendImage
	if read {
		image = c.sendCommittedImage // readcopy.go
	}
	if !db.Holds(hist, since) {
		// No hello before the image: a copy that has not taken it is not
		// yet this tenant, and must not count as having heard from it.
		image(fw)
		return
	}
	hello, _ := json.Marshal(replHello{History: db.History(), Seq: db.Seq(), Lineage: db.Lineage(), Applied: !c.s.syncAlways})
	if fw.frame(frameHello, hello) != nil {
		return
	}
	if err := c.sendRecords(fw, since, copyName, read, old); err != nil {
		if errors.Is(err, engine.ErrCursorGone) {
			image(fw)
			return
		}
		c.log.Debug("replication feed ended", "tenant", c.t.name, "err", err)
	}
}

// sendImage sends the whole tenant as image frames.
func (c *call) sendImage(fw *frameWriter) {
	if _, err := c.t.db.WriteImage(fw); err != nil {
		c.log.Error("replication image", "tenant", c.t.name, "err", err)
		return
	}
	c.endImage(fw)
}

// endImage ends an image sent whole, and waits for the copy to hang up.
func (c *call) endImage(fw *frameWriter) {
	if fw.frame(frameImageEnd) != nil || fw.flush() != nil {
		return
	}
	// The copy hangs up once it has the image. Waiting for that (read its
	// acks to the end, bounded) before the handler returns has the image
	// reach it at once: a handler ending with the request's body unread
	// has the server hold what it sent for a while.
	fw.rc.SetReadDeadline(time.Now().Add(imageHangUp))
	io.Copy(io.Discard, io.LimitReader(c.r.Body, 1<<20))
}

// imageHangUp bounds how long a feed that sent an image waits for the
// copy to hang up.
const imageHangUp = 2 * time.Second

// feed is one replication stream a primary sends: the seq its copy has
// acknowledged as durable in its own file (guarded by tenant.mu).
type feed struct {
	// copy is the name the copy follows under ("": unnamed).
	copy string
	// read: a read copy's (role=read), sent only what is committed
	// (readcopy.go) and never waited for nor counted as holding a write.
	read  bool
	acked uint64
	// sentAll is where the stream last stood having sent all the tenant
	// held durably: a lagging copy that acknowledges it has caught up.
	sentAll uint64
	// heard counts the acks the copy sent: one that answers none of
	// silentKeeps keepalives in a row has gone, and its feed ends.
	heard atomic.Uint64
	// lagging: a write stopped waiting for this copy (waitAcked's bound
	// passed); no write waits for it again until it has acknowledged
	// everything the tenant held durably as the ack came.
	lagging bool
	// asked is the newest probe the copy sent, and probed (cap 1) wakes
	// the stream to answer it.
	asked  atomic.Uint64
	probed chan struct{}
}

// noneSent is a feed's sentAll before its stream first caught up.
const noneSent = math.MaxUint64

// addFeed registers a stream whose copy holds since durably (a follower
// syncs its file before it asks); the func drops it. Writes wait for a
// copy from the moment it connects.
func (t *tenant) addFeed(since uint64, copyName string, read bool) (*feed, func()) {
	f := &feed{acked: since, sentAll: noneSent, copy: copyName, read: read, probed: make(chan struct{}, 1)}
	t.mu.Lock()
	t.feeds[f] = struct{}{}
	t.mu.Unlock()
	return f, func() {
		t.mu.Lock()
		delete(t.feeds, f)
		t.notifyAckedLocked()
		t.mu.Unlock()
	}
}

// ackedTo notes a stream's copy holds everything up to seq durably. A
// lagging copy acknowledging all its stream had sent when the stream last
// stood at the end of what was durable has caught up: it is waited for
// again.
func (t *tenant) ackedTo(f *feed, seq uint64) {
	t.mu.Lock()
	if seq > f.acked {
		f.acked = seq
		t.notifyAckedLocked()
	}
	if f.lagging && seq >= f.sentAll {
		f.lagging = false // waited for again
	}
	t.mu.Unlock()
}

// sentAllTo notes a stream has sent everything the tenant held durably,
// up to seq.
func (t *tenant) sentAllTo(f *feed, seq uint64) {
	t.mu.Lock()
	f.sentAll = seq
	t.mu.Unlock()
}

func (t *tenant) notifyAckedLocked() {
	close(t.sentCh)
	t.sentCh = make(chan struct{})
}

// copies lists the streams open from this file, least acknowledged first.
func (t *tenant) copies() []wire.CopyStatus {
	t.mu.Lock()
	out := make([]wire.CopyStatus, 0, len(t.feeds))
	for f := range t.feeds {
		role := wire.RoleVoting
		if f.read {
			role = wire.RoleRead
		}
		out = append(out, wire.CopyStatus{Acked: f.acked, Lagging: f.lagging, Role: role})
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b wire.CopyStatus) int { return cmp.Compare(a.Acked, b.Acked) })
	return out
}

// readAcks reads the copy's acknowledgements from the feed's request
// body (ack frames, each the highest seq its file holds durably) and its
// probes (handed to the stream to answer) until the body ends or fails.
// A frame of another kind is passed over: a later copy may say more
// (unless old: as a node before probes did, it ends the feed).
func (t *tenant) readAcks(body io.Reader, f *feed, old bool) error {
	br := bufio.NewReaderSize(body, 512)
	for {
		kind, payload, err := readFrame(br)
		if err != nil {
			return err
		}
		switch {
		case old && kind != frameAck:
			return fmt.Errorf("replication ack frame %q of %d bytes", kind, len(payload))
		case kind == frameAck && len(payload) == 8:
			f.heard.Add(1)
			t.ackedTo(f, binary.BigEndian.Uint64(payload))
		case kind == frameAck:
			return fmt.Errorf("replication ack frame of %d bytes", len(payload))
		case kind == frameProbe && len(payload) >= 8:
			f.heard.Add(1)
			f.asked.Store(max(f.asked.Load(), binary.BigEndian.Uint64(payload[:8])))
			select {
			case f.probed <- struct{}{}:
			default:
			}
		}
	}
}

// sendRecords streams durable records after since until the copy goes,
// the tenant ends or the node stops, and reads the copy's acks beside it.
func (c *call) sendRecords(fw *frameWriter, since uint64, copyName string, read, old bool) error {
	t, db := c.t, c.t.db
	last := since
	f, drop := t.addFeed(since, copyName, read)
	defer drop()
	// sendable is how far the stream may go: what is durable, and for a
	// read copy what is committed too; with what wakes a wait for it to
	// move on beside the file's own moves (nil: nothing more).
	sendable := func() (uint64, <-chan struct{}, <-chan struct{}) {
		if !read {
			return db.Durable(), nil, nil
		}
		return c.commitPoint()
	}
	// answer answers the copy's newest probe; answerProbe does if one
	// came.
	answer := func() error {
		if err := fw.frame(framePosition, c.position(f.asked.Load())); err != nil {
			return err
		}
		return fw.flush()
	}
	answerProbe := func() error {
		select {
		case <-f.probed:
			return answer()
		default:
			return nil
		}
	}
	ctx, cancel := context.WithCancelCause(c.r.Context())
	var acks sync.WaitGroup
	acks.Go(func() {
		err := t.readAcks(c.r.Body, f, old)
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // a copy that stops acking has gone
		}
		cancel(fmt.Errorf("replication acks: %w", err))
	})
	defer func() {
		cancel(nil)
		// The ack reader is blocked in a read of the connection: a
		// deadline passed ends it.
		if err := fw.rc.SetReadDeadline(time.Now()); err != nil {
			c.log.Debug("replication acks not stopped by a deadline", "tenant", t.name, "err", err)
		}
		acks.Wait()
	}()
	sentForks := map[[32]byte]bool{} // forks sent at position last
	keep := time.NewTicker(c.s.cfg.KeepAlive)
	defer keep.Stop()
	heard, unanswered := f.heard.Load(), 0 // keepalives sent since an ack
	// Each read starts where the last stopped: a copy that keeps up has
	// every record read from the file once.
	var cur engine.RecordCursor
	for {
		_, changed := t.seqNow()
		history := db.History() // a fork moves it
		durable := db.Durable()
		limit := uint64(math.MaxUint64) // a voting copy is sent all that is durable
		if read {
			limit, _, _ = c.commitPoint()
		}
		// need is how far the stream must be able to go for the next
		// read to send anything: past last, or, when a record was held
		// back, to its end (a record may hold many writes).
		need := last + 1
		err := db.ReadRecords(&cur, last, func(rec engine.RawRecord) error {
			if rec.Last > limit {
				need = rec.Last
				return errPastSendable // a read copy's: not committed yet
			}
			if rec.First > rec.Last { // a fork: sent once
				sum := sha256.Sum256(rec.Bytes)
				if sentForks[sum] {
					return nil
				}
				sentForks[sum] = true
			}
			var pos [16]byte
			binary.BigEndian.PutUint64(pos[:8], rec.First)
			binary.BigEndian.PutUint64(pos[8:], rec.Last)
			if err := fw.frame(frameRecord, pos[:], rec.Bytes); err != nil {
				return err
			}
			if rec.Last > last {
				last, sentForks = rec.Last, map[[32]byte]bool{}
			}
			return nil
		})
		if err != nil && !errors.Is(err, errPastSendable) {
			return err
		}
		need = max(need, last+1)
		if err := fw.flush(); err != nil {
			return err
		}
		if last >= durable {
			t.sentAllTo(f, last)
		}
		if err := answerProbe(); err != nil { // a stream never at rest answers too
			return err
		}
		for {
			// Only what is durable is sent: a block that landed wakes the
			// stream, and so does its sync (or, under --sync off, its
			// append), whichever mode the file runs; a read copy's, also
			// a copy's ack and a list taken.
			moved := db.DurableMoved()
			upTo, acked, listed := sendable()
			if upTo >= need || db.History() != history {
				break
			}
			select {
			case <-f.probed:
				if err := answer(); err != nil {
					return err
				}
			case <-acked:
			case <-listed:
			case <-changed:
				_, changed = t.seqNow()
			case <-moved:
			case <-keep.C:
				if n := f.heard.Load(); n != heard {
					heard, unanswered = n, 0
				}
				if unanswered >= silentKeeps {
					return errCopySilent
				}
				if fw.frame(frameKeep) != nil || fw.flush() != nil {
					return io.ErrClosedPipe
				}
				unanswered++
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-t.ctx.Done():
				return context.Cause(t.ctx)
			case <-c.s.stopping:
				return ErrShuttingDown
			}
		}
	}
}

// errPastSendable stops a read of records at the first a read copy may
// not be sent yet.
var errPastSendable = errors.New("past what the copy may be sent")

// feedRole reads a feed's role: "" or wire.RoleVoting a voting copy's,
// wire.RoleRead a read copy's (read).
func feedRole(role string) (read bool, err error) {
	switch role {
	case "", wire.RoleVoting:
		return false, nil
	case wire.RoleRead:
		return true, nil
	}
	return false, fmt.Errorf("%w: role must be %s or %s", ErrBadRequest, wire.RoleVoting, wire.RoleRead)
}

// readFrame reads one frame.
func readFrame(br *bufio.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxFrame {
		return 0, nil, fmt.Errorf("replication frame of %d bytes", n)
	}
	if n > frameTrust {
		// Believed only as its bytes arrive: a stream cut short (or a
		// peer's bad length) allocates no more than came.
		var b bytes.Buffer
		got, err := b.ReadFrom(io.LimitReader(br, int64(n)))
		if err == nil && got != int64(n) {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return 0, nil, err
		}
		return hdr[0], b.Bytes(), nil
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(br, buf); err != nil {
		return 0, nil, err
	}
	return hdr[0], buf, nil
}

// frameTrust is the longest frame length readFrame allocates for before
// its bytes arrive.
const frameTrust = 1 << 20
