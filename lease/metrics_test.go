package lease

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// gather reads the registry into name → label value → value.
func gather(t *testing.T, reg *prometheus.Registry) map[string]map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]float64{}
	for _, mf := range mfs {
		vals := map[string]float64{}
		for _, m := range mf.GetMetric() {
			key := ""
			if len(m.GetLabel()) > 0 {
				key = m.GetLabel()[0].GetValue()
			}
			if c := m.GetCounter(); c != nil {
				vals[key] = c.GetValue()
			} else {
				vals[key] = m.GetGauge().GetValue()
			}
		}
		out[mf.GetName()] = vals
	}
	return out
}

// TestMetricsCountGrantsAndLeft: a node that answers, one that hangs and
// one without --lease: grants counted by outcome, and each leased node's
// lease left by the router's count, across two Leasers of one router.
func TestMetricsCountGrantsAndLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := NewMonoClock()
		net := newFakeNet(clock, "up", "hung", "plain")
		net.setMode("hung", hang)
		net.setMode("plain", noLease)
		m := NewMetrics()
		reg := prometheus.NewRegistry()
		reg.MustRegister(m)
		fo := &failovers{net: net}
		l, err := NewLeaser(LeaserConfig{
			Router: "r", Term: 1, Lease: 3 * time.Second, Transport: net, Failover: fo.call, Clock: clock,
			Metrics: m, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"up", "hung", "plain"} {
			l.SetTenants(n, []string{"t-" + n})
		}
		if err := l.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2*time.Second + 500*ms)
		synctest.Wait()
		got := gather(t, reg)
		grants := got["fenec_router_lease_grants_total"]
		// up: two at once (the first runs no lease), then one a second.
		if grants[GrantTook] != 4 || grants[GrantNoLease] != 3 || grants[GrantUnanswered] != 2 || grants[GrantLowerTerm] != 0 {
			t.Fatalf("grants %v", grants)
		}
		left := got["fenec_router_lease_left_seconds"]
		if len(left) != 2 || left["up"] != 2.5 || left["hung"] != 0.5 {
			t.Fatalf("left %v (the node without --lease has none)", left)
		}
		if got["fenec_router_lease_seconds"]["up"] != 3 {
			t.Fatalf("lease %v", got["fenec_router_lease_seconds"])
		}
		l.Close()
		if got := gather(t, reg); len(got["fenec_router_lease_left_seconds"]) != 0 || got["fenec_router_lease_grants_total"][GrantTook] != 4 {
			t.Fatalf("after Close: %v", got)
		}
		// The next term's Leaser reports into the same series.
		l2, err := NewLeaser(LeaserConfig{
			Router: "r2", Term: 2, Lease: 3 * time.Second, Transport: net, Failover: fo.call, Clock: clock,
			Metrics: m, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		defer l2.Close()
		l2.SetTenants("up", []string{"t-up"})
		if err := l2.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := gather(t, reg); got["fenec_router_lease_grants_total"][GrantTook] < 5 || len(got["fenec_router_lease_left_seconds"]) != 1 {
			t.Fatalf("second term: %v", got)
		}
	})
}

func TestGrantOutcome(t *testing.T) {
	for _, tc := range []struct {
		inTime bool
		a      Answer
		err    error
		want   string
	}{
		{true, Answer{Took: true}, nil, GrantTook},
		{true, Answer{}, nil, GrantNotTaken},
		{false, Answer{Took: true}, nil, GrantLate},
		{true, Answer{}, ErrNeedsList, GrantNeedsList},
		{true, Answer{}, ErrTakesNoLease, GrantNoLease},
		{true, Answer{}, ErrLowerTerm, GrantLowerTerm},
		{true, Answer{}, errors.New("connection refused"), GrantUnanswered},
	} {
		if got := grantOutcome(tc.inTime, tc.a, tc.err); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc, got, tc.want)
		}
	}
}
