package node

// The follower: the goroutine a replica's tenant owns that reads its
// primary's replication feed, applies it, and acknowledges what its own
// file holds durably.

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
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

// errImageTaken ends a follower whose tenant is being replaced by an
// image from its primary.
var errImageTaken = errors.New("image taken from the primary")

// errFeedEnded closes a follower's ack stream as it stops reading.
var errFeedEnded = errors.New("replication feed ended")

// errNoReadCopies ends a read copy's feed from a primary that does not
// say it honours role=read (a node from before read copies).
var errNoReadCopies = errors.New("the primary does not send read copies only what it committed: upgrade its node, or follow it as a voting copy")

// feedFeatures reads what a feed's primary says it does
// (wire.HeaderFeedFeatures): answer probes, honour role=read.
func feedFeatures(h http.Header) (probes, readCopies bool) {
	for _, v := range h.Values(wire.HeaderFeedFeatures) {
		for f := range strings.SplitSeq(v, ",") {
			switch strings.TrimSpace(f) {
			case wire.FeedProbes:
				probes = true
			case wire.FeedReadCopies:
				readCopies = true
			}
		}
	}
	return probes, readCopies
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
	warned := false
	for ctx.Err() == nil {
		err := t.followOnce(ctx, from)
		if errors.Is(err, errImageTaken) {
			return
		}
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, errNoReadCopies) && !warned:
			warned = true
			t.reg.log.Warn("a read copy takes nothing from this primary", "tenant", t.name, "from", from, "err", err)
		default:
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
// synced once per batch (what arrived together), then acknowledged
// (under --sync off on both nodes, acknowledged once applied). A
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
	// Once connected, the feed's head is owed within headWait. A
	// connection lost after the request went and before the head came
	// back leaves the transport waiting for the request's body to end —
	// the acks, which end only with ctx — so without this bound the copy
	// would follow again only silence later.
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { watchdog.Reset(min(silence, headWait)) },
	})
	u := strings.TrimSuffix(from, "/") + "/t/" + t.name + "/_replication?since=" +
		strconv.FormatUint(since, 10) + "&history=" + strconv.FormatUint(t.db.History(), 10)
	st := t.follow.Load()
	if st != nil && st.As != "" {
		u += "&copy=" + url.QueryEscape(st.As)
	}
	read := st != nil && st.Role == wire.RoleRead
	if read {
		u += "&role=" + wire.RoleRead
	}
	ack := newAcker(ctx, since)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, ack)
	if err != nil {
		return err
	}
	req.ContentLength = -1 // streamed, chunked
	req.Header.Set("Authorization", "Bearer "+t.reg.replTokenNow())
	req.Header.Set("Content-Type", "application/octet-stream")
	defer ack.Close() // ends a read of acks held up
	defer cancel()
	res, err := t.reg.replClient.Do(req)
	if err != nil {
		return err
	}
	watchdog.Reset(silence)
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("replication feed: status %d", res.StatusCode)
	}
	probes, readCopies := feedFeatures(res.Header)
	if read && !readCopies {
		// It would send every record, committed or not: take none.
		return errNoReadCopies
	}
	// The prober, started at the first hello, is the feed's: it ends
	// with it.
	var prober sync.WaitGroup
	defer prober.Wait()
	defer cancel()
	probes = probes && t.reg.freshEvery > 0
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
	// unsyncedAcks: acks count what is applied, unsynced (acksUnsynced).
	unsyncedAcks := false
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
			unsyncedAcks = t.acksUnsynced(payload)
			if probes {
				probes = false // one prober a feed
				prober.Go(func() { t.runProber(ctx, ack) })
			}
		case framePosition:
			t.fresh.answered(payload, t.db.Holds)
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
				if image, err = os.CreateTemp(t.reg.dir, t.name+imagePartMark+"*.part"); err != nil {
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
			if !unsyncedAcks {
				if err := t.db.Sync(); err != nil {
					return fmt.Errorf("sync replicated records: %w", err)
				}
			}
			unsynced = 0
			ack.offer(seq, false)
		} else if kind == frameKeep {
			ack.offer(0, true)
		}
	}
}

