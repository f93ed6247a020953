package history

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestModelsDescribe(t *testing.T) {
	if s := listModel.DescribeOperation(listIn{read: true}, stateOf([]int64{1, 2})); !strings.Contains(s, "2 elements") {
		t.Fatal(s)
	}
	if stateOf([]int64{1, 2}) == stateOf([]int64{2, 1}) {
		t.Fatal("a list's state ignores order")
	}
}

func TestClassify(t *testing.T) {
	refused := ErrText(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
	for _, tc := range []struct {
		name      string
		a         Attempt
		sent      bool
		want      Outcome
		sendAgain bool
	}{
		{"nowhere to send it", Attempt{}, false, Fail, true},
		{"200", Attempt{Status: 200}, true, OK, false},
		{"201", Attempt{Status: 201}, true, OK, false},
		{"503 no lease", Attempt{Status: 503}, true, Fail, true},
		{"429", Attempt{Status: 429}, true, Fail, true},
		{"404 not here", Attempt{Status: 404}, true, Fail, true},
		{"409", Attempt{Status: 409}, true, Fail, false},
		{"400", Attempt{Status: 400}, true, Fail, false},
		{"500 outcome unknown", Attempt{Status: 500}, true, Unknown, true},
		{"502", Attempt{Status: 502}, true, Unknown, true},
		{"504", Attempt{Status: 504}, true, Unknown, true},
		{"timeout", Attempt{Err: ErrText(errors.New("context deadline exceeded"))}, true, Unknown, true},
		{"connection reset", Attempt{Err: ErrText(syscall.ECONNRESET)}, true, Unknown, true},
		{"connection refused: never sent", Attempt{Err: refused}, true, Fail, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, again := Classify(tc.a, tc.sent)
			if got != tc.want || again != tc.sendAgain {
				t.Fatalf("got %s, again %v; want %s, %v", got, again, tc.want, tc.sendAgain)
			}
		})
	}
}

func TestSettle(t *testing.T) {
	for _, tc := range []struct {
		kind       Kind
		last       Outcome
		mayHaveRun bool
		want       Outcome
	}{
		{ListAppend, Fail, false, Fail},
		{ListAppend, Fail, true, Unknown}, // refused last, but an earlier attempt may have run
		{ListAppend, Unknown, true, Unknown},
		{ListRead, Unknown, true, Unknown},
		{ListRead, Fail, true, Fail}, // a read that ran changed nothing
	} {
		if got := Settle(tc.kind, tc.last, tc.mayHaveRun); got != tc.want {
			t.Errorf("Settle(%s, %s, %v) = %s, want %s", tc.kind, tc.last, tc.mayHaveRun, got, tc.want)
		}
	}
}

func app(client int, e, call, ret int64, out Outcome) *Op {
	return &Op{Client: client, Tenant: "t", Kind: ListAppend, Key: "w", Value: e, Call: call, Return: ret, Outcome: out}
}

func read(client int, l []int64, call, ret int64) *Op {
	return &Op{Client: client, Tenant: "t", Kind: ListRead, Key: "w", List: l, Call: call, Return: ret, Outcome: OK, Staleness: NoBound}
}

// verdicts runs CheckObjects and names each object's verdict.
func verdicts(t *testing.T, ops []*Op) map[string]Verdict {
	t.Helper()
	out := map[string]Verdict{}
	for _, r := range CheckObjects(ops, Options{Timeout: 10 * time.Second}) {
		out[r.Object] = r.Verdict
		if r.Anomaly != nil {
			t.Logf("%s", r.Anomaly)
		}
	}
	return out
}

func TestCheckObjectsOnePrimary(t *testing.T) {
	ops := []*Op{
		app(1, 1, 0, 10, OK),
		app(2, 2, 5, 30, OK),
		read(1, []int64{1}, 12, 20), // 2 overlaps it: may be after
		app(1, 3, 40, 50, Unknown),  // may land at any time after 40, or never
		read(2, []int64{1, 2}, 45, 55),
		app(2, 4, 60, 70, Fail), // refused, nothing done
		app(1, 5, 60, 80, OK),
		read(1, []int64{1, 2, 5, 3}, 90, 100),
		read(2, []int64{1, 2, 5, 3}, 110, 120),
	}
	if got := verdicts(t, ops); len(got) != 1 || got["t/log/w"] != Linearizable {
		t.Fatalf("a history of one primary: %v", got)
	}
}

// Two primaries: both appends acknowledged, then a read after both
// returned that misses the first (the side that took it was not the
// primary the read asked).
func TestCheckObjectsTwoPrimaries(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []*Op
	}{
		{"a read misses an append acknowledged before it", []*Op{
			app(1, 1, 0, 10, OK), // taken by the old primary, cut off
			app(2, 2, 0, 12, OK), // taken by the new one
			read(2, []int64{2}, 20, 30),
		}},
		{"two reads fork", []*Op{
			app(1, 1, 0, 10, OK),
			app(2, 2, 0, 10, OK),
			read(1, []int64{1}, 20, 30),
			read(2, []int64{2}, 20, 30),
		}},
		{"a refused append shows", []*Op{
			app(1, 1, 0, 10, Fail),
			read(2, []int64{1}, 20, 30),
		}},
		{"an append landed twice", []*Op{
			app(1, 1, 0, 10, OK),
			read(2, []int64{1, 1}, 20, 30),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := CheckObjects(tc.ops, Options{Timeout: 10 * time.Second})
			if len(res) != 1 || res[0].Verdict != NotLinearizable || res[0].Anomaly == nil {
				t.Fatalf("got %+v, want one object not linearizable", res)
			}
			var b bytes.Buffer
			if err := res[0].Visualize(&b); err != nil || !strings.Contains(b.String(), "<html") {
				t.Fatalf("visualization: %v, %.100q", err, b.String())
			}
		})
	}
}

