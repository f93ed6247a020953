package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// bound is a grant of router r of directory dir at term and epoch, n
// acknowledging ack, with a lease of a second and the list {a}.
func bound(dir, r string, term, epoch, n, ack uint64, h *Handoff) Grant {
	var g Grant
	if ack == 0 {
		g = grantOf(r, term, n, ack, 1000, []string{"a"}, nil)
	} else {
		g = grantOf(r, term, n, ack, 1000, nil, []string{"a"})
	}
	g.Dir, g.Epoch, g.Handoff = dir, epoch, h
	return g
}

// leasedAt leases a new node by dir at term and epoch (two grants, the
// second running a lease from 0) and returns it with what it persisted.
func leasedAt(t *testing.T, dir string, term, epoch uint64) (*NodeLease, *[]Binding) {
	t.Helper()
	var persisted []Binding
	l := NewNodeLease(Binding{}, func(b Binding) error { persisted = append(persisted, b); return nil })
	for _, g := range []Grant{bound(dir, dir+"-r", term, epoch, 1, 0, nil), bound(dir, dir+"-r", term, epoch, 2, 1, nil)} {
		if _, err := l.Handle(0, g); err != nil {
			t.Fatal(err)
		}
	}
	if ok, _ := l.Writable(0, "a"); !ok {
		t.Fatal("not leased")
	}
	return l, &persisted
}

// A node takes grants from the directory it is bound to, and from another
// only through a handoff from it, at a higher epoch, given at a term no
// lower than its highest (unless forced): never because a number is
// higher. Whatever it refuses so names its binding.
func TestNodeBindingRules(t *testing.T) {
	global := func(term uint64) *Handoff { return &Handoff{From: "global", Term: term} }
	tests := []struct {
		name  string
		g     Grant
		taken bool   // answered 200, else refused
		dir   string // the binding's directory after it
		epoch uint64
	}{
		{"own directory, own epoch", bound("global", "g2", 5, 1, 1, 0, nil), true, "global", 1},
		{"own directory, higher term: newer", bound("global", "g3", 9, 1, 1, 0, nil), true, "global", 1},
		{"own directory, earlier epoch", bound("global", "g2", 5, 0, 1, 0, nil), false, "global", 1},
		{"own directory, lower term", bound("global", "g0", 4, 1, 1, 0, nil), false, "global", 1},
		{"another directory, no handoff, higher term", bound("region:eu", "e", 99, 9, 1, 0, nil), false, "global", 1},
		{"another directory, handoff from a third", bound("region:eu", "e", 1, 2, 1, 0, &Handoff{From: "region:us", Term: 5}), false, "global", 1},
		{"another directory, handoff at the same epoch", bound("region:eu", "e", 1, 1, 1, 0, global(5)), false, "global", 1},
		{"another directory, handoff given at a lower term", bound("region:eu", "e", 1, 2, 1, 0, global(4)), false, "global", 1},
		{"another directory, handoff forced at a lower term", bound("region:eu", "e", 1, 3, 1, 0, &Handoff{From: "global", Force: true}), true, "region:eu", 3},
		{"another directory, handoff", bound("region:eu", "e", 1, 2, 1, 0, global(5)), true, "region:eu", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, persisted := leasedAt(t, "global", 5, 1)
			a, err := l.Handle(10*ms, tt.g)
			if !tt.taken {
				var de *DirectoryError
				var te *TermError
				switch {
				case errors.As(err, &de):
					if de.Dir != "global" || de.Epoch != 1 || de.Term != 5 {
						t.Fatalf("refusal names %+v, want global at epoch 1, term 5", de)
					}
				case errors.As(err, &te):
					if tt.g.Dir != "global" {
						t.Fatalf("a grant of another directory refused by term: %v", err)
					}
				default:
					t.Fatalf("taken (%+v, %v), want refused", a, err)
				}
				if ok, _ := l.Writable(10*ms, "a"); !ok {
					t.Fatal("a refused grant ended the lease")
				}
			} else if err != nil || (tt.dir != "global" && !a.Took) {
				t.Fatalf("refused, or not taken whole: %+v %v", a, err)
			}
			b := l.Bound()
			if b.Dir != tt.dir || b.Epoch != tt.epoch {
				t.Fatalf("bound %+v, want %s at epoch %d", b, tt.dir, tt.epoch)
			}
			if last := (*persisted)[len(*persisted)-1]; last != b {
				t.Fatalf("persisted %+v, bound %+v", last, b)
			}
			if tt.taken && tt.dir != "global" {
				// Taken whole: the old directory's lease ends here, and the
				// taker's next grant, acknowledging this one, runs its own.
				if ok, _ := l.Writable(10*ms, "a"); ok || a.LeftMS != 0 || a.Dir != tt.dir || a.Epoch != tt.epoch {
					t.Fatalf("the giver's lease still runs after the handoff grant: %+v", a)
				}
				next := tt.g
				next.N, next.Ack, next.Tenants, next.InStep, next.Behind, next.Replicas = 2, 1, nil, nil, nil, nil
				if a, err := l.Handle(20*ms, next); err != nil || a.LeftMS != 990 {
					t.Fatalf("the taker's second grant: %+v %v", a, err)
				}
				// The giver is fenced: its grants are refused from now on.
				if _, err := l.Handle(30*ms, bound("global", "global-r", 5, 1, 3, 2, nil)); !errors.Is(err, ErrOtherDirectory) {
					t.Fatalf("the giver's grant after the handoff: %v", err)
				}
			}
		})
	}
}

