package lease

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// kept is how many of its last answers a node remembers.
const kept = 16

// answerKey names one grant exactly: an ack from another router or another
// term can never match it.
type answerKey struct {
	router string
	term   uint64
	n      uint64
}

// answered is the boot-clock moment the node answered one grant.
type answered struct {
	key answerKey
	at  time.Duration
	ok  bool // the slot holds an answer
}

// grantID is where a lease came from: the grant taken whole last.
type grantID struct {
	router string
	term   uint64
	epoch  uint64
	ack    uint64
	n      uint64
}

// Binding is which directory leases a node: the directory's name, the
// epoch of the node's region the node was leased at (it moves on each time
// the leasing changes hands), and the highest term the node took from that
// directory. A node never leased has the zero Binding. It is kept on disk
// (TermFile) and read back at start.
type Binding struct {
	Dir   string `json:"dir"`
	Epoch uint64 `json:"epoch"`
	Term  uint64 `json:"term"`
}

// NodeLease is a node's lease: the grants it answered, the lease it runs
// and the tenants it names. Every method takes the boot-clock moment it
// acts at (BootClock in the node, a ManualClock in tests). Safe for
// concurrent use.
type NodeLease struct {
	persist func(Binding) error // writes the binding durably

	mu      sync.Mutex
	bound   Binding           // guarded by mu: the directory leasing the node, its epoch, the highest term taken
	answers [kept]answered    // guarded by mu: ring of the last answers
	next    int               // guarded by mu: ring slot the next answer goes to
	from    grantID           // guarded by mu: grant taken whole last
	hasFrom bool              // guarded by mu: from is set
	leased  bool              // guarded by mu: a lease was run (start, end valid)
	start   time.Duration     // guarded by mu: lease runs from here
	end     time.Duration     // guarded by mu: until here (exclusive)
	ms      int64             // guarded by mu: lease length of the last grant taken
	tenants []string          // guarded by mu: sorted list the lease names
	inStep  []string          // guarded by mu: sorted, of tenants: copy in step
	behind  map[string]uint64 // guarded by mu: of tenants: copy behind, asked at
	replica map[string]string // guarded by mu: of tenants: the replica's node
	listID  string            // guarded by mu: id of tenants ("" before any)
	ranBy   string            // guarded by mu: router whose grant last ran a lease
	// ranList: the lease held (start, end) ran with tenants as its list,
	// so each of them was writable until end. Guarded by mu.
	ranList bool
	// stopped: tenant -> the moment a grant taken stopped it being
	// writable (left it out of the list, or ended the lease that named it
	// before its end), for tenants not writable since. Guarded by mu.
	stopped map[string]time.Duration
}

// NewNodeLease returns a node's lease state holding no lease, bound as b
// says (read back from where persist writes it; the zero Binding on a new
// node). persist is called with the binding a grant moves to — a higher
// term, a higher epoch, another directory — before the node takes it; when
// it fails, the grant is refused. A nil persist keeps it in memory only.
func NewNodeLease(b Binding, persist func(Binding) error) *NodeLease {
	return &NodeLease{bound: b, persist: persist}
}

// Handle judges grant g, answered by the node at boot-clock moment now, and
// says what it took. It refuses a grant of another directory than the one
// the node is bound to unless the grant carries a handoff from that
// directory (*DirectoryError, as it does a grant of an earlier epoch), a
// grant past the bounds (*BoundError: an epoch more than EpochMargin past
// the node's, a term or epoch past MaxNumber), and a lower term than the
// highest taken from its directory (*TermError); it
// persists the binding a grant moves to before taking it, and refuses a
// grant it would take that carries no list while naming a list the node
// does not hold (ErrNeedsList). Every grant answered 200 is kept (with now)
// so a later grant can acknowledge it.
func (l *NodeLease) Handle(now time.Duration, g Grant) (Answer, error) {
	a, _, err := l.Judge(now, g)
	return a, err
}