// headWait bounds, once a copy's connection to its primary is made, the
// wait for the feed's head: the primary writes it as soon as the tenant
// is open.
const headWait = 5 * time.Second

// acksUnsynced says whether this copy acknowledges records once applied,
// with no sync of its own: when it runs --sync off (its file is never
// synced on a write's account) and the primary's hello says no write
// there waits on the ack. Anything else, a hello it cannot read among
// them, has every ack follow a sync.
func (t *tenant) acksUnsynced(hello []byte) bool {
	if t.reg.engineOpts.Sync != engine.SyncOff {
		return false
	}
	var h replHello
	return json.Unmarshal(hello, &h) == nil && h.Applied
}

// maxAckBatch bounds the records a follower applies between two syncs
// (and acks) while more keep arriving.
const maxAckBatch = 512

// acker is a feed request's body: the transport reads the follower's
// acks from it, each an ack frame of the newest durable seq offered
// (those a slow connection overtook are skipped), and waits in it until
// there is one to send. The follower's offer wakes the transport's writer
// itself: no goroutine of the follower's stands between them.
type acker struct {
	ctx  context.Context
	wake chan struct{} // cap 1: an offer came
	done chan struct{} // closed by Close
	once sync.Once

	mu    sync.Mutex
	want  uint64 // guarded by mu: the newest seq to acknowledge
	again bool   // guarded by mu: send it even if sent already
	asked uint64 // guarded by mu: the newest probe to send

	// The reader's own: Read is called by one goroutine at a time.
	sent      uint64
	probeSent uint64
	frame     [13]byte
	pending   []byte // what is left to read of the frame being sent
}

func newAcker(ctx context.Context, first uint64) *acker {
	return &acker{ctx: ctx, wake: make(chan struct{}, 1), done: make(chan struct{}), want: first, again: true}
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

// probe has probe n sent soon, before any ack (a newer one offered
// first replaces it: only the newest is sent).
func (a *acker) probe(n uint64) {
	a.mu.Lock()
	a.asked = max(a.asked, n)
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// Read gives the transport the next ack (or probe) frame, waiting for
// one until the feed's context ends or the body is closed.
func (a *acker) Read(p []byte) (int, error) {
	for len(a.pending) == 0 {
		if err := a.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, a.pending)
	a.pending = a.pending[n:]
	return n, nil
}

// next waits until there is a probe or an ack to send and makes its
// frame pending.
func (a *acker) next() error {
	for {
		a.mu.Lock()
		seq, again, probe := a.want, a.again, a.asked
		if probe <= a.probeSent {
			a.again = false
		}
		a.mu.Unlock()
		switch {
		case probe > a.probeSent:
			a.pend(frameProbe, probe)
			a.probeSent = probe
			return nil
		case seq > a.sent || again:
			a.pend(frameAck, seq)
			a.sent = seq
			return nil
		}
		select {
		case <-a.wake:
		case <-a.done:
			return errFeedEnded
		case <-a.ctx.Done():
			return a.ctx.Err()
		}
	}
}

// pend makes a frame of kind carrying v the one being sent.
func (a *acker) pend(kind byte, v uint64) {
	a.frame[0] = kind
	binary.BigEndian.PutUint32(a.frame[1:5], 8)
	binary.BigEndian.PutUint64(a.frame[5:], v)
	a.pending = a.frame[:]
}

// Close ends the body: a Read waiting, and every one after, fails. Safe
// to call twice, and beside a Read.
func (a *acker) Close() error {
	a.once.Do(func() { close(a.done) })
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
		if name, ok := strings.CutSuffix(e.Name(), followExt); ok && wire.ValidName(name) {
			r.reopen(name)
		}
	}
	return nil
}
