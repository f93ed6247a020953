package nemesis

import (
	"fmt"
	"slices"
	"time"

	"github.com/fenec-go/fenec/internal/history"
)

// Claims are what a scenario's history is held to. The zero value is
// fenec's full claim under --sync always.
type Claims struct {
	// LossWindow, when not 0, is what a power loss may take under a
	// --sync other than always: writes a node acknowledged within this
	// long before it lost power. Tenants whose node lost power are then
	// not held to linearizability (a write seen and then lost is not a
	// linearizable register's), but every other check holds, allowing
	// those writes alone to be missing.
	LossWindow time.Duration
	// CheckTimeout bounds porcupine on one object; past it the object is
	// reported unchecked, not passed.
	CheckTimeout time.Duration
	// Known are anomalies found before and not yet fixed, by check, with
	// where they are written up: reported, counted apart, and not failed
	// on, so that the scenario still fails on anything else.
	Known map[string]string
}

// Report is what the checks found in a history.
type Report struct {
	Ops     int `json:"ops"`
	Acked   int `json:"acked_writes"`
	Unknown int `json:"unknown_writes"`
	Refused int `json:"refused_writes"`
	// Reads answered, by what they said of their freshness: fresh (0, or
	// no bound said: held to linearizability), bounded (held to the bound
	// they stated), unbounded (held to neither). CopyReads were sent to a
	// copy, Declined of them answered with no rows (421, 504).
	Fresh, Bounded, UnboundedReads, CopyReads, Declined int
	// NearCopy and NearPrimary count the reads through a router near the
	// far region that stated a bound or a seq, by who served them.
	NearCopy, NearPrimary int
	Anomalies             []Anomaly `json:"anomalies"`
	// Known are the anomalies Claims.Known names: reported, not failed on.
	Known []Anomaly `json:"known,omitempty"`
	// Unchecked names the objects porcupine ran out of time on.
	Unchecked []string `json:"unchecked,omitempty"`
	// LongestGap is the longest a tenant went without an acknowledged
	// write while clients wrote, and which tenant when.
	LongestGap   time.Duration `json:"longest_gap_ns"`
	LongestGapOn string        `json:"longest_gap_on,omitempty"`
}

// Check runs every check on the history.
func Check(h *History, cl Claims) Report {
	if cl.CheckTimeout == 0 {
		cl.CheckTimeout = 60 * time.Second
	}
	ops, _ := h.Snapshot()
	r := Report{Ops: len(ops)}
	for _, op := range ops {
		if op.ToCopy {
			r.CopyReads++
			if op.Outcome != OK {
				r.Declined++
			}
		}
		if !op.Kind.Write() {
			if op.Outcome == OK {
				switch {
				case op.Staleness == 0 || op.Staleness == NoBound:
					r.Fresh++
				case op.Staleness == Unbounded:
					r.UnboundedReads++
				default:
					r.Bounded++
				}
			}
			continue
		}
		switch op.Outcome {
		case OK:
			r.Acked++
		case Unknown:
			r.Unknown++
		case Fail:
			r.Refused++
		}
	}
	lossy := lossyTenants(h, cl)
	r.Anomalies = append(r.Anomalies, checkLinearizable(ops, lossy, cl.CheckTimeout, &r)...)
	r.Anomalies = append(r.Anomalies, checkRefusedNeverSeen(ops)...)
	r.Anomalies = append(r.Anomalies, history.CheckLists(ops, lossy)...)
	r.Anomalies = append(r.Anomalies, checkReadBack(h, ops, cl)...)
	r.Anomalies = append(r.Anomalies, checkTwoPrimaries(ops, lossy)...)
	r.Anomalies = append(r.Anomalies, checkIncrements(h, ops, cl)...)
	r.Anomalies = append(r.Anomalies, checkAfterReads(h, ops, cl)...)
	r.Anomalies = append(r.Anomalies, checkStaleness(h, ops, cl)...)
	r.Anomalies = append(r.Anomalies, checkNearReads(h, ops)...)
	r.NearCopy, r.NearPrimary = nearCounts(ops)
	r.LongestGap, r.LongestGapOn = longestGap(ops)
	r.Sort(cl)
	return r
}