// A handoff grant of an earlier era — one read late, after the region was
// handed back — is refused by its epoch, and a node never leased binds to
// the first directory whose grant it takes.
func TestNodeBindingEras(t *testing.T) {
	l := NewNodeLease(Binding{}, nil)
	if _, err := l.Handle(0, bound("region:eu", "e", 3, 0, 1, 0, nil)); err != nil || l.Bound() != (Binding{Dir: "region:eu", Term: 3}) {
		t.Fatalf("a new node's first grant: %v, bound %+v", err, l.Bound())
	}
	l, _ = leasedAt(t, "global", 5, 0)
	toRegion := bound("region:eu", "e", 2, 1, 1, 0, &Handoff{From: "global", Term: 5})
	if _, err := l.Handle(0, toRegion); err != nil {
		t.Fatal(err)
	}
	back := bound("global", "g", 5, 2, 1, 0, &Handoff{From: "region:eu", Term: 2})
	if _, err := l.Handle(10*ms, back); err != nil || l.Bound() != (Binding{Dir: "global", Epoch: 2, Term: 5}) {
		t.Fatalf("handed back: %v, bound %+v", err, l.Bound())
	}
	late := toRegion
	late.N = 7
	if _, err := l.Handle(20*ms, late); !errors.Is(err, ErrOtherDirectory) {
		t.Fatalf("the first handoff's grant read late, after the region was handed back: %v", err)
	}
	stale := bound("global", "g-old", 5, 0, 40, 39, nil)
	if _, err := l.Handle(20*ms, stale); !errors.Is(err, ErrOtherDirectory) {
		t.Fatalf("a grant of the global tier's earlier era: %v", err)
	}
	// A node from before bindings (a term alone) takes its directory's
	// grants as its term allows, and binds.
	old := NewNodeLease(Binding{Term: 7}, nil)
	if _, err := old.Handle(0, bound("global", "g", 6, 0, 1, 0, nil)); !errors.Is(err, ErrLowerTerm) {
		t.Fatalf("lower term to an unbound node: %v", err)
	}
	if _, err := old.Handle(0, bound("global", "g", 7, 0, 1, 0, nil)); err != nil || old.Bound().Dir != "global" {
		t.Fatalf("an unbound node's grant: %v %+v", err, old.Bound())
	}
}

