package lease

import (
	"context"
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
