package store

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	"github.com/fenec-go/fenec/engine/internal/fmap"
)

// logState is the Log's state.
type logState struct {
	path       string
	opts       Options
	log        *slog.Logger
	unregister func()

	cancel context.CancelFunc
	wg     sync.WaitGroup

	// writev writes a frame's pieces at an offset: pwritev, which tests
	// swap for one that fails.
	writev func(f *os.File, bufs [][]byte, off int64) (int64, error)
	// truncate cuts the file to a size: (*os.File).Truncate, which tests
	// swap for one that fails.
	truncate func(f *os.File, size int64) error

	// wmu serialises the writers: appends, forks, checkpoints and Close.
	// It is taken before mu.
	wmu sync.Mutex

	// mu guards every field below. It is held only briefly: never across
	// a write, an fsync or a checkpoint.
	mu      sync.Mutex
	file    *fileRef
	size    int64  // bytes in the current file
	base    uint64 // seq the file's first record continues from
	seq     uint64
	lineage []LineageEntry
	idx     indexer
	spills  int // pieces spilled (on disk) for the block not landed yet
	// spillStart is the offset of the first of those pieces, and spillIdx
	// the index as it was before it: what DropSpills cuts the file back to.
	spillStart int64
	spillIdx   indexer
	spillBound uint64
	// bound is the seq the last bound on disk covers (bound.go), 0 when
	// none since the file's last fork or image; lost is the bound of a
	// file that opened past its seq (Lost), 0 once ForkPast ran.
	bound, lost uint64

	// rawSpills are a replica's spill frames (from AppendRaw) held until
	// their block's record arrives; guarded by wmu.
	rawSpills [][]byte
	images    []span

	// Durability is counted in appended bytes since open (lsn), which
	// checkpoints leave alone: the current file's offset is lsn - lsnBase.
	appended   int64
	openLSN    int64 // appended when the Log was opened
	durableLSN int64
	durableSeq uint64
	lsnBase    int64
	syncing    bool
	syncRounds int64         // fsyncs run by group commit and the ticker (tests read it)
	durableCh  chan struct{} // closed (and replaced) when durability moves, on failure and on close
	chTaken    bool          // someone waits on durableCh: notifying must close it

	err    error // sticky: set once a write or sync failed
	closed bool

	closing atomic.Bool // set as Close starts; readers stop at it
}

// validate refuses options the Log cannot run with.
func (o Options) validate() error {
	if o.Sync < SyncEvery || o.Sync > SyncOff {
		return fmt.Errorf("unknown sync mode %d", o.Sync)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.SyncEvery <= 0 {
		o.SyncEvery = DefaultSyncEvery
	}
	if o.RetainBytes == 0 {
		o.RetainBytes = DefaultRetainBytes
	}
	if o.RetainBytes < 0 {
		o.RetainBytes = 0
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.indexEvery <= 0 {
		o.indexEvery = defaultIndexEvery
	}
	if o.imageChunk <= 0 {
		o.imageChunk = defaultImageChunk
	}
	if o.boundAhead == 0 {
		o.boundAhead = defaultBoundAhead
	}
	return o
}

// maxHistory bounds history ids to 53 bits, so one goes through JSON as a
// number any client reads exactly (a float64 holds integers to 2^53).
// Files written before the bound keep their ids and are read as before.
const maxHistory = 1<<53 - 1

// newHistory draws a random non-zero history id of at most 53 bits.
func newHistory() uint64 {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			panic(fmt.Sprintf("store: random history: %v", err)) // crypto/rand does not fail on Linux
		}
		if h := binary.LittleEndian.Uint64(b[:]) & maxHistory; h != 0 {
			return h
		}
	}
}

// prepare checks opts, fills in defaults and makes path absolute: what
// create and open start with.
func prepare(path string, opts Options) (Options, string, error) {
	if err := opts.validate(); err != nil {
		return opts, "", err
	}
	abs, err := absPath(path)
	return opts.withDefaults(), abs, err
}

