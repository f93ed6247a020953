package store

import (
	"context"
	"fmt"
	"time"
)

// Group commit: whoever waits for durability while no sync runs becomes
// the syncer. It notes how far the log was appended, fsyncs without the
// lock, and wakes everyone; those appended after its note start the next
// round. So concurrent appenders share one fsync each round.

// waitUntil waits until done (called with mu held) holds. trigger lets
// this caller start a sync round; without it, it waits for someone else's
// (the SyncEvery ticker, another appender).
func (l *Log) waitUntil(ctx context.Context, done func() bool, trigger bool) error {
	for {
		l.mu.Lock()
		if done() {
			l.mu.Unlock()
			return nil
		}
		if err := l.usableLocked(); err != nil {
			l.mu.Unlock()
			return err
		}
		if trigger && !l.syncing && l.durableLSN < l.appended {
			l.syncRoundLocked()
			l.mu.Unlock()
			continue
		}
		ch := l.durableCh
		l.chTaken = true
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// syncRoundLocked fsyncs everything appended so far. mu is held on entry
// and on return but not across the fsync.
func (l *Log) syncRoundLocked() {
	l.syncing = true
	l.syncRounds++
	ref := l.file.acquire()
	target, seq := l.appended, l.seq
	l.mu.Unlock()
	err := datasync(ref.f)
	ref.release()
	l.mu.Lock()
	l.syncing = false
	if err != nil {
		l.failLocked(fmt.Errorf("sync: %w", err))
		return
	}
	l.durableLSN = max(l.durableLSN, target)
	l.durableSeq = max(l.durableSeq, seq)
	l.notifyLocked()
}

// waitLSN waits until the first lsn bytes appended are durable, by the
// sync mode's rule.
func (l *Log) waitLSN(ctx context.Context, lsn int64) error {
	return l.waitUntil(ctx, func() bool { return l.durableLSN >= lsn }, l.opts.Sync == SyncAlways)
}

func (l *Log) waitDurable(ctx context.Context, seq uint64) error {
	return l.waitUntil(ctx, func() bool { return l.durableSeq >= seq }, l.opts.Sync == SyncAlways)
}

// sync puts everything appended on disk, whatever the mode.
func (l *Log) sync() error {
	if l.opts.Sync != SyncOff {
		// Wait for what is appended now, not for appends that come after:
		// under a steady stream of writes "everything" never settles.
		l.mu.Lock()
		target := l.appended
		l.mu.Unlock()
		return l.waitUntil(context.Background(), func() bool { return l.durableLSN >= target }, true)
	}
	l.mu.Lock()
	if err := l.usableLocked(); err != nil {
		l.mu.Unlock()
		return err
	}
	ref := l.file.acquire()
	l.mu.Unlock()
	err := datasync(ref.f)
	ref.release()
	if err != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.failLocked(fmt.Errorf("sync: %w", err))
	}
	return nil
}

// syncLoop is the SyncEvery goroutine: it fsyncs on each tick when
// anything was appended since the last sync. Close stops it.
func (l *Log) syncLoop(ctx context.Context) {
	t := time.NewTicker(l.opts.SyncEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l.mu.Lock()
		if l.usableLocked() == nil && !l.syncing && l.durableLSN < l.appended {
			l.syncRoundLocked()
		}
		l.mu.Unlock()
	}
}