// Judge is Handle, also saying the binding the node held before the grant
// (the node audits every grant that changes it).
func (l *NodeLease) Judge(now time.Duration, g Grant) (Answer, Binding, error) {
	if err := g.Validate(); err != nil {
		return Answer{}, Binding{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	was := l.bound
	a, err := l.handleLocked(now, g)
	return a, was, err
}

// handleLocked is Handle with l.mu held.
func (l *NodeLease) handleLocked(now time.Duration, g Grant) (Answer, error) {
	next, handed, err := l.bindLocked(g)
	if err != nil {
		return Answer{}, err
	}
	if next != l.bound {
		if l.persist != nil {
			if err := l.persist(next); err != nil {
				return Answer{}, fmt.Errorf("persist binding %+v: %w", next, err)
			}
		}
		l.bound = next
	}
	took := !l.runningLocked(now) || handed || l.newerLocked(g)
	if took {
		if g.Tenants == nil && g.List != l.listID {
			return Answer{}, ErrNeedsList
		}
		l.takeLocked(now, g)
	}
	l.keepLocked(now, g)
	return Answer{
		Took:   took,
		Ran:    l.ranBy == g.Router,
		N:      g.N,
		Term:   l.bound.Term,
		LeftMS: l.leftLocked(now).Milliseconds(),
		Dir:    l.bound.Dir,
		Epoch:  l.bound.Epoch,
	}, nil
}

// bindLocked judges g's directory and epoch against the node's binding:
// the binding after g, whether g hands the node to another directory (it
// is then newer than any grant before it), or the refusal.
//
//   - From the node's own directory: an earlier epoch is refused (a leaser
//     of an era since ended), a lower term too (a deposed router); a
//     higher epoch or term moves the binding on.
//   - A node never bound takes a grant its term allows, or one that
//     carries a handoff, and binds to its directory.
//   - From another directory: only with a handoff from the node's own
//     directory, at a higher epoch, given at a term no lower than the
//     node's highest from it (unless forced). Never because a number is
//     higher.
func (l *NodeLease) bindLocked(g Grant) (next Binding, handed bool, err error) {
	b := l.bound
	refuse := &DirectoryError{Dir: b.Dir, Epoch: b.Epoch, Term: b.Term}
	if err := l.boundedLocked(g); err != nil {
		return b, false, err
	}
	switch {
	case g.Dir == b.Dir:
		switch {
		case g.Epoch < b.Epoch:
			return b, false, refuse
		case g.Term < b.Term:
			return b, false, &TermError{Highest: b.Term}
		}
		return Binding{Dir: b.Dir, Epoch: g.Epoch, Term: g.Term}, false, nil
	case b.Dir == "":
		if g.Handoff == nil && g.Term < b.Term {
			return b, false, &TermError{Highest: b.Term}
		}
		return Binding{Dir: g.Dir, Epoch: g.Epoch, Term: g.Term}, true, nil
	}
	h := g.Handoff
	if h == nil || h.From != b.Dir || g.Epoch <= b.Epoch || (!h.Force && h.Term < b.Term) {
		return b, false, refuse
	}
	return Binding{Dir: g.Dir, Epoch: g.Epoch, Term: g.Term}, true, nil
}

// boundedLocked refuses a grant whose term or epoch is past MaxNumber, or
// whose epoch is more than EpochMargin past the one the node is bound at:
// no leaser moves a region's epoch on so far while a node was away, and a
// grant that did would leave the node refusing every leaser of its region
// (and, at the largest number, wrap the next epoch to zero). A node bound
// to no directory yet knows no epoch: only MaxNumber bounds its first.
func (l *NodeLease) boundedLocked(g Grant) error {
	b := l.bound
	asked := g.Epoch
	switch {
	case g.Term > MaxNumber:
		asked = g.Term
	case b.Dir == "" && g.Epoch <= MaxNumber, EpochWithin(b.Epoch, g.Epoch):
		return nil
	}
	return &BoundError{Dir: b.Dir, Epoch: b.Epoch, Term: b.Term, Asked: asked}
}

// runningLocked: a lease runs at now.
func (l *NodeLease) runningLocked(now time.Duration) bool {
	return l.leased && now >= l.start && now < l.end
}

// newerLocked: g, from the directory the node is bound to, is newer than
// the grant the lease came from. A higher term or epoch is newer; another
// router at the same term is not; the same router's grant is newer by its
// ack, then by its number.
func (l *NodeLease) newerLocked(g Grant) bool {
	f := l.from
	switch {
	case !l.hasFrom || g.Term > f.term || g.Epoch > f.epoch:
		return true
	case g.Term < f.term || g.Epoch < f.epoch || g.Router != f.router:
		return false
	case g.Ack != f.ack:
		return g.Ack > f.ack
	}
	return g.N > f.n
}

// takeLocked takes g whole: its list if it carries one, and its lease,
// which runs from the moment the node answered grant g.Ack (none when that
// answer is not kept), possibly cutting a running lease short.
func (l *NodeLease) takeLocked(now time.Duration, g Grant) {
	was, wasRan, wasEnd := l.tenants, l.ranList, l.end
	l.setLocked(now, g)
	l.noteStoppedLocked(now, was, wasRan, wasEnd, g.Tenants != nil)
}

// setLocked takes g's list, if it carries one, and its lease.
func (l *NodeLease) setLocked(now time.Duration, g Grant) {
	if g.Tenants != nil {
		l.tenants = slices.Compact(slices.Sorted(slices.Values(g.Tenants)))
		l.inStep = slices.Compact(slices.Sorted(slices.Values(g.InStep)))
		l.behind = maps.Clone(g.Behind)
		l.replica = maps.Clone(g.Replicas)
		l.listID = g.List
	}
	l.from = grantID{router: g.Router, term: g.Term, epoch: g.Epoch, ack: g.Ack, n: g.N}
	l.hasFrom = true
	l.ms = g.MS
	at, ok := l.answeredLocked(answerKey{router: g.Router, term: g.Term, n: g.Ack})
	if !ok {
		l.leased, l.ranList = false, false
		return
	}
	l.leased = true
	l.start = at
	l.end = at + time.Duration(g.MS)*time.Millisecond
	l.ranList = l.runningLocked(now)
	if l.ranList {
		l.ranBy = g.Router
	}
}

// noteStoppedLocked records, as a grant is taken at now, the tenants the
// lease it replaces let write (was, when wasRan: until wasEnd, or now if
// that is sooner) that the lease taken no longer does. Nothing to look
// at when a running lease is renewed over the same list.
func (l *NodeLease) noteStoppedLocked(now time.Duration, was []string, wasRan bool, wasEnd time.Duration, newList bool) {
	running := l.runningLocked(now)
	if running && wasRan && !newList {
		return // the same list renewed: nothing stopped
	}
	if running {
		for _, t := range l.tenants {
			delete(l.stopped, t) // writable again
		}
	}
	if !wasRan {
		return
	}
	at := min(now, wasEnd)
	for _, t := range was {
		if _, listed := slices.BinarySearch(l.tenants, t); running && listed {
			continue
		}
		if l.stopped == nil {
			l.stopped = map[string]time.Duration{}
		}
		l.stopped[t] = max(l.stopped[t], at)
	}
}

// WritableUntil says how tenant stands at now on this node: writable (the
// lease runs and names it), or the latest moment it is known to have been
// writable here — when the lease that named it ran out, or when a grant
// taken left it out or ended that lease early. known is false when no
// lease has let it write since the node started. Nothing else may take
// the tenant's writes before that moment (a router fails a node over only
// once its lease has lapsed, and places a tenant elsewhere only once the
// node took a list without it), which is what a read of the node's file
// may claim as its freshness.
func (l *NodeLease) WritableUntil(now time.Duration, tenant string) (until time.Duration, writable, known bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, listed := slices.BinarySearch(l.tenants, tenant)
	switch {
	case listed && l.runningLocked(now):
		return now, true, true
	case listed && l.ranList:
		return l.end, false, true // it ran with this list and lapsed
	}
	at, ok := l.stopped[tenant]
	return at, false, ok
}

// answeredLocked finds when the node answered grant k (the earliest, should
// one have been answered twice).
func (l *NodeLease) answeredLocked(k answerKey) (time.Duration, bool) {
	if k.n == 0 {
		return 0, false
	}
	var at time.Duration
	found := false
	for _, a := range l.answers {
		if a.ok && a.key == k && (!found || a.at < at) {
			at, found = a.at, true
		}
	}
	return at, found
}

// keepLocked remembers that the node answered g at now, forgetting the
// oldest of the kept answers.
func (l *NodeLease) keepLocked(now time.Duration, g Grant) {
	l.answers[l.next] = answered{key: answerKey{router: g.Router, term: g.Term, n: g.N}, at: now, ok: true}
	l.next = (l.next + 1) % kept
}

// leftLocked is what is left of the lease at now.
func (l *NodeLease) leftLocked(now time.Duration) time.Duration {
	if !l.runningLocked(now) {
		return 0
	}
	return l.end - now
}

// Writable says whether tenant may take a write at now: the lease runs and
// names it. When it may not, retryAfter is how long a client should wait
// before trying again (about a round of grants). The node asks as a write
// lands and again as it is answered.
func (l *NodeLease) Writable(now time.Duration, tenant string) (ok bool, retryAfter time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.runningLocked(now) {
		if _, found := slices.BinarySearch(l.tenants, tenant); found {
			return true, 0
		}
	}
	retry := time.Second
	if round := time.Duration(l.ms) * time.Millisecond / 3; round > retry {
		retry = round
	}
	return false, retry
}

// Length is the length of the lease the last grant taken gave (0 before
// any): what a lease runs for from the node's answer.
func (l *NodeLease) Length() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Duration(l.ms) * time.Millisecond
}

// CopyStep is how the list a node holds has one tenant's copy.
type CopyStep struct {
	// InStep: a write on the tenant waits for its replica, however long,
	// until a later list says otherwise.
	InStep bool
	// Behind: the directory records the replica behind, asked at At.
	Behind bool
	At     uint64
	// Replica is the replica's node ("": any copy counts).
	Replica string
}

// Step says how the list the node holds has tenant's copy. Neither in
// step nor behind: the directory counts on no copy of it.
func (l *NodeLease) Step(tenant string) CopyStep {
	l.mu.Lock()
	defer l.mu.Unlock()
	var s CopyStep
	_, s.InStep = slices.BinarySearch(l.inStep, tenant)
	s.At, s.Behind = l.behind[tenant]
	s.Replica = l.replica[tenant]
	return s
}

// BehindList is the tenants the list the node holds has a copy behind of.
func (l *NodeLease) BehindList() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Sorted(maps.Keys(l.behind))
}

