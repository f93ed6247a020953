package nemesis

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// hist builds a history from operations given in order; each gets the
// next id.
func hist(ops ...*Op) *History {
	h := NewHistory("test", 1, time.Second)
	for _, op := range ops {
		h.Add(op)
	}
	return h
}

func w(kind Kind, t string, v int64, call, ret int64, out Outcome, node, history string, seq uint64) *Op {
	return &Op{Tenant: t, Kind: kind, Value: v, Call: call, Return: ret, Outcome: out, Node: node, History: history, Seq: seq}
}

func rd(kind Kind, t string, v int64, call, ret int64) *Op {
	return &Op{Tenant: t, Kind: kind, Value: v, Call: call, Return: ret, Outcome: OK}
}

func lr(t, key string, l []int64, call, ret int64, final bool) *Op {
	return &Op{Tenant: t, Kind: ListRead, Key: key, List: l, Call: call, Return: ret, Outcome: OK, Final: final}
}

func la(t, key string, e, call, ret int64, out Outcome, node, history string, seq uint64) *Op {
	op := w(ListAppend, t, e, call, ret, out, node, history, seq)
	op.Key = key
	return op
}

// final reads of a tenant's register and counter, at 1000.
func finals(t string, reg, cnt int64) []*Op {
	a, b := rd(RegRead, t, reg, 1000, 1001), rd(CntRead, t, cnt, 1000, 1001)
	a.Final, b.Final = true, true
	return []*Op{a, b}
}

// checks runs Check and gives each anomaly's check name.
func checks(t *testing.T, h *History, cl Claims) []string {
	t.Helper()
	r := Check(h, cl)
	var out []string
	for _, a := range r.Anomalies {
		out = append(out, a.Check)
		t.Logf("%s", a)
	}
	return out
}

func TestCheckCleanHistory(t *testing.T) {
	ops := []*Op{
		w(RegWrite, "a", 5, 0, 10, OK, "n1", "h1", 3),
		rd(RegRead, "a", 5, 20, 30),
		w(RegWrite, "a", 6, 40, 50, Unknown, "", "", 0), // may or may not have landed
		rd(RegRead, "a", 6, 60, 70),
		la("a", "k", 1, 0, 10, OK, "n1", "h1", 4),
		la("a", "k", 2, 20, 30, Unknown, "", "", 0),
		la("a", "k", 3, 40, 50, OK, "n2", "h2", 6), // failed over: a new history
		lr("a", "k", []int64{1, 2, 3}, 60, 70, false),
		w(Incr, "a", 1, 0, 10, OK, "n1", "h1", 5),
		w(Incr, "a", 0, 20, 30, Unknown, "", "", 0),
		w(Incr, "a", 3, 40, 50, OK, "n2", "h2", 7),
		lr("a", "k", []int64{1, 2, 3}, 900, 910, true),
	}
	if got := checks(t, hist(append(ops, finals("a", 6, 3)...)...), Claims{}); len(got) != 0 {
		t.Fatalf("a clean history: %v", got)
	}
}

func TestCheckFindsEachAnomaly(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ops   []*Op
		claim Claims
		want  string
	}{
		{"stale read", []*Op{
			w(RegWrite, "a", 5, 0, 10, OK, "n1", "h1", 1),
			w(RegWrite, "a", 6, 20, 30, OK, "n1", "h1", 2),
			rd(RegRead, "a", 5, 40, 50),
		}, Claims{}, "linearizable"},
		{"refused write seen", []*Op{
			w(RegWrite, "a", 5, 0, 10, Fail, "", "", 0),
			rd(RegRead, "a", 5, 40, 50),
		}, Claims{}, "refusal"},
		{"list forked", []*Op{
			la("a", "k", 1, 0, 10, OK, "n1", "h1", 1),
			la("a", "k", 2, 0, 10, OK, "n1", "h1", 2),
			lr("a", "k", []int64{1}, 20, 30, false),
			lr("a", "k", []int64{2, 1}, 40, 50, false),
			lr("a", "k", []int64{1, 2}, 900, 910, true),
		}, Claims{}, "list"},
		{"lost append", []*Op{
			la("a", "k", 1, 0, 10, OK, "n1", "h1", 1),
			la("a", "k", 2, 20, 30, OK, "n1", "h1", 2),
			lr("a", "k", []int64{1}, 900, 910, true),
		}, Claims{}, "lost write"},
		{"old primary late", []*Op{
			w(RegWrite, "a", 5, 0, 10, OK, "n1", "h1", 1),
			w(RegWrite, "a", 6, 20, 30, OK, "n2", "h2", 2),
			w(RegWrite, "a", 7, 40, 50, OK, "n1", "h1", 2),
		}, Claims{}, "two primaries"},
		{"one history, two writers", []*Op{
			w(RegWrite, "a", 5, 0, 10, OK, "n1", "h1", 4),
			w(RegWrite, "a", 6, 20, 30, OK, "n2", "h1", 4),
		}, Claims{}, "two primaries"},
		{"incremented twice", []*Op{
			w(Incr, "a", 1, 0, 10, OK, "n1", "h1", 1),
			w(Incr, "a", 1, 20, 30, OK, "n1", "h1", 2),
		}, Claims{}, "exactly once"},
		{"increment lost", []*Op{
			w(Incr, "a", 1, 0, 10, OK, "n1", "h1", 1),
			w(Incr, "a", 2, 20, 30, OK, "n1", "h1", 2),
		}, Claims{}, "exactly once"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cnt := int64(0)
			for _, op := range tc.ops {
				if op.Kind == Incr && op.Outcome == OK {
					cnt = max(cnt, op.Value)
				}
			}
			if tc.want == "exactly once" && tc.name == "increment lost" {
				cnt = 1
			}
			reg := int64(0)
			for _, op := range tc.ops {
				if op.Kind == RegWrite && op.Outcome == OK {
					reg = op.Value
				}
			}
			got := checks(t, hist(append(tc.ops, finals("a", reg, cnt)...)...), tc.claim)
			found := false
			for _, g := range got {
				found = found || g == tc.want
			}
			if !found {
				t.Fatalf("found %v, want %q among them", got, tc.want)
			}
		})
	}
}