// The refusal for another directory travels as 409 naming the directory,
// epoch and term, and comes back as a *DirectoryError; grants carry their
// directory, epoch and handoff.
func TestDirectoryErrorWire(t *testing.T) {
	status, body := ReplyStatus(&DirectoryError{Dir: "region:eu", Epoch: 3, Term: 2})
	b, _ := json.Marshal(body)
	if status != http.StatusConflict || string(b) == "" {
		t.Fatalf("%d %s", status, b)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if m["leased_by"] != "region:eu" || m["epoch"] != float64(3) || m["term"] != float64(2) {
		t.Fatalf("body %s", b)
	}
	_, err := DecodeReply(status, b)
	var de *DirectoryError
	if !errors.As(err, &de) || *de != (DirectoryError{Dir: "region:eu", Epoch: 3, Term: 2}) {
		t.Fatalf("decoded %v", err)
	}
	if errors.Is(err, ErrLowerTerm) {
		t.Fatal("a directory refusal decoded as a lower term")
	}
	g := bound("region:eu", "e", 1, 2, 1, 0, &Handoff{From: "global", Term: 5})
	gb, _ := json.Marshal(g)
	var back Grant
	if err := json.Unmarshal(gb, &back); err != nil || back.Dir != "region:eu" || back.Epoch != 2 || *back.Handoff != (Handoff{From: "global", Term: 5}) {
		t.Fatalf("grant %s came back %+v (%v)", gb, back, err)
	}
	for _, h := range []*Handoff{{From: ""}, {From: "region:eu"}} {
		g.Handoff = h
		if err := g.Validate(); !errors.Is(err, ErrBadGrant) {
			t.Fatalf("a handoff from %q to %q validated", h.From, g.Dir)
		}
	}
}

// A Leaser's grants name its directory and each node's terms; a node that
// refuses them for another directory does not depose the router:
// Elsewhere is called once, and the node is counted as not answering — it
// lapses and is failed over, alone. A node leased again goes on from the
// numbers it was sent. A node added under MustRun is never failed over
// before it ran one of this router's leases.
func TestLeaserBindings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := NewMonoClock()
		net := newFakeNet(clock, "n1", "n2", "n3")
		var mu sync.Mutex
		var elsewhere []string
		var failed []string
		deposed := false
		l, err := NewLeaser(LeaserConfig{
			Router: "r", Term: 4, Dir: "region:eu", Lease: 3 * time.Second, Transport: net, Clock: clock,
			Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
			Failover: func(_ context.Context, node string) { mu.Lock(); failed = append(failed, node); mu.Unlock() },
			Deposed:  func(context.Context, string, uint64) { mu.Lock(); deposed = true; mu.Unlock() },
			Elsewhere: func(_ context.Context, node string, e *DirectoryError) {
				mu.Lock()
				elsewhere = append(elsewhere, node+"@"+e.Dir)
				mu.Unlock()
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		// n1 is the global tier's and stays so: no handoff reaches it.
		if _, err := net.lease["n1"].Handle(0, bound("global", "g", 9, 0, 1, 0, nil)); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"n1", "n2", "n3"} {
			l.SetTenants(n, []string{"t-" + n})
		}
		l.SetTerms("n3", NodeTerms{Epoch: 2, Handoff: &Handoff{From: "global", Force: true}, Floor: 5 * time.Second, MustRun: true})
		if err := l.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		// n3 was the global tier's too, and takes the forced handoff.
		time.Sleep(time.Minute)
		synctest.Wait()
		mu.Lock()
		if !slices.Equal(elsewhere, []string{"n1@global"}) || !slices.Equal(failed, []string{"n1"}) || deposed {
			t.Fatalf("elsewhere %v, failed %v, deposed %v", elsewhere, failed, deposed)
		}
		mu.Unlock()
		st := l.Nodes()
		if st[0].LeasedBy != "global" || st[1].LeasedBy != "" || !st[2].Handoff || st[2].Epoch != 2 || !st[2].Ran {
			t.Fatalf("status %+v", st)
		}
		if b := net.lease["n3"].Bound(); b.Dir != "region:eu" || b.Epoch != 2 {
			t.Fatalf("n3 bound %+v", b)
		}
		// Leased again after it was removed, n2 is sent numbers it was not
		// sent before.
		before := net.sent("n2")
		l.RemoveNode("n2")
		l.SetTenants("n2", []string{"t-n2"})
		synctest.Wait()
		after := net.sent("n2")[len(before)]
		if after.g.N <= before[len(before)-1].g.N || after.err != nil {
			t.Fatalf("n2 leased again with grant %+v after %+v", after, before[len(before)-1])
		}
	})
}

