package engine

import (
	"context"
	"errors"
	"runtime/debug"
	"time"
)

// sweepLoop deletes expired rows every SweepEvery until ctx ends. Reads
// hide expired rows at once; the sweep only gives their space back.
func (db *DB) sweepLoop(ctx context.Context) {
	tick := time.NewTicker(db.opts.SweepEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			_, err := db.Sweep(ctx)
			var ge *GateError
			switch {
			case err == nil, errors.Is(err, ErrClosed):
			case errors.As(err, &ge):
				// Not taking writes now (frozen, no lease): try again later.
				db.logger.Debug("ttl sweep refused by the gate", "err", err)
			default:
				db.logger.Warn("ttl sweep", "err", err)
			}
		}
	}
}

// maxSweep bounds the rows one sweep block deletes.
const maxSweep = 10000

// Sweep deletes expired rows now, as one block of ordinary deletes through
// the gate and the quota, and returns how many it deleted.
func (db *DB) Sweep(ctx context.Context) (_ int, err error) {
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return 0, ErrClosed
	}
	now := db.nowMs()
	t := &txn{st: db.st, now: now}
	bl := &blockLock{db: db, t: t}
	defer bl.release() // after a fault too: undoes the block, gives the lock back
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer catchFault(&err)
	n := 0
	for _, c := range db.st.colls {
		for i := range c.sch.Fields {
			ttl := c.sch.Fields[i].TTLms
			if ttl == 0 || c.sorted[i] == nil {
				continue
			}
			s := c.sortedOf(i)
			var ids []int64
			s.scan(bound{}, bound{key: now - ttl, set: true, inclusive: true}, false, func(_ sortKey, id int64) bool {
				ids = append(ids, id)
				return n+len(ids) < maxSweep
			})
			for _, id := range ids {
				if t.del(c, id) {
					n++
				}
			}
		}
	}
	seq, wrote, err := db.landLocked(t)
	bl.unlock()
	if err != nil {
		return 0, err
	}
	if wrote && db.opts.Sync == SyncAlways {
		if err := db.log.WaitDurable(context.WithoutCancel(ctx), seq); err != nil {
			return n, storeErr(err)
		}
	}
	return n, nil
}
