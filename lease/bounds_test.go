package lease

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The forged grant of the attack on a region: a node's own list copied in,
// the region's directory, the largest epoch, a forced handoff from the
// directory leasing the node. A node bound to the global tier at epoch 3
// refuses it 409 and keeps its binding; so it does a grant more than
// EpochMargin past its epoch, from its own directory or with a handoff,
// and any term or epoch past MaxNumber. Within the margin a handoff is
// taken as before.
func TestNodeRefusesEpochsPastTheMargin(t *testing.T) {
	forced := &Handoff{From: "global", Force: true}
	cases := []struct {
		name string
		g    Grant
		took bool
	}{
		{"forged, largest epoch", bound("region:eu", "x", 1, math.MaxUint64, 1, 0, forced), false},
		{"forged, past 2^53", bound("region:eu", "x", 1, MaxNumber+1, 1, 0, forced), false},
		{"handoff one past the margin", bound("region:eu", "x", 1, 3+EpochMargin+1, 1, 0, forced), false},
		{"own directory one past the margin", bound("global", "g2", 9, 3+EpochMargin+1, 1, 0, nil), false},
		{"own directory, largest term", bound("global", "g2", math.MaxUint64, 3, 1, 0, nil), false},
		{"handoff at the margin", bound("region:eu", "x", 1, 3+EpochMargin, 1, 0, forced), true},
		{"own directory at the margin", bound("global", "g2", 9, 3+EpochMargin, 1, 0, nil), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, _ := leasedAt(t, "global", 9, 3)
			was := l.Bound()
			_, err := l.Handle(10*time.Second, c.g)
			if c.took {
				if err != nil || l.Bound().Epoch != c.g.Epoch {
					t.Fatalf("refused %v, bound %+v", err, l.Bound())
				}
				return
			}
			if err == nil || l.Bound() != was {
				t.Fatalf("taken: err %v, bound %+v (was %+v)", err, l.Bound(), was)
			}
			status, body := ReplyStatus(err)
			if status != http.StatusConflict || body.LeasedBy != "global" || body.Epoch != 3 {
				t.Fatalf("answered %d %+v", status, body)
			}
			if _, back := DecodeReply(status, mustJSON(t, body)); !errors.Is(back, ErrEpochBound) {
				t.Fatalf("decoded as %v", back)
			}
		})
	}
}

// A node bound to no directory knows no epoch: it takes any up to
// MaxNumber (a node joining a region handed over many times), none past.
func TestUnboundNodeEpochCeiling(t *testing.T) {
	l := NewNodeLease(Binding{}, nil)
	if _, err := l.Handle(time.Second, bound("global", "g", 1, math.MaxUint64, 1, 0, nil)); !errors.Is(err, ErrEpochBound) || l.Bound() != (Binding{}) {
		t.Fatalf("largest epoch on a new node: %v, bound %+v", err, l.Bound())
	}
	if _, err := l.Handle(time.Second, bound("global", "g", 1, 1000, 1, 0, nil)); err != nil || l.Bound().Epoch != 1000 {
		t.Fatalf("epoch 1000 on a new node: %v, bound %+v", err, l.Bound())
	}
}

// NextEpoch refuses to move past MaxNumber, and never wraps.
func TestNextEpochNeverWraps(t *testing.T) {
	for _, c := range []struct {
		e, step uint64
		ok      bool
	}{
		{0, 1, true}, {MaxNumber - 2, 2, true}, {MaxNumber - 1, 2, false},
		{MaxNumber, 1, false}, {math.MaxUint64, 1, false}, {math.MaxUint64, 2, false}, {1, math.MaxUint64, false},
	} {
		got, err := NextEpoch(c.e, c.step)
		if (err == nil) != c.ok || (c.ok && got != c.e+c.step) || (!c.ok && !errors.Is(err, ErrEpochBound)) {
			t.Errorf("NextEpoch(%d, %d) = %d, %v", c.e, c.step, got, err)
		}
	}
	if EpochWithin(math.MaxUint64, math.MaxUint64) || !EpochWithin(math.MaxUint64, MaxNumber) || EpochWithin(0, EpochMargin+1) {
		t.Fatal("EpochWithin at the edges")
	}
}

// The node's handler reports every grant that moves its binding, and
// every grant refused past the bound, and no renewal.
func TestHandlerReportsBindingChanges(t *testing.T) {
	clock := NewManualClock(time.Hour)
	l := NewNodeLease(Binding{}, nil)
	var seen []string
	h := &Handler{Lease: l, Clock: clock, OnBinding: func(_ *http.Request, was, now Binding, g Grant, err error) {
		s := was.Dir + ">" + now.Dir
		if err != nil {
			s += " refused"
		}
		seen = append(seen, s)
	}}
	post := func(g Grant) int {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/_admin/lease", strings.NewReader(string(mustJSON(t, g)))))
		return w.Code
	}
	codes := []int{
		post(bound("global", "g", 1, 0, 1, 0, nil)),
		post(bound("global", "g", 1, 0, 2, 1, nil)),
		post(bound("region:eu", "x", 1, math.MaxUint64, 1, 0, &Handoff{From: "global", Force: true})),
		post(bound("region:eu", "x", 1, 2, 2, 0, &Handoff{From: "global", Force: true})),
	}
	if want := []int{200, 200, 409, 200}; !equalInts(codes, want) {
		t.Fatalf("answered %v, want %v", codes, want)
	}
	if want := ">global,global>global refused,global>region:eu"; strings.Join(seen, ",") != want {
		t.Fatalf("reported %q, want %q", strings.Join(seen, ","), want)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
