package nemesis

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// Kind is what an operation does.
type Kind string

// The operations of the workload: a register (reg), append-only lists
// (log, by key) and a counter (cnt), each tenant its own.
const (
	RegWrite   Kind = "reg.write"
	RegRead    Kind = "reg.read"
	ListAppend Kind = "list.append"
	ListRead   Kind = "list.read"
	Incr       Kind = "cnt.incr"
	CntRead    Kind = "cnt.read"
)

// write says whether k changes state.
func (k Kind) write() bool { return k == RegWrite || k == ListAppend || k == Incr }

// Staleness values beside a bound in ms.
const (
	NoBound   int64 = -1 // the answer stated none (a write, an older node)
	Unbounded int64 = -2 // it stated "unbounded": nothing bounds how old it is
)

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

// Op is one operation of the history.
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

// Fault is one fault of the schedule, from when it began to when it
// ended (End 0: it lasted to the heal).
type Fault struct {
	At     int64  `json:"at_ns"`
	End    int64  `json:"end_ns,omitempty"`
	Kind   string `json:"kind"`
	Target string `json:"target"`
	Detail string `json:"detail,omitempty"`
}

// History is one run's record: every operation, every fault, and notes
// the scenario made on the way.
type History struct {
	Scenario string        `json:"scenario"`
	Seed     uint64        `json:"seed"`
	Lease    time.Duration `json:"lease_ns"`
	Began    time.Time     `json:"began"`
	start    time.Time     // monotonic origin of every time in the history

	mu     sync.Mutex
	Ops    []*Op    `json:"ops"`    // guarded by mu
	Faults []*Fault `json:"faults"` // guarded by mu
	Notes  []string `json:"notes"`  // guarded by mu
	// PowerLost names, per node, when it lost power (ns), for the loss a
	// --sync other than always allows.
	PowerLost map[string][]int64 `json:"power_lost,omitempty"` // guarded by mu
	// Damaged names the copies whose file was damaged: tenant → node.
	Damaged map[string][]string `json:"damaged,omitempty"` // guarded by mu
	// KilledIn counts the processes killed in the middle of a handoff or
	// a move, by the state it was seen in ("handoff given", "move
	// copying").
	KilledIn map[string]int `json:"killed_in,omitempty"` // guarded by mu
	// ReadCopies names, per tenant, the nodes its read copies are on.
	ReadCopies map[string][]string `json:"read_copies,omitempty"` // guarded by mu
}

// NewHistory begins a history now.
func NewHistory(scenario string, seed uint64, lease time.Duration) *History {
	now := time.Now()
	return &History{Scenario: scenario, Seed: seed, Lease: lease, Began: now, start: now,
		PowerLost: map[string][]int64{}, Damaged: map[string][]string{}, KilledIn: map[string]int{},
		ReadCopies: map[string][]string{}}
}

// Now is the time since the history began, in ns.
func (h *History) Now() int64 { return int64(time.Since(h.start)) }

// Add records a settled operation and gives it its id.
func (h *History) Add(op *Op) {
	h.mu.Lock()
	defer h.mu.Unlock()
	op.ID = len(h.Ops)
	h.Ops = append(h.Ops, op)
}

// Begin records a fault beginning now; end it with End.
func (h *History) Begin(kind, target, detail string) *Fault {
	f := &Fault{At: h.Now(), Kind: kind, Target: target, Detail: detail}
	h.mu.Lock()
	h.Faults = append(h.Faults, f)
	h.mu.Unlock()
	return f
}

// End records the fault's end now.
func (h *History) End(f *Fault) {
	h.mu.Lock()
	if f.End == 0 {
		f.End = h.Now()
	}
	h.mu.Unlock()
}

// Note records a line of what the scenario saw.
func (h *History) Note(format string, args ...any) {
	line := fmt.Sprintf("%8.3fs ", float64(h.Now())/1e9) + fmt.Sprintf(format, args...)
	h.mu.Lock()
	h.Notes = append(h.Notes, line)
	h.mu.Unlock()
}

// LostPower records node losing power now.
func (h *History) LostPower(node string) {
	h.mu.Lock()
	h.PowerLost[node] = append(h.PowerLost[node], h.Now())
	h.mu.Unlock()
}

// Killed counts a kill in the middle of state.
func (h *History) Killed(state string) {
	h.mu.Lock()
	h.KilledIn[state]++
	h.mu.Unlock()
}

// DamagedCopy records tenant's copy on node damaged.
func (h *History) DamagedCopy(tenant, node string) {
	h.mu.Lock()
	h.Damaged[tenant] = append(h.Damaged[tenant], node)
	h.mu.Unlock()
}

// Snapshot is a copy of the operations and faults, sorted by call.
func (h *History) Snapshot() ([]*Op, []*Fault) {
	h.mu.Lock()
	ops := slices.Clone(h.Ops)
	faults := slices.Clone(h.Faults)
	h.mu.Unlock()
	slices.SortStableFunc(ops, func(a, b *Op) int { return cmp64(a.Call, b.Call) })
	return ops, faults
}

func cmp64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Save writes the history as JSON to dir/history.json.
func (h *History) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	h.mu.Lock()
	b, err := json.MarshalIndent(h, "", " ")
	h.mu.Unlock()
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "history.json"), b, 0o644)
}

// Load reads a history Save wrote.
func Load(path string) (*History, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var h History
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &h, nil
}