// Status is the node's lease as GET /_admin/lease shows it.
type Status struct {
	Term    uint64            `json:"term"`    // highest term taken from Dir
	Dir     string            `json:"dir"`     // the directory leasing the node ("": none yet)
	Epoch   uint64            `json:"epoch"`   // the epoch it leases the node at
	N       uint64            `json:"n"`       // number of the grant taken last
	Router  string            `json:"router"`  // router of that grant
	Tenants []string          `json:"tenants"` // the list the lease names
	LeftMS  int64             `json:"left_ms"` // what is left of the lease
	Ran     bool              `json:"ran"`     // that router's grant has run a lease
	List    string            `json:"list"`    // id of the list
	InStep  []string          `json:"in_step"` // of the list: copy in step
	Behind  map[string]uint64 `json:"behind"`  // of the list: copy behind, asked at
	// Replicas: of the list, each tenant's replica node.
	Replicas map[string]string `json:"replicas"`
}

// Status reports the lease at now.
func (l *NodeLease) Status(now time.Duration) Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := Status{
		Term:     l.bound.Term,
		Dir:      l.bound.Dir,
		Epoch:    l.bound.Epoch,
		Tenants:  slices.Clone(l.tenants),
		LeftMS:   l.leftLocked(now).Milliseconds(),
		List:     l.listID,
		InStep:   slices.Clone(l.inStep),
		Behind:   maps.Clone(l.behind),
		Replicas: maps.Clone(l.replica),
	}
	for _, p := range []*[]string{&s.Tenants, &s.InStep} {
		if *p == nil {
			*p = []string{}
		}
	}
	if s.Behind == nil {
		s.Behind = map[string]uint64{}
	}
	if s.Replicas == nil {
		s.Replicas = map[string]string{}
	}
	if l.hasFrom {
		s.N, s.Router = l.from.n, l.from.router
		s.Ran = l.ranBy == l.from.router
	}
	return s
}

// HighestTerm is the highest term the node has taken from the directory it
// is bound to.
func (l *NodeLease) HighestTerm() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bound.Term
}

// Bound is the node's binding: which directory leases it, at which epoch
// and term.
func (l *NodeLease) Bound() Binding {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bound
}