// Sort moves the anomalies cl knows into Known.
func (r *Report) Sort(cl Claims) {
	var still []Anomaly
	for _, a := range r.Anomalies {
		if why, ok := cl.Known[a.Check]; ok {
			a.What += " [known: " + why + "]"
			r.Known = append(r.Known, a)
			continue
		}
		still = append(still, a)
	}
	r.Anomalies = still
}

// lossyTenants are the tenants a power loss may have taken acknowledged
// writes from under cl: those with a write acknowledged by a node that
// later lost power (any, when LossWindow is 0: none).
func lossyTenants(h *History, cl Claims) map[string]bool {
	out := map[string]bool{}
	if cl.LossWindow == 0 {
		return out
	}
	ops, _ := h.Snapshot()
	for _, op := range ops {
		if op.Kind.Write() && op.Outcome == OK && lossAllowed(h, op, cl.LossWindow) {
			out[op.Tenant] = true
		}
	}
	return out
}

// lossAllowed says whether op, acknowledged, may be gone: its node lost
// power after it was sent and within window of its acknowledgement.
func lossAllowed(h *History, op *Op, window time.Duration) bool {
	if window == 0 {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, at := range h.PowerLost[op.Node] {
		// Sent before the power went (its answer may still have been on
		// its way as the node died), acknowledged within window of it.
		if op.Call <= at && at-op.Return <= int64(window) {
			return true
		}
	}
	return false
}

// checkLinearizable checks each object with porcupine.
func checkLinearizable(ops []*Op, lossy map[string]bool, timeout time.Duration, r *Report) []Anomaly {
	var out []Anomaly
	for _, res := range history.CheckObjects(ops, history.Options{Timeout: timeout, Skip: lossy}) {
		switch res.Verdict {
		case history.TimedOut:
			r.Unchecked = append(r.Unchecked, res.Object)
		case history.NotLinearizable:
			out = append(out, *res.Anomaly)
		}
	}
	return out
}

// checkRefusedNeverSeen: a write refused with nothing done never shows
// in a read.
func checkRefusedNeverSeen(ops []*Op) []Anomaly {
	type val struct {
		obj string
		v   int64
	}
	refused := map[val]*Op{}
	for _, op := range ops {
		if op.Outcome == Fail && (op.Kind == RegWrite || op.Kind == ListAppend) {
			refused[val{history.Object(op), op.Value}] = op
		}
	}
	var out []Anomaly
	for _, op := range ops {
		if op.Outcome != OK {
			continue
		}
		seen := []int64{}
		switch op.Kind {
		case RegRead:
			seen = append(seen, op.Value)
		case ListRead:
			seen = op.List
		}
		for _, v := range seen {
			if w := refused[val{history.Object(op), v}]; w != nil {
				out = append(out, Anomaly{Check: "refusal", Tenant: op.Tenant,
					What:    fmt.Sprintf("a write answered as refused (%d) landed", lastStatus(w)),
					Excerpt: []string{w.String(), op.String()}})
				delete(refused, val{history.Object(op), v})
			}
		}
	}
	return out
}

func lastStatus(op *Op) int {
	if len(op.Attempts) == 0 {
		return 0
	}
	return op.Attempts[len(op.Attempts)-1].Status
}

// finalReads are the read-backs after the heal, by object.
func finalReads(ops []*Op) map[string]*Op {
	out := map[string]*Op{}
	for _, op := range ops {
		if op.Final && op.Outcome == OK {
			out[history.Object(op)] = op
		}
	}
	return out
}

// checkReadBack: every write acknowledged is in the read-back after the
// heal (an append in its list; the register is porcupine's), except one
// the claims let a power loss take; and every tenant was read back.
func checkReadBack(h *History, ops []*Op, cl Claims) []Anomaly {
	final := finalReads(ops)
	var out []Anomaly
	tenants := map[string]bool{}
	for _, op := range ops {
		tenants[op.Tenant] = true
	}
	for t := range tenants {
		for _, o := range []string{t + "/reg", t + "/cnt"} {
			if final[o] == nil {
				out = append(out, Anomaly{Check: "read-back", Tenant: t, What: o + " could not be read back after the heal"})
			}
		}
	}
	missingBy := map[string][]*Op{}
	unread := map[string]bool{}
	for _, op := range ops {
		if op.Kind != ListAppend || op.Outcome != OK {
			continue
		}
		f := final[history.Object(op)]
		if f == nil {
			if !unread[history.Object(op)] {
				unread[history.Object(op)] = true
				out = append(out, Anomaly{Check: "read-back", Tenant: op.Tenant, What: history.Object(op) + " could not be read back after the heal"})
			}
			continue
		}
		if !slices.Contains(f.List, op.Value) && !lossAllowed(h, op, cl.LossWindow) {
			missingBy[history.Object(op)] = append(missingBy[history.Object(op)], op)
		}
	}
	for o, lost := range missingBy {
		a := Anomaly{Check: "lost write", Tenant: lost[0].Tenant,
			What: fmt.Sprintf("%d acknowledged appends to %s are not in its read-back", len(lost), o)}
		for _, op := range lost[:min(len(lost), 8)] {
			a.Excerpt = append(a.Excerpt, op.String())
		}
		a.Excerpt = append(a.Excerpt, "read back: "+final[o].String())
		out = append(out, a)
	}
	return out
}

// checkTwoPrimaries holds the acknowledged writes of each tenant to one
// primary at a time. A primary's time is a history of the tenant's file:
// a promotion forks it, a move carries it to the next node. So
//
//   - once a write was acknowledged in a history begun later than
//     another's, no write sent after it is acknowledged in the other (a
//     replayed answer included: a node whose lease lapsed replays none);
//   - within one history, a write sent after another was acknowledged is
//     acknowledged at a higher seq (two nodes writing one history — a
//     move's source and target both taking writes — answer seqs that
//     repeat or go back). Replayed answers, which carry the seq the write
//     first had, are left out of this one.
//
// On a tenant a power loss may have taken writes from (lossy), a seq
// that goes back is reported as what it is there: the file lost
// acknowledged writes and gave their seqs, in the same history, to
// others — so a seq and a history no longer name one write.
func checkTwoPrimaries(ops []*Op, lossy map[string]bool) []Anomaly {
	byTenant := map[string][]*Op{}
	for _, op := range ops {
		if op.Kind.Write() && op.Outcome == OK && op.History != "" {
			byTenant[op.Tenant] = append(byTenant[op.Tenant], op)
		}
	}
	var out []Anomaly
	for t, writes := range byTenant {
		if a, ok := lateInOldHistory(t, writes); ok {
			out = append(out, a)
		}
		if a, ok := seqBackwards(t, writes); ok {
			if lossy[t] {
				a.Check = "seq reused"
				a.What = "after a power loss, " + a.What
			}
			out = append(out, a)
		}
	}
	return out
}

// lateInOldHistory finds a write acknowledged in a history after a
// later history's first acknowledged write returned, and sent after it.
func lateInOldHistory(t string, writes []*Op) (Anomaly, bool) {
	first := map[string]*Op{}
	for _, w := range writes {
		if f := first[w.History]; f == nil || w.Return < f.Return {
			first[w.History] = w
		}
	}
	for _, w := range writes {
		mine := first[w.History]
		for h, next := range first {
			if h == w.History || next.Return <= mine.Return || w.Call <= next.Return {
				continue
			}
			return Anomaly{Check: "two primaries", Tenant: t,
				What: fmt.Sprintf("%s acknowledged a write in history %s sent %.1f ms after %s took its first in history %s",
					w.Node, w.History, float64(w.Call-next.Return)/1e6, next.Node, h),
				Excerpt: []string{"next primary's first: " + next.String(), "old history's late:  " + w.String()}}, true
		}
	}
	return Anomaly{}, false
}

// seqBackwards finds, within one history, a write sent after another was
// acknowledged that was acknowledged at a seq not above it.
func seqBackwards(t string, writes []*Op) (Anomaly, bool) {
	byHistory := map[string][]*Op{}
	for _, w := range writes {
		if !w.Replayed && w.Seq > 0 {
			byHistory[w.History] = append(byHistory[w.History], w)
		}
	}
	for h, ws := range byHistory {
		slices.SortFunc(ws, func(a, b *Op) int { return cmp64(a.Return, b.Return) })
		// best is the acknowledged write of the highest seq returned so
		// far; every write sent after it must land above it.
		var best *Op
		byCall := slices.Clone(ws)
		slices.SortFunc(byCall, func(a, b *Op) int { return cmp64(a.Call, b.Call) })
		i := 0
		for _, w := range byCall {
			for i < len(ws) && ws[i].Return < w.Call {
				if best == nil || ws[i].Seq > best.Seq {
					best = ws[i]
				}
				i++
			}
			if best != nil && w.Seq <= best.Seq {
				return Anomaly{Check: "two primaries", Tenant: t,
					What: fmt.Sprintf("in history %s, %s acknowledged seq %d to a write sent after %s acknowledged seq %d",
						h, w.Node, w.Seq, best.Node, best.Seq),
					Excerpt: []string{"acknowledged first: " + best.String(), "then, not above it: " + w.String()}}, true
			}
		}
	}
	return Anomaly{}, false
}

// checkIncrements: every increment acknowledged was made once, none
// twice: the values they answered differ, and the counter read back
// lies between those acknowledged and those plus the unknown ones.
func checkIncrements(h *History, ops []*Op, cl Claims) []Anomaly {
	type tally struct {
		ok, unknown, mayBeLost int
		made                   map[int64]*Op
	}
	tallies := map[string]*tally{}
	var out []Anomaly
	for _, op := range ops {
		if op.Kind != Incr {
			continue
		}
		tl := tallies[op.Tenant]
		if tl == nil {
			tl = &tally{made: map[int64]*Op{}}
			tallies[op.Tenant] = tl
		}
		switch op.Outcome {
		case OK:
			tl.ok++
			if lossAllowed(h, op, cl.LossWindow) {
				tl.mayBeLost++
			}
			if other := tl.made[op.Value]; other != nil && !lossAllowed(h, other, cl.LossWindow) {
				out = append(out, Anomaly{Check: "exactly once", Tenant: op.Tenant,
					What:    fmt.Sprintf("two increments both answered %d", op.Value),
					Excerpt: []string{other.String(), op.String()}})
			}
			tl.made[op.Value] = op
		case Unknown:
			tl.unknown++
		}
	}
	final := finalReads(ops)
	for t, tl := range tallies {
		f := final[t+"/cnt"]
		if f == nil {
			continue // checkReadBack says so
		}
		if f.Value < int64(tl.ok-tl.mayBeLost) || f.Value > int64(tl.ok+tl.unknown) {
			out = append(out, Anomaly{Check: "exactly once", Tenant: t,
				What: fmt.Sprintf("the counter reads %d after %d increments acknowledged and %d unknown",
					f.Value, tl.ok, tl.unknown),
				Excerpt: []string{f.String()}})
		}
		for v, op := range tl.made {
			if v > f.Value && !lossAllowed(h, op, cl.LossWindow) {
				out = append(out, Anomaly{Check: "exactly once", Tenant: t,
					What:    fmt.Sprintf("an increment answered %d, the counter reads %d after the heal", v, f.Value),
					Excerpt: []string{op.String(), f.String()}})
				break
			}
		}
	}
	return out
}

// longestGap is the longest time a tenant went between two acknowledged
// writes, and where.
func longestGap(ops []*Op) (time.Duration, string) {
	ends := map[string][]int64{}
	for _, op := range ops {
		if op.Kind.Write() && op.Outcome == OK && !op.Final {
			ends[op.Tenant] = append(ends[op.Tenant], op.Return)
		}
	}
	var best time.Duration
	var where string
	for t, e := range ends {
		slices.Sort(e)
		for i := 1; i < len(e); i++ {
			if d := time.Duration(e[i] - e[i-1]); d > best {
				best, where = d, fmt.Sprintf("%s at %.1fs", t, float64(e[i-1])/1e9)
			}
		}
	}
	return best, where
}
