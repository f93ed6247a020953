package leasing

import (
	"testing"
	"testing/synctest"
	"time"
)

// lapsedAt is node's lapse as the directory records it, and the record's
// revision.
func (s *leaseSim) lapsedAt(node string) (time.Time, int64) {
	s.t.Helper()
	n, err := s.store.GetNode(s.t.Context(), node)
	if err != nil {
		s.t.Fatal(err)
	}
	return n.Value.Lapsed, n.Rev
}

// A node down for less than its lease is never recorded lapsed; one down
// past it is, once its failover ran and no sooner than the lapse, at the
// wall time the failover ended; once it answers again the mark is
// cleared within a round and a look of the leasing's.
func TestLeasingRecordsALapsedNodeSim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newLeaseSim(t)
		s.lead.lead(t)
		s.l.Start(t.Context())
		s.addNode("a", true)
		s.addNode("b", true)
		s.sleepTo(200 * time.Millisecond)
		s.place("zone", "a", "") // no copy: left on a by its failover
		s.place("t1", "a", "b")
		_, rev := s.lapsedAt("a")

		// Down for half a lease: it answers again before it lapses.
		s.net.setDown("a", true)
		s.sleepTo(s.clock.Now() + simLeaseLen/2)
		s.net.setDown("a", false)
		s.sleepTo(s.clock.Now() + simLeaseLen)
		if at, r := s.lapsedAt("a"); !at.IsZero() || r != rev {
			t.Fatalf("a node that answered within its lease recorded (lapsed %v, rev %d, was %d)", at, r, rev)
		}

		// Down for good: recorded lapsed only once it was failed over.
		s.net.setDown("a", true)
		wall0, mono0 := time.Now(), s.clock.Now()
		for range 4 * 10 {
			s.sleepTo(s.clock.Now() + simLeaseLen/10)
			at, _ := s.lapsedAt("a")
			fo := s.failedOver()
			if !at.IsZero() && len(fo) == 0 {
				t.Fatalf("a recorded lapsed at %v before its failover", at)
			}
		}
		fo := s.failedOver()
		if len(fo) != 1 || fo[0].node != "a" {
			t.Fatalf("failovers %+v", fo)
		}
		at, _ := s.lapsedAt("a")
		if at.IsZero() {
			t.Fatal("a not recorded lapsed after its failover")
		}
		if since := at.Sub(wall0); since < fo[0].at-mono0 || since < simLeaseLen {
			t.Fatalf("a recorded lapsed %v after it went down; its failover began %v after", since, fo[0].at-mono0)
		}
		if n, _ := s.w.View().Node("a"); !n.Lapsed.Equal(at) {
			t.Fatalf("the view shows a lapsed at %v, the directory %v", n.Lapsed, at)
		}
		if rec, _ := s.w.View().Tenant("zone"); rec.Node != "a" {
			t.Fatalf("zone left on %s", rec.Node)
		}
		// Still down: the mark stays, its first lapse kept.
		s.sleepTo(s.clock.Now() + 2*simLeaseLen)
		if again, _ := s.lapsedAt("a"); !again.Equal(at) {
			t.Fatalf("a's lapse moved from %v to %v while it stayed down", at, again)
		}

		// Back: cleared once it answered.
		s.net.setDown("a", false)
		back := s.clock.Now()
		s.sleepTo(back + simLeaseLen/3 + s.l.Tick())
		if st, _ := s.status("a"); !st.Answered || st.FailedOver {
			t.Fatalf("a back: %+v", st)
		}
		if at, _ := s.lapsedAt("a"); !at.IsZero() {
			t.Fatalf("a answers again but is still recorded lapsed at %v", at)
		}
		if len(s.failedOver()) != 1 {
			t.Fatalf("failovers %+v", s.failedOver())
		}
	})
}

// A node that answers while its failover runs — back a moment after it
// lapsed — is not recorded lapsed as the failover ends: it is not lost.
func TestLeasingNeverRecordsANodeThatAnsweredSim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newLeaseSim(t)
		s.lead.lead(t)
		s.l.Start(t.Context())
		s.addNode("a", true)
		s.addNode("b", true)
		s.sleepTo(200 * time.Millisecond)
		s.place("zone", "a", "")
		_, rev := s.lapsedAt("a")
		s.hold = func() {
			// The failover began: a answers its next grant before it ends.
			s.net.setDown("a", false)
			time.Sleep(simLeaseLen/3 + time.Millisecond)
			if st, _ := s.status("a"); !st.Answered || st.FailedOver {
				t.Errorf("a has not answered during its failover: %+v", st)
			}
		}
		s.net.setDown("a", true)
		s.sleepTo(s.clock.Now() + 3*simLeaseLen)
		if fo := s.failedOver(); len(fo) != 1 || fo[0].node != "a" {
			t.Fatalf("failovers %+v", fo)
		}
		if at, r := s.lapsedAt("a"); !at.IsZero() || r != rev {
			t.Fatalf("a answered during its failover but was recorded lapsed (%v, rev %d, was %d)", at, r, rev)
		}
	})
}