func create(path string, opts Options) (*Log, error) {
	opts, abs, err := prepare(path, opts)
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(abs); err == nil {
		return nil, fmt.Errorf("%s: %w", abs, ErrExist)
	}
	unregister, err := register(abs)
	if err != nil {
		return nil, err
	}
	f, fork, err := createFile(abs)
	if err != nil {
		unregister()
		return nil, fmt.Errorf("create tenant file: %w", err)
	}
	s := &scanned{
		end:     headerSize + int64(len(fork.Frame)),
		lineage: []LineageEntry{{History: forkHistory(fork.Body), From: 0}},
		idx:     newIndexer(opts.indexEvery),
	}
	s.idx.record(headerSize, fork)
	l := &Log{}
	l.init(abs, opts, unregister, f, s)
	return l, nil
}

// createFile writes a new file (header and a fork) into <path>.tmp and
// links it into place, so path never holds a half-written header.
func createFile(path string) (*os.File, Record, error) {
	tmp := path + ".tmp"
	f, err := openSide(tmp)
	if err != nil {
		return nil, Record{}, err
	}
	h := newHistory()
	fork, err := encodeFrame(KindFork, 1, 0, forkBody(h))
	if err == nil {
		buf := append(encodeHeader(0), fork...)
		if _, err = f.WriteAt(buf, 0); err == nil {
			err = datasync(f)
		}
	}
	if err == nil {
		if err = os.Link(tmp, path); errors.Is(err, os.ErrExist) {
			err = fmt.Errorf("%s: %w", path, ErrExist)
		}
	}
	os.Remove(tmp)
	if err == nil {
		err = syncDir(path)
	}
	if err != nil {
		f.Close()
		return nil, Record{}, err
	}
	rec, err := DecodeFrame(fork)
	return f, rec, err
}

func open(path string, opts Options, h Replayer) (*Log, error) {
	opts, abs, err := prepare(path, opts)
	if err != nil {
		return nil, err
	}
	unregister, err := register(abs)
	if err != nil {
		return nil, err
	}
	f, err := openLocked(abs)
	if err != nil {
		unregister()
		return nil, err
	}
	for _, side := range []string{abs + ".tmp", abs + ".install"} {
		if removed, err := removeLeftover(side); err != nil {
			opts.Logger.Warn("store: leftover side file", "path", side, "err", err)
		} else if removed {
			opts.Logger.Info("store: removed leftover side file", "path", side)
		}
	}
	s, err := openScan(f, abs, opts, h)
	if err != nil {
		f.Close()
		unregister()
		return nil, err
	}
	l := &Log{}
	l.init(abs, opts, unregister, f, s)
	return l, nil
}

// openScan maps the file, checks it, cuts a torn tail and replays it.
func openScan(f *os.File, path string, opts Options, h Replayer) (*scanned, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat: %w", err)
	}
	if st.Size() < headerSize {
		return nil, &DamagedError{Path: path, Offset: 0, Why: "header cut short"}
	}
	// The mapping lives on past the open where the engine keeps a
	// reference (a graph read in place): it is released here, and the
	// last reference unmaps it.
	reg, err := fmap.Map(f, st.Size())
	if err != nil {
		return nil, err
	}
	defer reg.Release()
	data := reg.Bytes()
	s, err := scan(data, opts.indexEvery, false)
	if err != nil {
		var se *scanError
		if errors.As(err, &se) {
			return nil, &DamagedError{Path: path, Offset: se.off, Why: se.why}
		}
		return nil, err
	}
	if s.end < int64(len(data)) {
		if err := f.Truncate(s.end); err != nil {
			return nil, fmt.Errorf("cut torn tail: %w", err)
		}
		if err := datasync(f); err != nil {
			return nil, fmt.Errorf("cut torn tail: %w", err)
		}
		opts.Logger.Warn("store: cut torn tail", "path", path, "offset", s.end,
			"bytes", int64(len(data))-s.end, "why", s.tailWhy)
	}
	if h != nil {
		if err := replay(data[:s.end], reg, s, h); err != nil {
			return nil, fmt.Errorf("replay %s: %w", path, err)
		}
	}
	reg.Drop() // what the engine reads in place comes back as it is read
	return s, nil
}

// replay gives h the last image and the engine records after it. scan
// checked every frame of data already. data is a view of reg.
func replay(data []byte, reg *fmap.Region, s *scanned, h Replayer) error {
	off := int64(headerSize)
	if len(s.images) > 0 {
		img := s.images[len(s.images)-1]
		var bodies [][]byte
		var pos Position
		for o := img.start; o < img.end; {
			rec, size, err := frameTrusted(data, o)
			if err != nil {
				return err
			}
			body := rec.Body
			if o == img.start {
				p, state, err := decodeImageHeader(body)
				if err != nil {
					return err
				}
				pos, body = p, state
			}
			bodies = append(bodies, body)
			o += size
		}
		if err := h.Image(pos.Seq, imageReader(bodies, reg)); err != nil {
			return fmt.Errorf("image: %w", err)
		}
		off = img.end
	}
	return replayRecords(data, off, h)
}