// A read of a copy's that stated a staleness bound is not held to
// linearizability, nor is a read that failed; a skipped tenant is not
// checked; objects are checked apart.
func TestCheckObjectsLeavesOut(t *testing.T) {
	stale := read(2, []int64{}, 20, 30)
	stale.Staleness = 300
	failed := read(2, []int64{}, 20, 30)
	failed.Outcome = Unknown
	other := app(1, 9, 0, 10, OK)
	other.Tenant = "u"
	otherRead := read(2, nil, 20, 30)
	otherRead.Tenant = "u"
	ops := []*Op{app(1, 1, 0, 10, OK), other, stale, failed, otherRead}
	got := verdicts(t, ops)
	if got["t/log/w"] != Linearizable || got["u/log/w"] != NotLinearizable {
		t.Fatalf("got %v", got)
	}
	if got := CheckObjects(ops, Options{Timeout: time.Second, Skip: map[string]bool{"u": true}}); len(got) != 1 || got[0].Tenant != "t" {
		t.Fatalf("u skipped: %+v", got)
	}
}

// Past its timeout porcupine says neither: the object is reported timed
// out, never linearizable.
func TestCheckObjectsTimedOut(t *testing.T) {
	// Forty appends whose outcome is unknown, then a read of an element
	// never appended: the search tries every order of every subset of
	// the appends before the read before it can say no.
	var ops []*Op
	const n = 40
	for i := range n {
		ops = append(ops, app(i, int64(i), 0, 1000, Unknown))
	}
	ops = append(ops, read(n, []int64{n + 100}, 2000, 3000))
	res := CheckObjects(ops, Options{Timeout: 50 * time.Millisecond})
	if len(res) != 1 || res[0].Verdict != TimedOut || res[0].Anomaly != nil {
		t.Fatalf("got %+v, want timed out", res)
	}
}

// clientsAtOnce is two clients appending n elements each, every pair of
// their appends overlapping in time, with reads of the list by a third
// between: the drill's two writers of one tenant. missFirst makes the
// reads after the first pair miss client 1's first append, as a second
// primary's reads would.
func clientsAtOnce(n int, missFirst bool) []*Op {
	var ops, list []*Op
	var shown []int64
	for i := range n {
		t := int64(i) * 100
		a, b := app(1, int64(i), t, t+50, OK), app(2, int64(1000+i), t+10, t+60, OK)
		ops = append(ops, a, b)
		list = append(list, a, b)
		if i == 0 && missFirst {
			list = list[1:]
		}
		if i%50 == 49 { // as rarely as the drill reads: past what the order's model can search
			shown = shown[:0]
			for _, x := range list {
				shown = append(shown, x.Value)
			}
			ops = append(ops, read(3, append([]int64(nil), shown...), t+70, t+80))
		}
	}
	return ops
}

// Lists by set: two clients appending at once are searched in time, and
// a read missing an append acknowledged before it is still caught.
func TestListsBySet(t *testing.T) {
	res := CheckObjects(clientsAtOnce(300, false), Options{Timeout: 20 * time.Second, ListsBySet: true})
	if len(res) != 1 || res[0].Verdict != Linearizable {
		t.Fatalf("clients at once, one primary: %+v", res)
	}
	res = CheckObjects(clientsAtOnce(300, true), Options{Timeout: 20 * time.Second, ListsBySet: true})
	if len(res) != 1 || res[0].Verdict != NotLinearizable {
		t.Fatalf("a read missing an acknowledged append: %+v", res)
	}
	for _, tc := range []struct {
		name string
		ops  []*Op
	}{
		{"twice", []*Op{app(1, 1, 0, 10, OK), read(2, []int64{1, 1}, 20, 30)}},
		{"never appended", []*Op{app(1, 1, 0, 10, OK), read(2, []int64{1, 2}, 20, 30)}},
		{"refused, shown", []*Op{app(1, 1, 0, 10, Fail), read(2, []int64{1}, 20, 30)}},
	} {
		if res := CheckObjects(tc.ops, Options{Timeout: time.Second, ListsBySet: true}); len(res) != 1 || res[0].Verdict != NotLinearizable {
			t.Errorf("%s: %+v", tc.name, res)
		}
	}
}

func TestCheckListOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []*Op
		want int
	}{
		{"in order", []*Op{app(1, 1, 0, 10, OK), app(2, 2, 20, 30, OK), read(3, []int64{1, 2}, 40, 50)}, 0},
		{"overlapping, either order", []*Op{app(1, 1, 0, 30, OK), app(2, 2, 10, 20, OK), read(3, []int64{2, 1}, 40, 50)}, 0},
		{"unknown, anywhere after it was sent", []*Op{app(1, 1, 0, 10, Unknown), app(2, 2, 20, 30, OK), read(3, []int64{2, 1}, 40, 50)}, 0},
		{"after one that returned before it was sent", []*Op{app(1, 1, 0, 10, OK), app(2, 2, 20, 30, OK), read(3, []int64{2, 1}, 40, 50)}, 1},
		{"once an object", []*Op{app(1, 1, 0, 10, OK), app(2, 2, 20, 30, OK), read(3, []int64{2, 1}, 40, 50), read(3, []int64{2, 1}, 60, 70)}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CheckListOrder(tc.ops)
			if len(got) != tc.want {
				t.Fatalf("got %v, want %d anomalies", got, tc.want)
			}
		})
	}
}
