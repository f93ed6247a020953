package nemesis

import (
	"fmt"
	"slices"
)

// The checks of reads a copy in another region answers (DESIGN §10):
// read-your-writes through Fenec-After, and the staleness bound each
// answer states. Check runs both on every history; until read copies
// exist no read carries Op.After, and none a Fenec-Served-By or a
// Fenec-Staleness-Ms the workload records in Op.ServedBy and
// Op.Staleness, so they find nothing to check — and the scenario that
// would send such reads (ryw) is skipped. Their own tests give them
// histories that hold and that do not.

// checkAfterReads: a read sent to see write W (Op.After) shows W or a
// write not older than it — for the register, no value whose write ended
// before W began; for a list, W's element.
func checkAfterReads(ops []*Op) []Anomaly {
	byID := map[int]*Op{}
	byValue := map[string]*Op{}
	for _, op := range ops {
		byID[op.ID] = op
		if op.Kind == RegWrite && op.Outcome != Fail {
			byValue[fmt.Sprint(object(op), op.Value)] = op
		}
	}
	var out []Anomaly
	for _, r := range ops {
		if r.After == 0 || r.Outcome != OK {
			continue
		}
		w := byID[r.After]
		if w == nil || object(w) != object(r) {
			continue
		}
		bad := false
		switch r.Kind {
		case RegRead:
			seen := byValue[fmt.Sprint(object(r), r.Value)]
			bad = seen == nil || (seen != w && seen.Return < w.Call)
		case ListRead:
			bad = !slices.Contains(r.List, w.Value)
		}
		if bad {
			out = append(out, Anomaly{Check: "read your writes", Tenant: r.Tenant,
				What:    "a read sent with Fenec-After to see a write answered without it",
				Excerpt: []string{"the write: " + w.String(), "the read:  " + r.String()}})
		}
	}
	return out
}

// checkStaleness: a read answered with a staleness bound of B ms at time
// r shows every write acknowledged before r − B: for the register, no
// value a write ending before r − B had replaced; for a list, every
// element whose append ended before r − B.
func checkStaleness(ops []*Op) []Anomaly {
	var out []Anomaly
	for _, r := range ops {
		if r.Staleness < 0 || r.Outcome != OK || (r.Kind != RegRead && r.Kind != ListRead) || r.ServedBy == "" {
			continue
		}
		horizon := r.Return - r.Staleness*1_000_000
		var missed *Op
		for _, w := range ops {
			if object(w) != object(r) || w.Outcome != OK || w.Return >= horizon {
				continue
			}
			switch {
			case r.Kind == ListRead && w.Kind == ListAppend && !slices.Contains(r.List, w.Value):
				missed = w
			case r.Kind == RegRead && w.Kind == RegWrite && w.Value != r.Value && replaced(ops, r, w):
				missed = w
			}
			if missed != nil {
				break
			}
		}
		if missed != nil {
			out = append(out, Anomaly{Check: "staleness", Tenant: r.Tenant,
				What: fmt.Sprintf("a read stated it was at most %d ms old and missed a write acknowledged %.1f ms before it returned",
					r.Staleness, float64(r.Return-missed.Return)/1e6),
				Excerpt: []string{"missed: " + missed.String(), "read:   " + r.String()}})
		}
	}
	return out
}

// replaced says whether w, acknowledged, had replaced the value r read:
// the write of that value (or the register's first 0) ended before w
// began.
func replaced(ops []*Op, r, w *Op) bool {
	if r.Value == 0 {
		return true
	}
	for _, v := range ops {
		if v.Kind == RegWrite && object(v) == object(r) && v.Value == r.Value {
			return v.Return < w.Call
		}
	}
	return true // a value nobody wrote: linearizability says so
}
