package nemesis

import (
	"fmt"
	"slices"

	"github.com/fenec-go/fenec/internal/history"
)

// The checks of reads by how fresh they say they are: read-your-writes
// through Fenec-After, and the staleness bound every read a node answers
// states (Fenec-Staleness-Ms). The direct clients send both to the
// tenants' copies; through the routers every read goes to the primary,
// whose bound is 0 while its lease runs and the time since it lapsed
// after. Reads answered by read copies in other regions (DESIGN §10,
// scenario ryw) will be held to the same checks once routers send reads
// there.

// checkAfterReads: a read sent to see write W (Op.After) shows W or a
// write not older than it — for the register, no value whose write ended
// before W began; for a list, W's element.
//
// A write a power loss was allowed to take (Claims.LossWindow) and a read
// answered as holding it all the same is the known finding "seq
// reused": the file gave the lost write's seq, in the same history, to
// another.
func checkAfterReads(h *History, ops []*Op, cl Claims) []Anomaly {
	byID := map[int]*Op{}
	byValue := map[string]*Op{}
	for _, op := range ops {
		byID[op.ID] = op
		if op.Kind == RegWrite && op.Outcome != Fail {
			byValue[fmt.Sprint(history.Object(op), op.Value)] = op
		}
	}
	var out []Anomaly
	for _, r := range ops {
		if r.After == 0 || r.Outcome != OK {
			continue
		}
		w := byID[r.After]
		if w == nil || history.Object(w) != history.Object(r) {
			continue
		}
		bad := false
		switch r.Kind {
		case RegRead:
			seen := byValue[fmt.Sprint(history.Object(r), r.Value)]
			bad = seen == nil || (seen != w && seen.Return < w.Call)
		case ListRead:
			bad = !slices.Contains(r.List, w.Value)
		}
		switch {
		case bad && lossAllowed(h, w, cl.LossWindow):
			out = append(out, Anomaly{Check: "seq reused", Tenant: r.Tenant,
				What:    "a read sent with Fenec-After and Fenec-History to see a write a power loss took was answered as holding it, without it",
				Excerpt: []string{"the write: " + w.String(), "the read:  " + r.String()}})
		case bad:
			out = append(out, Anomaly{Check: "read your writes", Tenant: r.Tenant,
				What:    "a read sent with Fenec-After to see a write answered without it",
				Excerpt: []string{"the write: " + w.String(), "the read:  " + r.String()}})
		}
	}
	return out
}

// checkStaleness: a read sent at c and answered with a staleness bound
// of B ms shows every write acknowledged before c − B: for the register,
// no value a write ending before c − B had replaced; for a list, every
// element whose append ended before c − B.
//
// A write a power loss was allowed to take (Claims.LossWindow) may be
// missing whatever the bound.
func checkStaleness(h *History, ops []*Op, cl Claims) []Anomaly {
	// Each object's acknowledged writes, by when they returned, and the
	// register's writes by value.
	writes := map[string][]*Op{}
	byValue := map[string]*Op{}
	for _, w := range ops {
		if !w.Kind.Write() || w.Outcome == Fail {
			continue
		}
		if w.Kind == RegWrite {
			byValue[fmt.Sprint(history.Object(w), w.Value)] = w
		}
		if w.Outcome == OK && !lossAllowed(h, w, cl.LossWindow) {
			writes[history.Object(w)] = append(writes[history.Object(w)], w)
		}
	}
	for _, ws := range writes {
		slices.SortFunc(ws, func(a, b *Op) int { return cmp64(a.Return, b.Return) })
	}
	var out []Anomaly
	for _, r := range ops {
		if r.Staleness < 0 || r.Outcome != OK || (r.Kind != RegRead && r.Kind != ListRead) {
			continue
		}
		// The bound runs from when the read reached the node, which is
		// after the client sent it: its call is the horizon's safe side.
		horizon := r.Call - r.Staleness*1_000_000
		var missed *Op
		var seen map[int64]bool
		if r.Kind == ListRead {
			seen = make(map[int64]bool, len(r.List))
			for _, e := range r.List {
				seen[e] = true
			}
		}
		for _, w := range writes[history.Object(r)] {
			if w.Return >= horizon {
				break
			}
			switch {
			case r.Kind == ListRead && !seen[w.Value]:
				missed = w
			case r.Kind == RegRead && w.Value != r.Value && replaced(byValue[fmt.Sprint(history.Object(r), r.Value)], r, w):
				missed = w
			}
			if missed != nil {
				break
			}
		}
		if missed != nil {
			out = append(out, Anomaly{Check: "staleness", Tenant: r.Tenant,
				What: fmt.Sprintf("a read stated it was at most %d ms old and missed a write acknowledged %.1f ms before it was sent",
					r.Staleness, float64(r.Call-missed.Return)/1e6),
				Excerpt: []string{"missed: " + missed.String(), "read:   " + r.String()}})
		}
	}
	return out
}

// replaced says whether w, acknowledged, had replaced the value r read,
// whose write is v (nil: the register's first 0, or a value nobody wrote,
// which linearizability reports): v ended before w began.
func replaced(v, r, w *Op) bool {
	switch {
	case v == nil:
		return true
	case v.Outcome == Unknown:
		return false // it may have landed after w
	}
	return v.Return < w.Call
}
