package lead_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/region/lead"
)

// dir is an in-memory directory and a watcher over it, closed at the
// test's end.
type dir struct {
	mem *global.Memory
	w   *global.Watcher
}

func newDir(t testing.TB) *dir {
	t.Helper()
	mem := global.NewMemory()
	w := global.StartWatcher(t.Context(), mem, discard())
	t.Cleanup(func() { w.Close(); mem.Close() })
	return &dir{mem: mem, w: w}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// router is a lead over d named id, claiming the directory name name.
func (d *dir) router(id, name string) *lead.Lead {
	return lead.New(lead.Deps{
		ID: id, Name: name, Store: global.NewStore(d.mem),
		View: d.w.View, Ready: d.w.Ready, Log: discard(),
	})
}

// settle waits for the view to hold everything written so far.
func (d *dir) settle(t testing.TB) {
	t.Helper()
	lr, err := global.NewStore(d.mem).Leader(t.Context())
	if err != nil {
		t.Fatalf("read leader: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := d.w.WaitRev(ctx, lr.Rev); err != nil {
		t.Fatalf("view at %d: %v", lr.Rev, err)
	}
}

// writeNode writes a node record through s.
func writeNode(ctx context.Context, s *global.Store, name string) error {
	_, err := s.WriteNode(ctx, name, true, func(n *global.Node, _ bool) bool {
		n.Addr, n.Region = "127.0.0.1:1", "r1"
		return true
	})
	return err
}

func wantLeads(t testing.TB, l *lead.Lead, leading bool, term uint64) {
	t.Helper()
	if got, gotTerm := l.Status(); got != leading || (leading && gotTerm != term) {
		t.Fatalf("status: leads %v at %d, want %v at %d", got, gotTerm, leading, term)
	}
}

func wantNotLeader(t testing.TB, err error, leader string, term uint64) {
	t.Helper()
	var nl *lead.NotLeaderError
	if !errors.As(err, &nl) || !errors.Is(err, lead.ErrNotLeader) {
		t.Fatalf("err %v, want a NotLeaderError", err)
	}
	if nl.Leader != leader || nl.Term != term {
		t.Fatalf("refusal names %s at %d, want %s at %d", nl.Leader, nl.Term, leader, term)
	}
}

// The first router to claim leads at term 1; one claiming after it
// follows, and refuses changes naming the leader.
func TestClaimOneLeadsTheOtherFollows(t *testing.T) {
	d := newDir(t)
	a, b := d.router("ra", global.DirGlobal), d.router("rb", global.DirGlobal)
	wantLeads(t, a, false, 0)
	if ok, err := a.Claim(t.Context()); !ok || err != nil {
		t.Fatalf("a claims: %v %v", ok, err)
	}
	wantLeads(t, a, true, 1)
	if ok, err := b.Claim(t.Context()); ok || err != nil {
		t.Fatalf("b claims over a: %v %v", ok, err)
	}
	d.settle(t)
	wantLeads(t, b, false, 0)
	_, err := b.Changes(t.Context())
	wantNotLeader(t, err, "ra", 1)
	if got, want := err.Error(), "this router does not lead: changes go to ra (term 1)"; got != want {
		t.Fatalf("refusal %q, want %q", got, want)
	}
	s, err := a.Changes(t.Context())
	if err != nil {
		t.Fatalf("a's changes: %v", err)
	}
	if err := writeNode(t.Context(), s, "n1"); err != nil {
		t.Fatalf("a writes: %v", err)
	}
}

// Routers claiming at once: exactly one leads, at term 1.
func TestClaimRaceOneWins(t *testing.T) {
	d := newDir(t)
	const n = 8
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		leaders []string
	)
	for i := range n {
		id := "r" + string(rune('a'+i))
		l := d.router(id, global.DirGlobal)
		wg.Go(func() {
			ok, err := l.Claim(t.Context())
			if err != nil {
				t.Errorf("%s claims: %v", id, err)
			}
			if ok {
				mu.Lock()
				leaders = append(leaders, id)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(leaders) != 1 {
		t.Fatalf("leading: %v, want one", leaders)
	}
	rec, err := global.NewStore(d.mem).Leader(t.Context())
	if err != nil || rec.Value.Router != leaders[0] || rec.Value.Term != 1 {
		t.Fatalf("leader record %+v %v, want %s at 1", rec.Value, err, leaders[0])
	}
}

// A router claiming again (a restart) leads at a new term, stamped by its
// clock; the lead it held before fails its fenced writes, and Lost ends it.
func TestClaimAgainMovesTheTermOn(t *testing.T) {
	d := newDir(t)
	before := d.router("ra", global.DirGlobal)
	if ok, err := before.Claim(t.Context()); !ok || err != nil {
		t.Fatalf("claim: %v %v", ok, err)
	}
	old, err := before.Changes(t.Context())
	if err != nil {
		t.Fatalf("changes: %v", err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	again := lead.New(lead.Deps{
		ID: "ra", Name: global.DirGlobal, Store: global.NewStore(d.mem),
		View: d.w.View, Ready: d.w.Ready, Now: func() time.Time { return at }, Log: discard(),
	})
	if ok, err := again.Claim(t.Context()); !ok || err != nil {
		t.Fatalf("claim again: %v %v", ok, err)
	}
	wantLeads(t, again, true, 2)
	rec, err := global.NewStore(d.mem).Leader(t.Context())
	if err != nil || rec.Value.Term != 2 || !rec.Value.Since.Equal(at) {
		t.Fatalf("leader record %+v %v, want term 2 since %v", rec.Value, err, at)
	}
	err = writeNode(t.Context(), old, "n1")
	if !errors.Is(err, global.ErrConflict) {
		t.Fatalf("write fenced on the old term: %v, want a conflict", err)
	}
	before.Lost(t.Context(), err)
	if ok, _ := before.Status(); ok {
		t.Fatal("the old lead still leads after its fenced write failed")
	}
}

// A promotion of another router moves the term on: the former leader's
// fenced writes fail, its view ends its lead, and its refusals name the
// promoted router.
func TestPromoteFencesTheFormerLeader(t *testing.T) {
	d := newDir(t)
	a, b := d.router("ra", global.DirGlobal), d.router("rb", global.DirGlobal)
	if ok, err := a.Claim(t.Context()); !ok || err != nil {
		t.Fatalf("a claims: %v %v", ok, err)
	}
	d.settle(t)
	old, err := a.Changes(t.Context())
	if err != nil {
		t.Fatalf("a's changes: %v", err)
	}
	term, err := b.Promote(t.Context())
	if err != nil || term != 2 {
		t.Fatalf("promote b: term %d, %v; want 2", term, err)
	}
	wantLeads(t, b, true, 2)
	if err := writeNode(t.Context(), old, "n1"); !errors.Is(err, global.ErrConflict) {
		t.Fatalf("a's write after the promotion: %v, want a conflict", err)
	}
	d.settle(t)
	wantLeads(t, a, false, 0)
	_, err = a.Changes(t.Context())
	wantNotLeader(t, err, "rb", 2)
	s, err := b.Changes(t.Context())
	if err != nil {
		t.Fatalf("b's changes: %v", err)
	}
	if err := writeNode(t.Context(), s, "n1"); err != nil {
		t.Fatalf("b writes: %v", err)
	}
}

// A node that fenced the term steps the lead down at once; only a
// conflict on a moved term does, through Lost.
func TestStepDownAndLost(t *testing.T) {
	d := newDir(t)
	a := d.router("ra", global.DirGlobal)
	if ok, err := a.Claim(t.Context()); !ok || err != nil {
		t.Fatalf("claim: %v %v", ok, err)
	}
	d.settle(t)
	a.Lost(t.Context(), errors.New("node unreachable"))
	a.Lost(t.Context(), global.ErrConflict) // the term has not moved
	wantLeads(t, a, true, 1)
	a.StepDown(7)
	wantLeads(t, a, false, 0)
	_, err := a.Changes(t.Context())
	wantNotLeader(t, err, "ra", 1)
}

// Changes waits for the view, bounded by ctx, and is then refused as not
// ready with the router's text.
func TestChangesBeforeTheView(t *testing.T) {
	d := newDir(t)
	never := make(chan struct{})
	l := lead.New(lead.Deps{
		ID: "ra", Store: global.NewStore(d.mem), View: d.w.View,
		Ready: func() <-chan struct{} { return never }, Log: discard(),
	})
	if ok, err := l.Claim(t.Context()); !ok || err != nil {
		t.Fatalf("claim: %v %v", ok, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := l.Changes(ctx)
	if !errors.Is(err, lead.ErrNotReady) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("changes before the view: %v, want not ready", err)
	}
	if want := "placements have not arrived yet; retry in a moment: "; !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("refusal %q, want it to start %q", err, want)
	}
}

// A router does not lead a directory named another's, claimed or
// promoted.
func TestClaimRefusesAnotherDirectory(t *testing.T) {
	d := newDir(t)
	if ok, err := d.router("ra", global.DirGlobal).Claim(t.Context()); !ok || err != nil {
		t.Fatalf("claim: %v %v", ok, err)
	}
	eu := d.router("rb", global.DirOfRegion("eu"))
	if ok, err := eu.Claim(t.Context()); ok || !errors.Is(err, global.ErrWrongDirectory) {
		t.Fatalf("claim of the global directory as eu's: %v %v", ok, err)
	}
	if _, err := eu.Promote(t.Context()); !errors.Is(err, global.ErrWrongDirectory) {
		t.Fatalf("promotion on the global directory as eu's: %v", err)
	}
	wantLeads(t, eu, false, 0)
	rec, err := global.NewStore(d.mem).Leader(t.Context())
	if err != nil || rec.Value.Router != "ra" || rec.Value.Term != 1 {
		t.Fatalf("leader record %+v %v, want ra at 1", rec.Value, err)
	}
}

func TestNotLeaderErrorText(t *testing.T) {
	for _, tc := range []struct {
		err  lead.NotLeaderError
		want string
	}{
		{lead.NotLeaderError{}, "this router does not lead, and no router leads"},
		{lead.NotLeaderError{Leader: "r2", Term: 3}, "this router does not lead: changes go to r2 (term 3)"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%+v: got %q, want %q", tc.err, got, tc.want)
		}
		if !errors.Is(&tc.err, lead.ErrNotLeader) {
			t.Errorf("%+v is not ErrNotLeader", tc.err)
		}
	}
}