// A move carries a history to the next node: the target's writes above
// the source's seqs are one primary after another, and a replayed answer
// with an old seq is no going back.
func TestCheckMoveIsNoSecondPrimary(t *testing.T) {
	ops := []*Op{
		w(RegWrite, "a", 5, 0, 10, OK, "n1", "h1", 4),
		w(RegWrite, "a", 6, 20, 30, OK, "n2", "h1", 5),
		w(RegWrite, "a", 7, 40, 50, OK, "n1", "h1", 6), // moved back
	}
	// A write whose first answer was lost, answered from its key.
	replay := w(RegWrite, "a", 8, 55, 90, OK, "n1", "h1", 7)
	replay.Replayed = true
	ops = append(ops, replay)
	if got := checks(t, hist(append(ops, finals("a", 8, 0)...)...), Claims{}); len(got) != 0 {
		t.Fatalf("moves back and forth: %v", got)
	}
}

// Under --sync 100 a power loss may take what its node acknowledged in
// the window before it, and nothing older.
func TestCheckLossWindow(t *testing.T) {
	build := func(lostAt int64) *History {
		h := hist(append([]*Op{
			la("a", "k", 1, 0, 10, OK, "n1", "h1", 1),
			la("a", "k", 2, 20, 30, OK, "n1", "h1", 2),
			lr("a", "k", []int64{1}, 900, 910, true),
		}, finals("a", 0, 0)...)...)
		h.PowerLost["n1"] = []int64{lostAt}
		return h
	}
	cl := Claims{LossWindow: 50}
	if got := checks(t, build(60), cl); len(got) != 0 {
		t.Fatalf("lost within the window: %v", got)
	}
	if got := checks(t, build(200), cl); !slices.Contains(got, "lost write") {
		t.Fatalf("lost before the window: %v", got)
	}
	if got := checks(t, build(60), Claims{}); len(got) == 0 {
		t.Fatal("under --sync always nothing may be lost")
	}
}

// The checks of reads from copies (scenario ryw, once read copies exist)
// pass what holds and find what does not.
func TestCheckAfterReadsAndStaleness(t *testing.T) {
	const ms = int64(1e6)
	w1 := w(RegWrite, "a", 5, 0, 10*ms, OK, "n1", "h1", 1)
	w2 := w(RegWrite, "a", 6, 20*ms, 30*ms, OK, "n1", "h1", 2)
	h := hist(w1, w2)
	read := func(v int64, after int, stale int64, ret int64) *Op {
		ret *= ms
		op := rd(RegRead, "a", v, ret-5*ms, ret)
		op.After, op.Staleness, op.ToCopy = after, stale, true
		h.Add(op)
		return op
	}
	good := []*Op{read(6, w2.ID, NoBound, 40), read(5, 0, 100, 60), read(6, 0, 5, 100)}
	bad := []*Op{read(5, w2.ID, NoBound, 45), read(5, 0, 10, 200)}
	ops, _ := h.Snapshot()
	after, stale := checkAfterReads(h, ops, Claims{}), checkStaleness(h, ops, Claims{})
	if len(after) != 1 || len(stale) != 1 {
		t.Fatalf("found %v and %v; want one of each (reads %v good, %v bad)", after, stale, good, bad)
	}
	if !strings.Contains(after[0].Excerpt[1], "-> 5") || !strings.Contains(stale[0].What, "at most 10 ms") {
		t.Fatalf("found the wrong ones: %v, %v", after[0], stale[0])
	}
}

// Reads through the router near the far region are held to who they say
// served them and to the bound they asked.
func TestCheckNearReads(t *testing.T) {
	near := func(node, servedBy string, ask []string, stale int64) *Op {
		op := rd(RegRead, "a", 0, 10, 20)
		op.Node, op.ServedBy, op.Ask, op.Staleness = node, servedBy, ask, stale
		return op
	}
	max100 := []string{"Fenec-Max-Staleness", "100"}
	after := []string{"Fenec-After", "3", "Fenec-History", "h1"}
	for _, tc := range []struct {
		name string
		op   *Op
		bad  bool
	}{
		{"the copy within the bound", near("us1", "copy", max100, 80), false},
		{"the primary, fresh", near("eu1", "primary", max100, 0), false},
		{"the copy after a seq", near("us1", "copy", after, 700), false},
		{"no bound, no served-by", near("eu1", "", nil, 0), false},
		{"a copy answer from a node without one", near("eu2", "copy", max100, 10), true},
		{"a primary answer from the read copy", near("us1", "primary", max100, 0), true},
		{"no served-by", near("eu1", "", max100, 0), true},
		{"an unknown served-by", near("us1", "replica", after, 0), true},
		{"over the bound asked", near("us1", "copy", max100, 101), true},
		{"unbounded though a bound was asked", near("eu1", "primary", max100, Unbounded), true},
		{"no staleness stated", near("us1", "copy", after, NoBound), true},
		{"served-by on a read stating nothing", near("eu1", "primary", nil, 0), true},
	} {
		h := hist(tc.op)
		h.ReadCopies["a"] = []string{"us1"}
		ops, _ := h.Snapshot()
		got := checkNearReads(h, ops)
		if (len(got) > 0) != tc.bad {
			t.Errorf("%s: found %v, want an anomaly %v", tc.name, got, tc.bad)
		}
	}
}