// replayRecords gives h the engine records of data from off on (checked
// by scan already), spilled blocks joined.
func replayRecords(data []byte, off int64, h Replayer) error {
	end := int64(len(data))
	var pieces [][]byte // spilled pieces of the block not landed yet
	for off < end {
		rec, size, err := frameTrusted(data, off)
		if err != nil {
			return err
		}
		switch {
		case rec.Kind == KindSpill:
			_, p := spillPiece(rec.Body)
			pieces = append(pieces, p)
		case rec.Kind == KindSpillDrop:
			pieces = nil
		case rec.Kind >= KindEngine:
			// The body stays in the mapped file, not copied: the engine
			// copies the documents it keeps, and a copy of every body
			// made here would be garbage on top of them while the file
			// opens.
			rec.Borrowed = true
			if pieces != nil {
				rec.Body, rec.Borrowed = joinPieces(pieces, rec.Body), false
			}
			pieces = nil
			if err := h.Record(rec); err != nil {
				return fmt.Errorf("record at seq %d: %w", rec.First, err)
			}
		}
		off += size
	}
	return nil
}

// init fills in an opened Log and starts its sync goroutine.
func (l *Log) init(path string, opts Options, unregister func(), f *os.File, s *scanned) {
	l.path, l.opts, l.log, l.unregister = path, opts, opts.Logger, unregister
	l.writev = pwritev
	l.truncate = (*os.File).Truncate
	l.file = newFileRef(f)
	l.size = s.end
	l.base, l.seq = s.base, s.seq
	l.lineage = s.lineage
	l.idx, l.images = s.idx, s.images
	l.appended, l.durableLSN, l.lsnBase, l.openLSN = s.end, s.end, 0, s.end
	l.durableSeq = s.seq
	l.bound = s.bound
	if s.bound > s.seq {
		l.lost = s.bound
	}
	l.durableCh = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	if opts.Sync == SyncEvery {
		l.wg.Go(func() { l.syncLoop(ctx) })
	}
}

func (l *Log) close() error {
	l.closing.Store(true)
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.mu.Unlock()
	if err := l.closeBoundLocked(); err != nil {
		l.log.Warn("store: bound at close", "path", l.path, "err", err)
	}
	syncErr := l.sync() // under SyncOff too: a clean close leaves the file on disk
	l.mu.Lock()
	l.closed = true
	l.notifyLocked()
	file := l.file
	l.mu.Unlock()
	l.cancel()
	l.wg.Wait()
	closeErr := file.release()
	l.unregister()
	if syncErr != nil && !errors.Is(syncErr, ErrClosed) {
		return fmt.Errorf("close: %w", syncErr)
	}
	if closeErr != nil {
		return fmt.Errorf("close: %w", closeErr)
	}
	return nil
}

// notifyLocked wakes everyone waiting on durability.
func (l *Log) notifyLocked() {
	if !l.chTaken {
		return
	}
	close(l.durableCh)
	l.durableCh = make(chan struct{})
	l.chTaken = false
}

// failLocked makes err sticky: the Log takes no more writes.
func (l *Log) failLocked(err error) error {
	if l.err == nil {
		l.err = fmt.Errorf("%w: %v", ErrFailed, err)
		l.log.Error("store: log stopped", "path", l.path, "err", err)
		l.notifyLocked()
	}
	return l.err
}

// usableLocked says why the Log takes no write, if it takes none.
func (l *Log) usableLocked() error {
	if l.closed {
		return ErrClosed
	}
	return l.err
}

func (l *Log) lineageCopyLocked() []LineageEntry {
	return append([]LineageEntry(nil), l.lineage...)
}

func (l *Log) holds(h uint64, seq uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, e := range l.lineage {
		if e.History != h {
			continue
		}
		end := l.seq
		if i+1 < len(l.lineage) {
			end = l.lineage[i+1].From
		}
		if seq <= end {
			return true
		}
	}
	return false
}
