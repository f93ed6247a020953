package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// appendBlock builds and writes one engine record; wmu is taken here.
func (l *Log) appendBlock(kind Kind, n uint64, body []byte) (Record, int64, error) {
	if kind < KindEngine {
		return Record{}, 0, fmt.Errorf("append kind %d: %w", kind, ErrBadKind)
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	seq := l.seq
	l.mu.Unlock()
	rec := Record{Kind: kind, First: seq + 1, Last: seq + n, Body: body}
	if frameSize(kind, rec.First, rec.Last, len(body))-frameHead > maxPayload {
		return Record{}, 0, fmt.Errorf("append: %w", ErrTooLarge)
	}
	var pre [frameHead + 1 + 2*binary.MaxVarintLen64]byte
	p := payloadPrefix(pre[:frameHead], kind, rec.First, rec.Last)
	binary.LittleEndian.PutUint32(p[0:], uint32(len(p)-frameHead+len(body)))
	binary.LittleEndian.PutUint32(p[4:], crc32.Update(checksum(p[frameHead:]), castagnoli, body))
	end, err := l.writeLocked([][]byte{p, body}, rec)
	return rec, end, err
}

func (l *Log) append(kind Kind, n uint64, body []byte, wait bool) (Record, error) {
	rec, end, err := l.appendBlock(kind, n, body)
	if err != nil {
		return Record{}, err
	}
	if wait && l.opts.Sync == SyncAlways {
		if err := l.waitLSN(context.Background(), end); err != nil {
			return rec, fmt.Errorf("append: %w", err)
		}
	}
	return rec, nil
}

// writeLocked writes one frame (given in pieces) at the end of the file
// and accounts for it. wmu is held; rec.First continues the seq. It
// returns the lsn at the frame's end.
func (l *Log) writeLocked(frame [][]byte, rec Record) (int64, error) {
	l.mu.Lock()
	if err := l.usableLocked(); err != nil {
		l.mu.Unlock()
		return 0, err
	}
	ref, off := l.file, l.size // only a writer swaps the file, and we are the writer
	l.mu.Unlock()
	size, err := pwritev(ref.f, frame, off)
	if err != nil {
		if terr := ref.f.Truncate(off); terr != nil {
			l.mu.Lock()
			defer l.mu.Unlock()
			return 0, l.failLocked(fmt.Errorf("append: %v; cut back: %w", err, terr))
		}
		return 0, fmt.Errorf("append: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.idx.record(off, rec)
	if rec.Kind == KindFork {
		l.lineage = append(l.lineage, LineageEntry{History: forkHistory(rec.Body), From: rec.Last})
	}
	l.size += size
	l.appended += size
	l.seq = rec.Last
	if l.opts.Sync == SyncOff {
		l.durableLSN, l.durableSeq = l.appended, l.seq
		l.notifyLocked()
	}
	return l.appended, nil
}

// pwritev writes bufs at off, whole.
func pwritev(f *os.File, bufs [][]byte, off int64) (int64, error) {
	var total int64
	for _, b := range bufs {
		total += int64(len(b))
	}
	bufs = slices.Clone(bufs)
	written := int64(0)
	for written < total {
		n, err := unix.Pwritev(int(f.Fd()), bufs, off+written)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n == 0 {
			return 0, errors.New("write returned nothing")
		}
		written += int64(n)
		for n > 0 {
			if n >= len(bufs[0]) {
				n -= len(bufs[0])
				bufs = bufs[1:]
				continue
			}
			bufs[0] = bufs[0][n:]
			n = 0
		}
		for len(bufs) > 0 && len(bufs[0]) == 0 {
			bufs = bufs[1:]
		}
	}
	return total, nil
}

func (l *Log) fork() (uint64, error) {
	h := newHistory()
	l.wmu.Lock()
	l.mu.Lock()
	seq := l.seq
	l.mu.Unlock()
	rec := Record{Kind: KindFork, First: seq + 1, Last: seq, Body: forkBody(h)}
	frame, err := encodeFrame(rec.Kind, rec.First, rec.Last, rec.Body)
	if err == nil {
		_, err = l.writeLocked([][]byte{frame}, rec)
	}
	l.wmu.Unlock()
	if err != nil {
		return 0, fmt.Errorf("fork: %w", err)
	}
	if err := l.sync(); err != nil {
		return 0, fmt.Errorf("fork: %w", err)
	}
	return h, nil
}

func (l *Log) appendRaw(frame []byte) (Record, error) {
	rec, err := DecodeFrame(frame)
	if err != nil {
		return Record{}, fmt.Errorf("append raw: %w", err)
	}
	if isImage(rec.Kind) {
		return Record{}, fmt.Errorf("append raw: %w", errBad("images do not replicate"))
	}
	l.wmu.Lock()
	l.mu.Lock()
	seq := l.seq
	dup := rec.Kind == KindFork && slices.ContainsFunc(l.lineage, func(e LineageEntry) bool {
		return e.History == forkHistory(rec.Body)
	})
	l.mu.Unlock()
	if rec.First != seq+1 {
		l.wmu.Unlock()
		return Record{}, fmt.Errorf("append raw: first %d after %d: %w", rec.First, seq, ErrSeqGap)
	}
	if dup {
		l.wmu.Unlock()
		return rec, nil
	}
	end, err := l.writeLocked([][]byte{frame}, rec)
	l.wmu.Unlock()
	if err != nil {
		return Record{}, err
	}
	switch {
	case rec.Kind == KindFork:
		err = l.sync()
	case l.opts.Sync == SyncAlways:
		err = l.waitLSN(context.Background(), end)
	}
	if err != nil {
		return rec, fmt.Errorf("append raw: %w", err)
	}
	return rec, nil
}
