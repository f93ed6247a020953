package history

import "fmt"

// Kind is what an operation does.
type Kind string

// The operations: a register (reg), append-only lists (log, by key) and
// a counter (cnt), each tenant its own.
const (
	RegWrite   Kind = "reg.write"
	RegRead    Kind = "reg.read"
	ListAppend Kind = "list.append"
	ListRead   Kind = "list.read"
	Incr       Kind = "cnt.incr"
	CntRead    Kind = "cnt.read"
)

// Write says whether k changes state.
func (k Kind) Write() bool { return k == RegWrite || k == ListAppend || k == Incr }

// Staleness values beside a bound in ms.
const (
	NoBound   int64 = -1 // the answer stated none (a write, an older node)
	Unbounded int64 = -2 // it stated "unbounded": nothing bounds how old it is
)

// Missing is what a read of the register answers when its row is gone:
// no state of the register is that.
const Missing = int64(-1)

// Outcome is what became of an operation, as its client can tell.
type Outcome string

const (
	// OK: answered as done.
	OK Outcome = "ok"
	// Fail: refused with nothing done (a 4xx, or a 503 whose refusal
	// says nothing ran).
	Fail Outcome = "fail"
	// Unknown: it may or may not have been done (a 500 "outcome":
	// "unknown", a 502, a timeout, a connection lost); for porcupine it
	// never returned.
	Unknown Outcome = "unknown"
)

// Attempt is one request of an operation (a keyed write is sent again
// until it settles).
type Attempt struct {
	At      int64  `json:"at_ns"`
	Took    int64  `json:"took_ns"`
	Status  int    `json:"status"`
	Node    string `json:"node,omitempty"` // the node that answered (its name)
	History string `json:"history,omitempty"`
	Seq     string `json:"seq,omitempty"`
	Err     string `json:"err,omitempty"`
	Body    string `json:"body,omitempty"` // of an answer that was not a success, cut short
}

// Op is one operation of a history.
type Op struct {
	ID      int     `json:"id"`
	Client  int     `json:"client"`
	Via     string  `json:"via"` // "router:<name>" or "node:<name>"
	Tenant  string  `json:"tenant"`
	Kind    Kind    `json:"kind"`
	Key     string  `json:"key,omitempty"`  // a list's key
	Value   int64   `json:"value"`          // written, appended; an increment's or a read's result
	List    []int64 `json:"list,omitempty"` // a list read
	IdemKey string  `json:"idempotency_key,omitempty"`
	Call    int64   `json:"call_ns"`   // since the history began
	Return  int64   `json:"return_ns"` // of the attempt that settled it
	Outcome Outcome `json:"outcome"`
	// Node and History name who acknowledged a write, Node a read: the
	// node's name (from Fenec-Node) and its file's history.
	Node     string `json:"node,omitempty"`
	History  string `json:"history,omitempty"`
	Seq      uint64 `json:"seq,omitempty"`
	Replayed bool   `json:"replayed,omitempty"`
	Final    bool   `json:"final,omitempty"` // a read-back after the faults healed
	// After, on a read sent with Fenec-After and Fenec-History, is the id
	// of the write (of the same object) it was sent to see; 0 for none.
	After int `json:"after,omitempty"`
	// Staleness is the bound a read's answer stated (Fenec-Staleness-Ms),
	// in ms: every write acknowledged that long before the read reached
	// the node is in it. NoBound when it stated none, Unbounded for
	// "unbounded".
	Staleness int64 `json:"staleness_ms"`
	// ToCopy: the read was sent to the tenant's copy, not its primary.
	ToCopy bool `json:"to_copy,omitempty"`
	// Ask are the headers a read through a router near the far region
	// was sent with (name, value, ...): Fenec-Max-Staleness, or
	// Fenec-After and Fenec-History.
	Ask []string `json:"ask,omitempty"`
	// ServedBy is its answer's Fenec-Served-By ("copy", "primary"; ""
	// for none).
	ServedBy string    `json:"served_by,omitempty"`
	Attempts []Attempt `json:"attempts,omitempty"`
}

func (o *Op) String() string {
	ms := func(ns int64) string { return fmt.Sprintf("%.1fms", float64(ns)/1e6) }
	s := fmt.Sprintf("#%d c%d %s %s %s", o.ID, o.Client, o.Via, o.Tenant, o.Kind)
	if o.Key != "" {
		s += "[" + o.Key + "]"
	}
	switch o.Kind {
	case RegWrite, ListAppend:
		s += fmt.Sprintf("(%d)", o.Value)
	case Incr, RegRead, CntRead:
		if o.Outcome == OK {
			s += fmt.Sprintf(" -> %d", o.Value)
		}
	case ListRead:
		if o.Outcome == OK {
			s += fmt.Sprintf(" -> %d elements, last %v", len(o.List), o.List[max(0, len(o.List)-3):])
		}
	}
	s += fmt.Sprintf(" %s..%s %s", ms(o.Call), ms(o.Return), o.Outcome)
	if o.Node != "" {
		s += " by " + o.Node
	}
	if o.History != "" {
		s += fmt.Sprintf(" history %s seq %d", o.History, o.Seq)
	}
	if o.Replayed {
		s += " (replayed)"
	}
	return s
}
