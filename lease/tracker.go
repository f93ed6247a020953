package lease

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"time"
)

// Leases are the lease lengths a router works with.
type Leases struct {
	// Own is the router's own lease (--auto-failover).
	Own time.Duration
	// Record is the directory's longest-lease record as the router knows
	// it: the longest lease a router leasing from the directory may have
	// granted. 0 when there is none.
	Record time.Duration
	// Grant is the lease the router grants: Own, or the record when the
	// record is shorter and could not be raised.
	Grant time.Duration
}

// Counted is the lease the router counts a node by: the record until the
// node said it ran a lease from this router's grants (or the router's own
// where there is no record), then its own.
func (ls Leases) Counted(ran bool) time.Duration {
	if ran || ls.Record == 0 {
		return ls.Own
	}
	return ls.Record
}

// Lapse is how long after the last answer a node is failed over: the
// counted lease and a tenth.
func (ls Leases) Lapse(ran bool) time.Duration {
	c := ls.Counted(ran)
	return c + c/10
}

// NodeTerms are what a router's grants to one node say of who leases it,
// and how the router counts a node it took over from another directory.
type NodeTerms struct {
	// Epoch is the leasing epoch of the node's region.
	Epoch uint64
	// Handoff, when the router's directory took the node's region over,
	// is the handoff its grants carry (see Grant.Handoff).
	Handoff *Handoff
	// Floor: until the node says it ran one of this router's leases, it is
	// counted by at least this lease (the longest the giver may have
	// granted).
	Floor time.Duration
	// MustRun: the node is failed over only once it has run a lease from
	// this router's grants, and not before Floor and a tenth from when it
	// was added. A region that took its leasing by force cannot know that
	// a node it never reached is not still renewed by the global tier.
	MustRun bool
}

// Tracker is the router's view of one node's lease: the numbers it sent,
// what came back, and when the node has certainly lost its lease. It is
// pure (time passed in) and not safe for concurrent use; the Leaser
// guards it.
type Tracker struct {
	node   string
	router string
	term   uint64
	leases Leases

	next        uint64        // number of the next grant
	outstanding int           // grants sent and neither answered nor given up on
	ack         uint64        // newest number whose answer came back in time
	lastAnswer  time.Duration // router's moment the last answer came back
	lastSent    time.Duration // router's moment the last grant went out
	sentAny     bool          // a grant went out
	ran         bool          // the node said ran in its last answer
	leftMS      int64         // left_ms of the last answer
	answeredAny bool          // an answer came back

	list     []string          // tenants the node should hold
	inStep   []string          // of list: the copy is in step
	behind   map[string]uint64 // of list: the copy is behind, asked at
	replicas map[string]string // of list: each tenant's replica node
	listID   string            // id of list with its copies' steps
	nodeList string            // id of the list the node is known to hold
	sendList bool              // the node asked for the list

	needNow bool   // send a grant at once
	noLease bool   // the node takes no lease
	fenced  bool   // the node holds a higher term
	highest uint64 // that term
	// doubted: the router's directory showed the router's term standing
	// when the node said it held a higher one, so the node's word is not
	// believed: its refusals by term count as for another binding.
	doubted bool

	dir       string          // the router's directory, named in every grant
	terms     NodeTerms       // the node's epoch, handoff and counting
	notBefore time.Duration   // with terms.MustRun: no lapse before this moment
	ranAny    bool            // the node said ran in some answer
	elsewhere *DirectoryError // the node is leased by another directory
	legacy    bool            // the node is from before directories: grants name none
}

// NewTracker starts tracking node for router at term, counting the node as
// granted at now (the router's first round): its predecessor may have
// granted a lease just before it stopped, so the lapse is measured from
// now with the record's lease until the node says it ran one of ours.
func NewTracker(node, router string, term uint64, leases Leases, now time.Duration) *Tracker {
	return &Tracker{
		node:       node,
		router:     router,
		term:       term,
		leases:     leases,
		next:       1,
		lastAnswer: now,
		listID:     ListID(nil),
		list:       []string{},
	}
}

// Node is the node tracked.
func (t *Tracker) Node() string { return t.node }

// SetDir names the directory the router leads, named in every grant.
func (t *Tracker) SetDir(dir string) { t.dir = dir }

// SetStart numbers the next grant n (a node leased again by the same
// router goes on from the numbers it was sent before: a number never
// names two grants).
func (t *Tracker) SetStart(n uint64) { t.next = max(n, 1) }

// SetTerms sets the node's epoch, handoff and counting, at now. A node
// that refused this router's grants for another directory is granted
// again under the new terms.
func (t *Tracker) SetTerms(nt NodeTerms, now time.Duration) {
	t.terms = nt
	t.elsewhere = nil
	t.notBefore = 0
	if nt.MustRun {
		t.notBefore = now + nt.Floor + nt.Floor/10
	}
}

