package history

import (
	"fmt"
	"slices"
	"strings"
)

// CheckLists holds each list's reads to what an append-only list shows,
// Elle's way: no element twice, none never appended, and every two reads
// one a prefix of the other — except on a tenant a power loss may have
// taken writes from (lossy), where a read may have shown one it took.
func CheckLists(ops []*Op, lossy map[string]bool) []Anomaly {
	appended := map[string]map[int64]bool{}
	reads := map[string][]*Op{}
	for _, op := range ops {
		o := Object(op)
		switch {
		case op.Kind == ListAppend && op.Outcome != Fail:
			if appended[o] == nil {
				appended[o] = map[int64]bool{}
			}
			appended[o][op.Value] = true
		case op.Kind == ListRead && op.Outcome == OK:
			reads[o] = append(reads[o], op)
		}
	}
	var out []Anomaly
	for o, rs := range reads {
		longest := rs[0]
		for _, r := range rs {
			seen := map[int64]bool{}
			for _, e := range r.List {
				if seen[e] {
					out = append(out, Anomaly{Check: "list", Tenant: r.Tenant, What: fmt.Sprintf("%s holds %d twice", o, e), Excerpt: []string{r.String()}})
				}
				seen[e] = true
				if !appended[o][e] {
					out = append(out, Anomaly{Check: "list", Tenant: r.Tenant, What: fmt.Sprintf("%s holds %d, never appended", o, e), Excerpt: []string{r.String()}})
				}
			}
			if len(r.List) > len(longest.List) {
				longest = r
			}
		}
		for _, r := range rs {
			if lossy[r.Tenant] {
				break
			}
			if !slices.Equal(r.List, longest.List[:min(len(r.List), len(longest.List))]) {
				i := 0
				for i < len(r.List) && r.List[i] == longest.List[i] {
					i++
				}
				out = append(out, Anomaly{Check: "list", Tenant: r.Tenant,
					What: fmt.Sprintf("%s: two reads disagree at element %d (%d against %d): the list forked",
						o, i, r.List[i], longest.List[i]),
					Excerpt: []string{r.String(), longest.String()}})
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b Anomaly) int { return strings.Compare(a.What, b.What) })
	return out
}

// CheckListOrder holds each list read's order to the appends' order in
// time: an append acknowledged before another was sent comes first in
// every read that shows both. (setModel checks which elements a read
// shows; this and CheckLists, the order.) Reads that stated a staleness
// bound are left out, as porcupine leaves them.
func CheckListOrder(ops []*Op) []Anomaly {
	appends := map[string]map[int64]*Op{}
	for _, op := range ops {
		if op.Kind == ListAppend && op.Outcome != Fail {
			o := Object(op)
			if appends[o] == nil {
				appends[o] = map[int64]*Op{}
			}
			appends[o][op.Value] = op
		}
	}
	var out []Anomaly
	reported := map[string]bool{}
	for _, r := range ops {
		o := Object(r)
		if r.Kind != ListRead || r.Outcome != OK || reported[o] || (r.Staleness != 0 && r.Staleness != NoBound) {
			continue
		}
		var latest *Op // of the elements so far, the append sent last
		for _, e := range r.List {
			a := appends[o][e]
			if a == nil {
				continue // CheckLists says so
			}
			if latest != nil && a.Outcome == OK && a.Return < latest.Call {
				reported[o] = true
				out = append(out, Anomaly{Check: "list order", Tenant: r.Tenant,
					What:    fmt.Sprintf("%s: a read shows %d before %d, appended after it returned", o, latest.Value, e),
					Excerpt: []string{a.String(), latest.String(), r.String()}})
				break
			}
			if latest == nil || a.Call > latest.Call {
				latest = a
			}
		}
	}
	return out
}