// Under MustRun a node the router never reached is never failed over
// however long it stays silent, while one that ran its lease and then
// lapsed is, no sooner than the floor and a tenth after it was added.
func TestLeaserMustRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, time.Second, nil, "never", "ran")
		c.net.setMode("never", hang)
		terms := NodeTerms{Epoch: 2, Handoff: &Handoff{From: "global", Force: true}, Floor: 5 * time.Second, MustRun: true}
		c.l.SetTerms("never", terms)
		c.l.SetTerms("ran", terms)
		if err := c.l.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		c.sleepTo(100 * ms)
		c.net.setMode("ran", down) // ran one of ours at 0, then lost
		c.sleepTo(5500*ms - ms)
		if f := c.fo.list(); len(f) != 0 {
			t.Fatalf("failed over before the floor and a tenth: %+v", f)
		}
		c.sleepTo(10 * time.Second)
		f := c.fo.list()
		if len(f) != 1 || f[0].node != "ran" || f[0].at < 5500*ms {
			t.Fatalf("failovers %+v, want ran only, at or after 5.5 s", f)
		}
	})
}

// ExtendRecord counts a node added after it by the giver's record until it
// ran one of this router's leases, and keeps the directory's record from
// being lowered until that record and a tenth have passed.
func TestLeaserExtendRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := NewMonoClock()
		rec := &fakeRecord{clock: clock, value: time.Second}
		c := newCluster(t, time.Second, rec, "n1")
		if err := c.l.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		c.sleepTo(2 * time.Second)
		rec.mu.Lock()
		rec.value = 5 * time.Second // raised by the handoff's transaction
		rec.mu.Unlock()
		c.l.ExtendRecord(5 * time.Second)
		c.net.mu.Lock()
		c.net.mode["n2"], c.net.lease["n2"] = hang, NewNodeLease(Binding{}, nil)
		c.net.mu.Unlock()
		c.l.SetTenants("n2", []string{"t-n2"})
		c.sleepTo(2*time.Second + 5500*ms - ms)
		if f := c.fo.list(); len(f) != 0 {
			t.Fatalf("a node added after the extension failed over before its record and a tenth: %+v", f)
		}
		if v, ev := rec.get(); v != 5*time.Second {
			t.Fatalf("record lowered before the extension ran out: %v %v", v, ev)
		}
		c.sleepTo(20 * time.Second)
		if f := c.fo.list(); len(f) != 1 || f[0].node != "n2" {
			t.Fatalf("failovers %+v", f)
		}
		if v, _ := rec.get(); v != time.Second {
			t.Fatalf("record %v once the extension ran out, want it lowered to the router's own", v)
		}
	})
}

// A node from before directories refuses a grant naming one as malformed
// (its decoder knows no such field): the router leases it with grants that
// name none, says so once, and never counts the refusal as a lapse.
func TestLeaserNodeFromBeforeDirectories(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := NewMonoClock()
		net := &oldNodes{fakeNet: newFakeNet(clock, "old")}
		var mu sync.Mutex
		var failed []string
		l, err := NewLeaser(LeaserConfig{
			Router: "r", Term: 1, Dir: "global", Lease: 3 * time.Second, Transport: net, Clock: clock,
			Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
			Failover: func(_ context.Context, node string) { mu.Lock(); failed = append(failed, node); mu.Unlock() },
		})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		l.SetTenants("old", []string{"t-old"})
		if err := l.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(failed) != 0 || !net.writable("old", "t-old") {
			t.Fatalf("a node from before directories: failed over %v, writable %v", failed, net.writable("old", "t-old"))
		}
	})
}

// oldNodes answers as a node from before directories: a grant naming a
// directory is refused as malformed, as its decoder would.
type oldNodes struct{ *fakeNet }

func (o *oldNodes) Send(ctx context.Context, node string, g Grant) (Answer, error) {
	if g.Dir != "" || g.Epoch != 0 || g.Handoff != nil {
		_, body := ReplyStatus(fmt.Errorf("%w: json: unknown field \"dir\"", ErrBadGrant))
		b, _ := json.Marshal(body)
		return DecodeReply(http.StatusBadRequest, b)
	}
	return o.fakeNet.Send(ctx, node, g)
}
