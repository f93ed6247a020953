package history

import (
	"fmt"
	"math"
	"slices"

	"github.com/anishathalye/porcupine"
)

// The models porcupine checks each object of a tenant against. A
// history is linearizable if and only if each object's is (locality), so
// each object — a tenant's register, each of its lists, its counter — is
// a partition of its own.

// regIn is an operation on the register: a read, or a write of v.
type regIn struct {
	write bool
	v     int64
}

// registerModel is an integer register starting at 0.
var registerModel = porcupine.Model{
	Init: func() any { return int64(0) },
	Step: func(state, input, output any) (bool, any) {
		in := input.(regIn)
		if in.write {
			return true, in.v
		}
		return output.(int64) == state.(int64), state
	},
	DescribeOperation: func(input, output any) string {
		in := input.(regIn)
		if in.write {
			return fmt.Sprintf("write(%d)", in.v)
		}
		return fmt.Sprintf("read() -> %d", output)
	},
}

// listState is a list by its length and a hash of its elements in
// order: appends and reads are then O(1) steps, and states compare by ==.
type listState struct {
	n int
	h uint64
}

func (s listState) with(e int64) listState {
	return listState{n: s.n + 1, h: (s.h ^ uint64(e)) * 1099511628211}
}

// stateOf is the state a read of l shows.
func stateOf(l []int64) listState {
	s := listState{h: 14695981039346656037}
	for _, e := range l {
		s = s.with(e)
	}
	return s
}

// listIn is an append of e, or a read.
type listIn struct {
	read bool
	e    int64
}

// listModel is an append-only list starting empty.
var listModel = porcupine.Model{
	Init: func() any { return stateOf(nil) },
	Step: func(state, input, output any) (bool, any) {
		in := input.(listIn)
		if !in.read {
			return true, state.(listState).with(in.e)
		}
		return output.(listState) == state.(listState), state
	},
	DescribeOperation: func(input, output any) string {
		in := input.(listIn)
		if !in.read {
			return fmt.Sprintf("append(%d)", in.e)
		}
		return fmt.Sprintf("read() -> %d elements", output.(listState).n)
	},
}

// setState is a list by its elements alone: how many, and a sum of
// their hashes, which no order of appends changes.
type setState struct {
	n int
	h uint64
}

func (s setState) with(e int64) setState {
	x := uint64(e) * 0x9e3779b97f4a7c15 // a mix, so that sums of small ids do not collide
	x ^= x >> 29
	return setState{n: s.n + 1, h: s.h + x*0xbf58476d1ce4e5b9}
}

func setOf(l []int64) setState {
	var s setState
	for _, e := range l {
		s = s.with(e)
	}
	return s
}

// setModel is an append-only list judged by which elements a read
// shows, not their order. Appends of two clients that overlap in time
// then leave one state whichever was first, so porcupine's cache holds a
// history of clients appending at once to a few states per step, where
// listModel's would hold one per order of them (2^n for n overlapping
// pairs). A read missing an append acknowledged before it was sent, or
// showing one never made or one twice, is still not linearizable;
// CheckLists holds the order.
var setModel = porcupine.Model{
	Init: func() any { return setState{} },
	Step: func(state, input, output any) (bool, any) {
		in := input.(listIn)
		if !in.read {
			return true, state.(setState).with(in.e)
		}
		return output.(setState) == state.(setState), state
	},
	DescribeOperation: func(input, output any) string {
		in := input.(listIn)
		if !in.read {
			return fmt.Sprintf("append(%d)", in.e)
		}
		return fmt.Sprintf("read() -> %d elements", output.(setState).n)
	},
}

// cntIn is an increment or a read of the counter.
type cntIn struct{ incr bool }

// cntModel is a counter starting at 0. An increment answers the value it
// made; one whose answer never came (output nil) makes one all the same
// if it is linearized at all.
var cntModel = porcupine.Model{
	Init: func() any { return int64(0) },
	Step: func(state, input, output any) (bool, any) {
		s := state.(int64)
		if input.(cntIn).incr {
			return output == nil || output.(int64) == s+1, s + 1
		}
		return output.(int64) == s, s
	},
	DescribeOperation: func(input, output any) string {
		if input.(cntIn).incr {
			if output == nil {
				return "incr() -> ?"
			}
			return fmt.Sprintf("incr() -> %d", output)
		}
		return fmt.Sprintf("read() -> %d", output)
	},
}

// Object names the partition an operation belongs to: a tenant's
// register, one of its lists, its counter.
func Object(op *Op) string {
	switch op.Kind {
	case RegWrite, RegRead:
		return op.Tenant + "/reg"
	case ListAppend, ListRead:
		return op.Tenant + "/log/" + op.Key
	default:
		return op.Tenant + "/cnt"
	}
}

// porcupineOps turns the operations of one object into porcupine's,
// with the model to check them by. A read or a refused write had no
// effect and is left out; a write whose outcome is unknown never
// returned. It gives back, beside each operation, the Op it came from.
// Lists are checked by listModel, or by setModel when bySet.
func porcupineOps(ops []*Op, bySet bool) (porcupine.Model, []porcupine.Operation, []*Op) {
	var model porcupine.Model
	var out []porcupine.Operation
	var from []*Op
	for _, op := range ops {
		if op.Outcome == Fail || (!op.Kind.Write() && op.Outcome != OK) {
			continue
		}
		if !op.Kind.Write() && op.Staleness != 0 && op.Staleness != NoBound {
			continue // it says how old it may be: checkStaleness holds it to that
		}
		p := porcupine.Operation{ClientId: op.Client, Call: op.Call, Return: op.Return}
		if op.Outcome == Unknown {
			p.Return = math.MaxInt64
		}
		switch op.Kind {
		case RegWrite:
			model, p.Input, p.Output = registerModel, regIn{write: true, v: op.Value}, int64(0)
		case RegRead:
			model, p.Input, p.Output = registerModel, regIn{}, op.Value
		case ListAppend:
			model, p.Input, p.Output = listModel, listIn{e: op.Value}, listState{}
			if bySet {
				model, p.Output = setModel, setState{}
			}
		case ListRead:
			model, p.Input, p.Output = listModel, listIn{read: true}, stateOf(op.List)
			if bySet {
				model, p.Output = setModel, setOf(op.List)
			}
		case Incr:
			model, p.Input = cntModel, cntIn{incr: true}
			if op.Outcome == OK {
				p.Output = op.Value
			}
		case CntRead:
			model, p.Input, p.Output = cntModel, cntIn{}, op.Value
		}
		out = append(out, p)
		from = append(from, op)
	}
	return model, out, from
}

// byObject groups operations by object, each group in call order, the
// objects sorted by name.
func byObject(ops []*Op) ([]string, map[string][]*Op) {
	groups := map[string][]*Op{}
	for _, op := range ops {
		o := Object(op)
		groups[o] = append(groups[o], op)
	}
	names := make([]string, 0, len(groups))
	for o := range groups {
		names = append(names, o)
	}
	slices.Sort(names)
	return names, groups
}