// Terms are the node's terms.
func (t *Tracker) Terms() NodeTerms { return t.terms }

// Elsewhere is the refusal of a node leased by another directory (nil
// when it has not refused so since it last took a grant).
func (t *Tracker) Elsewhere() *DirectoryError { return t.elsewhere }

// Counted is the lease the router counts the node by: Leases.Counted, and
// at least the terms' floor until the node ran one of this router's
// leases.
func (t *Tracker) Counted() time.Duration {
	c := t.leases.Counted(t.ran)
	if !t.ran {
		c = max(c, t.terms.Floor)
	}
	return c
}

// SetLeases changes the lease lengths (the record raised or lowered).
func (t *Tracker) SetLeases(ls Leases) { t.leases = ls }

// Leases are the lease lengths in use.
func (t *Tracker) Leases() Leases { return t.leases }

// SetTenants sets the list the node should hold, with no copy in step or
// behind; the next grant carries it when it differs from the list the
// node holds.
func (t *Tracker) SetTenants(tenants []string) { t.SetList(List{Tenants: tenants}) }

// SetList sets the list the node should hold with its copies' steps.
func (t *Tracker) SetList(l List) {
	sorted := func(names []string) []string {
		return slices.Compact(slices.Sorted(slices.Values(names)))
	}
	t.list, t.inStep, t.behind = sorted(l.Tenants), sorted(l.InStep), maps.Clone(l.Behind)
	t.replicas = maps.Clone(l.Replicas)
	if t.list == nil {
		t.list = []string{}
	}
	t.listID = listID(t.list, t.inStep, t.behind, t.replicas)
}

// Tenants is the list the node should hold.
func (t *Tracker) Tenants() []string { return slices.Clone(t.list) }

// Next numbers the next grant, sent at now, acknowledging the newest grant
// whose answer came back in time, and carrying the list when it changed
// since the node took one or the node asked for it.
func (t *Tracker) Next(now time.Duration) Grant {
	g := Grant{
		Term:    t.term,
		Router:  t.router,
		N:       t.next,
		Ack:     t.ack,
		MS:      max(t.leases.Grant.Milliseconds(), 1),
		List:    t.listID,
		Dir:     t.dir,
		Epoch:   t.terms.Epoch,
		Handoff: t.terms.Handoff,
	}
	if t.legacy {
		g.Dir, g.Epoch, g.Handoff = "", 0, nil
	}
	if t.sendList || t.nodeList != t.listID {
		g.Tenants = append([]string{}, t.list...) // never nil: nil means "unchanged"
		g.InStep, g.Behind, g.Replicas = slices.Clone(t.inStep), maps.Clone(t.behind), maps.Clone(t.replicas)
	}
	t.next++
	t.outstanding++
	t.needNow = false
	t.lastSent, t.sentAny = now, true
	return g
}

// Answered counts the answer to g that came back in time at now. An answer
// that came back after the router gave up on the call is not in time:
// call GaveUp for it instead.
func (t *Tracker) Answered(now time.Duration, g Grant, a Answer) {
	t.outstanding--
	t.ack = max(t.ack, g.N)
	t.lastAnswer = max(t.lastAnswer, now)
	t.answeredAny = true
	t.ran = a.Ran
	t.ranAny = t.ranAny || a.Ran
	t.leftMS = a.LeftMS
	t.noLease = false
	t.elsewhere = nil
	if !a.Took {
		// Not newer than the grant the node's lease came from: send the
		// one acknowledging this answer at once, with the list.
		t.needNow, t.sendList = true, true
		return
	}
	t.nodeList = g.List
	if g.Tenants != nil {
		t.sendList = false
	}
	if a.LeftMS <= 0 {
		// Taken for its list but runs no lease: the node needs a second
		// grant, acknowledging this one.
		t.needNow = true
	}
}

// GaveUp counts a grant the router stopped waiting for (the call failed or
// outlasted its bound): it counts nothing else.
func (t *Tracker) GaveUp(g Grant) {
	t.outstanding--
}

