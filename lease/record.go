package lease

import (
	"context"
	"fmt"
	"time"
)

// RecordStore is the directory's longest-lease record: the longest lease a
// router leasing from that directory may have granted. The router
// implements it over its directory (/fenec/meta/lease_record_ms).
type RecordStore interface {
	// Get reads the record; 0 when there is none.
	Get(ctx context.Context) (time.Duration, error)
	// Raise makes the record at least d, durably, before it returns nil.
	Raise(ctx context.Context, d time.Duration) error
	// Lower sets the record to d (never raising it).
	Lower(ctx context.Context, d time.Duration) error
}

// recordPlan is what a router does with the record it found as it starts
// leasing.
type recordPlan struct {
	leases    Leases
	needRaise bool          // the record is below the router's own lease and not yet raised
	lowerAt   time.Duration // router's moment to lower the record to its own (0: never)
}

// planRecord decides, from the record read at the router's first round
// (start), what it grants and counts by. raised says whether raising the
// record to own succeeded (asked only when own > record).
func planRecord(own, record time.Duration, raised bool, start time.Duration) recordPlan {
	switch {
	case own > record && raised:
		return recordPlan{leases: Leases{Own: own, Record: own, Grant: own}}
	case own > record && record > 0:
		// The record could not be raised: grant no longer than it.
		return recordPlan{leases: Leases{Own: own, Record: record, Grant: record}, needRaise: true}
	case own > record:
		// No record and none could be written: the router's own lease.
		return recordPlan{leases: Leases{Own: own, Grant: own}, needRaise: true}
	case record > own:
		// A longer lease may still run: count by it, and lower the record
		// once it has certainly run out.
		return recordPlan{leases: Leases{Own: own, Record: record, Grant: own}, lowerAt: start + record + record/10}
	}
	return recordPlan{leases: Leases{Own: own, Record: record, Grant: own}}
}

// readRecord reads the record and raises it when the router's own lease is
// longer, deciding what to grant and count by.
func (l *Leaser) readRecord(ctx context.Context) (recordPlan, error) {
	own, start := l.cfg.Lease, l.clock.Now()
	if l.cfg.Record == nil {
		return recordPlan{leases: Leases{Own: own, Grant: own}}, nil
	}
	rctx, cancel := context.WithTimeout(ctx, own)
	defer cancel()
	rec, err := l.cfg.Record.Get(rctx)
	if err != nil {
		return recordPlan{}, fmt.Errorf("read lease record: %w", err)
	}
	raised := false
	if own > rec {
		if err := l.cfg.Record.Raise(rctx, own); err != nil {
			l.log.Warn("lease record not raised: granting no longer than it", "record", rec, "lease", own, "err", err)
		} else {
			raised = true
		}
	}
	return planRecord(own, rec, raised, start), nil
}

// keepRecord raises the record once it can be written (if Start could
// not), and lowers it to the router's own lease once the router has led
// for the record and a tenth.
func (l *Leaser) keepRecord() {
	for {
		l.mu.Lock()
		ctx, plan := l.ctx, l.plan
		if !plan.needRaise && plan.lowerAt == 0 {
			l.keeping = false
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		wait := plan.leases.Grant / 3
		if plan.lowerAt > 0 && !plan.needRaise {
			wait = max(plan.lowerAt-l.clock.Now(), 0)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		l.fixRecord(ctx, plan)
	}
}

// fixRecord makes one attempt at what plan still needs done to the record.
func (l *Leaser) fixRecord(ctx context.Context, plan recordPlan) {
	own := l.cfg.Lease
	rctx, cancel := context.WithTimeout(ctx, plan.leases.Grant/3)
	defer cancel()
	switch {
	case plan.needRaise:
		if err := l.cfg.Record.Raise(rctx, own); err != nil {
			l.log.Warn("lease record not raised", "lease", own, "err", err)
			return
		}
		l.setPlan(recordPlan{leases: Leases{Own: own, Record: own, Grant: own}})
		l.log.Info("lease record raised", "lease", own)
	case plan.lowerAt > 0 && l.clock.Now() >= plan.lowerAt:
		if l.lowerAtMoved(plan) {
			return // a handoff extended the record meanwhile
		}
		if err := l.cfg.Record.Lower(rctx, own); err != nil {
			l.log.Warn("lease record not lowered", "lease", own, "err", err)
			return
		}
		if !l.setPlanIf(plan, recordPlan{leases: Leases{Own: own, Record: own, Grant: own}}) {
			// Extended as it was lowered: raise it back before anything
			// counts on it (the next look does, with the plan's record).
			l.mu.Lock()
			l.plan.needRaise = true
			l.mu.Unlock()
			return
		}
		l.log.Info("lease record lowered", "from", plan.leases.Record, "to", own)
	}
}

// lowerAtMoved says whether the plan moved on from was.
func (l *Leaser) lowerAtMoved(was recordPlan) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.plan != was
}

func (l *Leaser) setPlan(p recordPlan) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.plan = p
	for _, nr := range l.nodes {
		nr.tracker.SetLeases(p.leases)
	}
}

// setPlanIf sets p if the plan is still was, and says whether it did.
func (l *Leaser) setPlanIf(was, p recordPlan) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.plan != was {
		return false
	}
	l.plan = p
	for _, nr := range l.nodes {
		nr.tracker.SetLeases(p.leases)
	}
	return true
}
