package node

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/fenec-go/fenec/engine"
)

// The replication feed (GET /t/<t>/_replication?since=S&history=H) is a
// stream of frames: a kind byte, a big-endian uint32 length, the payload.
const (
	frameHello    = 'h' // JSON replHello: who the primary is now
	frameRecord   = 'r' // uint64 first, uint64 last, then a raw record
	frameImage    = 'i' // a piece of a whole image
	frameImageEnd = 'e' // the image is whole: install it, then ask again
	frameKeep     = 'k' // nothing new
	maxFrame      = 256 << 20
	imageChunk    = 1 << 20
)

// replHello opens every feed.
type replHello struct {
	History uint64                `json:"history"`
	Seq     uint64                `json:"seq"`
	Lineage []engine.LineageEntry `json:"lineage"`
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
	if err1 != nil || err2 != nil {
		c.fail(fmt.Errorf("%w: since and history must be numbers", ErrBadRequest))
		return
	}
	c.w.Header().Set("Content-Type", "application/octet-stream")
	c.w.WriteHeader(http.StatusOK)
	fw := &frameWriter{bw: bufio.NewWriterSize(c.w, 64<<10), rc: http.NewResponseController(c.w)}
	db := c.t.db
	hello, _ := json.Marshal(replHello{History: db.History(), Seq: db.Seq(), Lineage: db.Lineage()})
	if fw.frame(frameHello, hello) != nil {
		return
	}
	if !db.Holds(hist, since) {
		c.sendImage(fw)
		return
	}
	if err := c.sendRecords(fw, since); err != nil {
		if errors.Is(err, engine.ErrCursorGone) {
			c.sendImage(fw)
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
	if fw.frame(frameImageEnd) == nil {
		fw.flush()
	}
}

// feed is one replication stream a primary sends: the seq it has sent
// up to (guarded by tenant.mu).
type feed struct {
	sent uint64
	// lagging: a write stopped waiting for this stream (waitSent's bound
	// passed); no write waits for it again until it has sent everything
	// the tenant holds.
	lagging bool
}

// addFeed registers a stream sending from since; the func drops it.
func (t *tenant) addFeed(since uint64) (*feed, func()) {
	f := &feed{sent: since}
	t.mu.Lock()
	t.feeds[f] = struct{}{}
	t.mu.Unlock()
	return f, func() {
		t.mu.Lock()
		delete(t.feeds, f)
		t.notifySentLocked()
		t.mu.Unlock()
	}
}

// sentTo notes a stream has sent everything up to seq; caughtUp, that it
// has sent all that was durable as it began reading.
func (t *tenant) sentTo(f *feed, seq uint64, caughtUp bool) {
	t.mu.Lock()
	if seq > f.sent {
		f.sent = seq
		t.notifySentLocked()
	}
	if f.lagging && caughtUp {
		f.lagging = false // waited for again
	}
	t.mu.Unlock()
}

func (t *tenant) notifySentLocked() {
	close(t.sentCh)
	t.sentCh = make(chan struct{})
}

// waitSent waits until every replication stream open has sent seq (a
// write under --sync always is answered once its copies were sent it),
// for at most d; it says whether they all had.
//
// The streams are woken first (seq is durable now, and they send only
// what is durable), and a stream that made one write wait out the bound
// is not waited for again until it has caught up (a laggard).
func (t *tenant) waitSent(ctx context.Context, seq uint64, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	t.mu.Lock()
	close(t.seqCh) // waiters on seqCh all loop: a spare wake-up is harmless
	t.seqCh = make(chan struct{})
	t.mu.Unlock()
	for {
		t.mu.Lock()
		behind := false
		for f := range t.feeds {
			behind = behind || (!f.lagging && f.sent < seq)
		}
		ch := t.sentCh
		t.mu.Unlock()
		if !behind {
			return true
		}
		select {
		case <-ch:
		case <-timer.C:
			t.mu.Lock()
			for f := range t.feeds {
				if f.sent < seq {
					f.lagging = true
				}
			}
			t.mu.Unlock()
			return false
		case <-ctx.Done():
			return false
		case <-t.ctx.Done():
			return false
		}
	}
}

// sendRecords streams durable records after since until the copy goes,
// the tenant ends or the node stops.
func (c *call) sendRecords(fw *frameWriter, since uint64) error {
	t, db := c.t, c.t.db
	last := since
	f, drop := t.addFeed(since)
	defer drop()
	sentForks := map[[32]byte]bool{} // forks sent at position last
	keep := time.NewTicker(c.s.cfg.KeepAlive)
	defer keep.Stop()
	poll := time.NewTicker(20 * time.Millisecond) // until what landed is durable
	defer poll.Stop()
	for {
		_, changed := t.seqNow()
		lineage := len(db.Lineage())
		durable := db.Durable()
		err := db.ReadRecords(last, func(rec engine.RawRecord) error {
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
		if err != nil {
			return err
		}
		if err := fw.flush(); err != nil {
			return err
		}
		t.sentTo(f, last, last >= durable)
		for db.Durable() <= last && len(db.Lineage()) == lineage {
			select {
			case <-changed:
				_, changed = t.seqNow()
			case <-poll.C:
				if db.Seq() > db.Durable() {
					continue
				}
			case <-keep.C:
				if fw.frame(frameKeep) != nil || fw.flush() != nil {
					return io.ErrClosedPipe
				}
			case <-c.r.Context().Done():
				return c.r.Context().Err()
			case <-t.ctx.Done():
				return context.Cause(t.ctx)
			case <-c.s.stopping:
				return ErrShuttingDown
			}
		}
	}
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
	buf := make([]byte, n)
	if _, err := io.ReadFull(br, buf); err != nil {
		return 0, nil, err
	}
	return hdr[0], buf, nil
}