// Refused counts a grant the node refused: ErrNeedsList has the next grant
// carry the list at once; ErrTakesNoLease marks a node that is never
// failed over; a *TermError marks the node fenced against this router (it
// took a higher term), after which the router judges no lapse for it; a
// *DirectoryError (or a *BoundError) marks it refusing this router's
// grants for another binding: it is not granted again at once, and it is
// counted as a node that does not answer — it lapses and is failed over
// like one, so one node's binding, forged or not, costs that node alone.
// Any other error counts as GaveUp.
func (t *Tracker) Refused(g Grant, err error) {
	t.outstanding--
	var te *TermError
	var de *DirectoryError
	var be *BoundError
	switch {
	case errors.As(err, &be):
		t.elsewhere = &DirectoryError{Dir: be.Dir, Epoch: be.Epoch, Term: be.Term}
	case errors.As(err, &de):
		t.elsewhere = de
	case errors.Is(err, ErrBadGrant) && !t.legacy && fromBeforeDirectories(err):
		t.legacy, t.needNow = true, true
	case errors.Is(err, ErrNeedsList):
		t.sendList, t.needNow = true, true
	case errors.Is(err, ErrTakesNoLease):
		t.noLease = true
	case errors.As(err, &te) && t.doubted:
		t.highest = te.Highest
		t.elsewhere = &DirectoryError{Dir: t.dir, Epoch: t.terms.Epoch, Term: te.Highest}
	case errors.As(err, &te):
		t.fenced, t.highest = true, te.Highest
	}
}

// Doubt has the router disbelieve the node's word that it took a higher
// term than the router's: the router's own directory shows the router's
// term standing, and a node holds no term its directory never reached
// unless a grant was forged (the admin token stolen, or the node
// compromised). The node is no longer fenced: it and each later refusal
// of it by term count as a refusal for another binding — it lapses as a
// node that does not answer, and costs that node alone.
func (t *Tracker) Doubt() {
	t.doubted = true
	if t.fenced {
		t.fenced = false
		t.elsewhere = &DirectoryError{Dir: t.dir, Epoch: t.terms.Epoch, Term: t.highest}
	}
}

// fromBeforeDirectories says whether a node refused a grant as malformed
// for naming a directory, an epoch or a handoff: a node from before them,
// whose decoder knows no such field.
func fromBeforeDirectories(err error) bool {
	msg := err.Error()
	for _, f := range []string{`"dir"`, `"epoch"`, `"handoff"`} {
		if strings.Contains(msg, "unknown field "+f) {
			return true
		}
	}
	return false
}

// Legacy: the node is from before directories, and leased with grants
// that name none (see Grant.Dir): it compares terms alone, so it cannot
// be handed to another directory safely until it is upgraded.
func (t *Tracker) Legacy() bool { return t.legacy }

// Outstanding is how many grants are out, neither answered nor given up.
func (t *Tracker) Outstanding() int { return t.outstanding }

// NeedsGrantNow: the next grant should go at once, not at the next round:
// the node answered took=false, asked for the list, or holds no lease.
func (t *Tracker) NeedsGrantNow() bool {
	return t.needNow && !t.noLease && !t.fenced && t.elsewhere == nil
}

// LapseAt is the router's moment from which the node counts as lapsed if
// no answer comes back before: the last answer plus the counted lease and
// a tenth.
func (t *Tracker) LapseAt() time.Duration {
	c := t.Counted()
	return max(t.lastAnswer+c+c/10, t.notBefore)
}

// Lapsed says the node has certainly lost its lease at now: no grant to it
// is outstanding, and now is at least the counted lease and a tenth past
// the last answer that came back. A node that takes no lease and one that
// took a higher term than this router's never lapse; under MustRun,
// neither does one that has not yet run a lease of this router's. One
// that refuses for another directory's binding lapses as one that does
// not answer.
func (t *Tracker) Lapsed(now time.Duration) bool {
	if t.noLease || t.fenced || t.outstanding > 0 {
		return false
	}
	if t.terms.MustRun && !t.ranAny {
		return false
	}
	return now >= t.LapseAt()
}

// NextN is the number the next grant will carry.
func (t *Tracker) NextN() uint64 { return t.next }

// TakesLease: the node has not said it takes no lease.
func (t *Tracker) TakesLease() bool { return !t.noLease }

// Fenced reports that the node took a higher term than this router's, and
// which.
func (t *Tracker) Fenced() (bool, uint64) { return t.fenced, t.highest }

// Ran: the node said, in its last answer, that it has run a lease from one
// of this router's grants.
func (t *Tracker) Ran() bool { return t.ran }

// LastAnswer is the router's moment the last answer came back (the first
// round's moment until one has).
func (t *Tracker) LastAnswer() time.Duration { return t.lastAnswer }

// LastSent is the router's moment the last grant went out, and whether
// one has.
func (t *Tracker) LastSent() (time.Duration, bool) { return t.lastSent, t.sentAny }

// Ack is the newest number whose answer came back in time.
func (t *Tracker) Ack() uint64 { return t.ack }

// LeftMS is what the node said was left of its lease in its last answer.
func (t *Tracker) LeftMS() int64 { return t.leftMS }
