package history

import (
	"fmt"
	"io"
	"time"

	"github.com/anishathalye/porcupine"
)

// Anomaly is one thing a history shows that fenec claims never happens.
type Anomaly struct {
	Check  string `json:"check"`
	Tenant string `json:"tenant"`
	What   string `json:"what"`
	// Excerpt is the operations around it, one a line.
	Excerpt []string `json:"excerpt,omitempty"`
}

func (a Anomaly) String() string {
	s := fmt.Sprintf("%s on %s: %s", a.Check, a.Tenant, a.What)
	for _, l := range a.Excerpt {
		s += "\n    " + l
	}
	return s
}

// Verdict is porcupine's answer on one object.
type Verdict string

const (
	Linearizable    Verdict = "linearizable"
	NotLinearizable Verdict = "not linearizable"
	// TimedOut: porcupine ran out of time before it could say either;
	// never a pass.
	TimedOut Verdict = "timed out"
)

// Result is one object's check.
type Result struct {
	Object  string
	Tenant  string
	Ops     int // the operations porcupine was given
	Verdict Verdict
	// Anomaly, when not linearizable: where linearizing stopped.
	Anomaly *Anomaly

	model porcupine.Model
	info  porcupine.LinearizationInfo
}

// Visualize writes porcupine's picture of the check (an HTML page) to w:
// the longest linearizations it found and where each stopped.
func (r Result) Visualize(w io.Writer) error {
	return porcupine.Visualize(r.model, r.info, w)
}

// Options say how CheckObjects checks.
type Options struct {
	// Timeout bounds porcupine on one object; past it the object is
	// TimedOut.
	Timeout time.Duration
	// Skip names tenants left out.
	Skip map[string]bool
	// ListsBySet checks lists by the elements each read shows, not their
	// order (setModel): for lists that clients append to at once, which
	// the order's model cannot search in time. CheckLists then holds the
	// order.
	ListsBySet bool
}

// CheckObjects checks each object of ops with porcupine, in the
// objects' order by name. ops are in call order; objects left with no
// operation porcupine can use (reads that failed, refused writes) are
// left out.
func CheckObjects(ops []*Op, o Options) []Result {
	var out []Result
	names, groups := byObject(ops)
	for _, name := range names {
		group := groups[name]
		if o.Skip[group[0].Tenant] {
			continue
		}
		model, pops, from := porcupineOps(group, o.ListsBySet)
		if len(pops) == 0 {
			continue
		}
		res, info := porcupine.CheckOperationsVerbose(model, pops, o.Timeout)
		r := Result{Object: name, Tenant: group[0].Tenant, Ops: len(pops), model: model, info: info}
		switch res {
		case porcupine.Ok:
			r.Verdict = Linearizable
		case porcupine.Unknown:
			r.Verdict = TimedOut
		default:
			r.Verdict = NotLinearizable
			r.Anomaly = &Anomaly{
				Check: "linearizable", Tenant: r.Tenant,
				What:    name + " is not linearizable",
				Excerpt: witness(pops, from, info),
			}
		}
		out = append(out, r)
	}
	return out
}

// witness gives the operations where linearizing stopped: the last few
// of the longest linearizable prefix porcupine found, then the first
// operation it could not place and those overlapping it.
func witness(pops []porcupine.Operation, from []*Op, info porcupine.LinearizationInfo) []string {
	var longest []int
	for _, part := range info.PartialLinearizations() {
		for _, l := range part {
			if len(l) > len(longest) {
				longest = l
			}
		}
	}
	placed := map[int]bool{}
	for _, i := range longest {
		placed[i] = true
	}
	var lines []string
	for _, i := range longest[max(0, len(longest)-6):] {
		lines = append(lines, "linearized: "+from[i].String())
	}
	first := -1
	for i := range pops {
		if !placed[i] && (first < 0 || pops[i].Call < pops[first].Call) {
			first = i
		}
	}
	if first < 0 {
		return lines
	}
	lines = append(lines, "cannot place: "+from[first].String())
	for i := range pops {
		if i != first && !placed[i] && pops[i].Call <= pops[first].Return && pops[i].Return >= pops[first].Call && len(lines) < 24 {
			lines = append(lines, "overlapping:  "+from[i].String())
		}
	}
	return lines
}
