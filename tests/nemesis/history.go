package nemesis

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/fenec-go/fenec/internal/history"
)

// The operations, their outcomes and attempts are internal/history's,
// which bench/drill records into too.
type (
	Kind    = history.Kind
	Outcome = history.Outcome
	Attempt = history.Attempt
	Op      = history.Op
	Anomaly = history.Anomaly
)

const (
	RegWrite   = history.RegWrite
	RegRead    = history.RegRead
	ListAppend = history.ListAppend
	ListRead   = history.ListRead
	Incr       = history.Incr
	CntRead    = history.CntRead

	NoBound   = history.NoBound
	Unbounded = history.Unbounded

	OK      = history.OK
	Fail    = history.Fail
	Unknown = history.Unknown
)

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
