package nemesis

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Scenario is one kind of fault schedule and what its history is held to.
type Scenario struct {
	Name  string
	About string
	Shape Shape
	Mix   Mix
	// Claims are what the history is held to; the zero value is all of
	// them.
	Claims Claims
	// Step injects one fault episode of the scenario and ends it (or
	// leaves it to the heal); the run calls it while time is left, with a
	// pause of a lease or two between.
	Step func(ctx context.Context, r *Run)
	// Skip, when set, says why the scenario cannot run yet.
	Skip string
	// Bound is the longest, in leases, a tenant's writes may stop under
	// the scenario's faults by the lease arithmetic: a node's lease lapses
	// a lease after its last grant's answer, the router fails it over a
	// tenth after that, the promoted copy takes writes at the next grant
	// (a third of a lease), plus the fault's own length where nothing can
	// fail over (both a primary and its copy out). The table sets the
	// longest pause seen beside it.
	Bound float64
}

// Run is one scenario under one seed, as it runs.
type Run struct {
	T     *Topo
	H     *History
	Rng   *rand.Rand
	Lease time.Duration
	W     *Workload
	// Episodes counts the fault episodes injected.
	Episodes int
}

// Between is a random duration in [lo, hi), drawn from the run's seed.
func (r *Run) Between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(r.Rng.Int64N(int64(hi-lo)))
}

// Leases is n leases.
func (r *Run) Leases(n float64) time.Duration { return time.Duration(n * float64(r.Lease)) }

// Chance is true with probability p.
func (r *Run) Chance(p float64) bool { return r.Rng.Float64() < p }

// AnyNode is a node drawn at random.
func (r *Run) AnyNode() *Node { return r.T.Nodes[r.Rng.IntN(len(r.T.Nodes))] }

// AnyTenant is a tenant drawn at random, with its placement as the
// directory has it now (false if no router answered).
func (r *Run) AnyTenant(ctx context.Context) (string, Placement, bool) {
	tenants := r.T.Tenants()
	name := tenants[r.Rng.IntN(len(tenants))]
	ps, err := r.T.Placements(ctx)
	if err != nil {
		return name, Placement{}, false
	}
	p, ok := ps[name]
	return name, p, ok && p.Node != ""
}

// Result is one run's outcome, for the table and the log.
type Result struct {
	Scenario string
	Bound    float64
	Seed     uint64
	Ran      time.Duration // from the workload's start to the last check
	Report   Report
	Episodes int
	Faults   int
	KilledIn map[string]int // kills in the middle of a handoff or a move, by the state seen
	Saved    string         // where a failing run's history went
}

// Options are a run's settings beside its scenario and seed.
type Options struct {
	Duration time.Duration // of the faults
	Lease    time.Duration
	Results  string // where a failing run's history is saved
	Keep     bool   // save every run's history, not only a failing one's
}

// RunScenario runs sc under seed: the deployment, the clients, faults for
// o.Duration, the heal, the read-back and the checks. A run whose
// history shows an anomaly is saved under o.Results.
func RunScenario(tb testing.TB, sc Scenario, seed uint64, o Options) Result {
	tb.Helper()
	tb.Logf("nemesis: scenario %s seed %d duration %v (replay: make nemesis SCENARIO=%s SEED=%d DURATION=%v)",
		sc.Name, seed, o.Duration, sc.Name, seed, o.Duration)
	h := NewHistory(sc.Name, seed, o.Lease)
	topo := Start(tb, h, sc.Shape, o.Lease)
	mix := sc.Mix
	if mix == (Mix{}) {
		mix = DefaultMix
	}
	began := time.Now()
	w := StartWorkload(topo, h, seed, mix, 2, 2, 40*time.Millisecond)
	stopped := false
	defer func() {
		if !stopped {
			w.Stop()
		}
	}()
	run := &Run{T: topo, H: h, Rng: rand.New(rand.NewPCG(seed, hash(sc.Name))), Lease: o.Lease, W: w}
	sleep(context.Background(), time.Second) // clients under way before the first fault
	h.Note("faults begin")
	ctx, cancel := context.WithTimeout(context.Background(), o.Duration)
	for ctx.Err() == nil {
		if sc.Step == nil {
			<-ctx.Done()
			break
		}
		run.Episodes++
		sc.Step(ctx, run)
		sleep(ctx, run.Between(run.Leases(1), run.Leases(2.5)))
	}
	cancel()
	h.Note("faults end: healing")
	topo.HealAll()
	topo.Settle(time.Minute)
	sleep(context.Background(), run.Leases(3)) // clients write on the healed deployment
	w.Stop()
	stopped = true
	h.Note("clients stopped: reading back")
	w.FinalReads(time.Minute)
	topo.CheckCopies(30 * time.Second)
	rep := Check(h, sc.Claims)
	rep.Anomalies = append(topo.Anomalies(), rep.Anomalies...)
	rep.Sort(sc.Claims)
	_, faults := h.Snapshot()
	res := Result{Scenario: sc.Name, Bound: sc.Bound, Seed: seed, Ran: time.Since(began), Report: rep, Episodes: run.Episodes, Faults: len(faults)}
	h.mu.Lock()
	res.KilledIn = maps.Clone(h.KilledIn)
	h.mu.Unlock()
	tb.Logf("nemesis: %s seed %d: %d operations (%d writes acknowledged, %d unknown, %d refused), %d faults, %d anomalies, longest without a write %v (%s)",
		sc.Name, seed, rep.Ops, rep.Acked, rep.Unknown, rep.Refused, len(faults), len(rep.Anomalies),
		rep.LongestGap.Round(time.Millisecond), rep.LongestGapOn)
	tb.Logf("nemesis: reads answered fresh %d, within a bound they stated %d, unbounded %d; %d sent to copies, %d of them declined",
		rep.Fresh, rep.Bounded, rep.UnboundedReads, rep.CopyReads, rep.Declined)
	if rep.NearCopy+rep.NearPrimary > 0 {
		tb.Logf("nemesis: reads through the near router stating a bound or a seq: %d served by the read copy, %d by the primary",
			rep.NearCopy, rep.NearPrimary)
	}
	if len(rep.Unchecked) > 0 {
		tb.Logf("nemesis: porcupine ran out of time on %v: those objects are unchecked", rep.Unchecked)
	}
	for _, a := range rep.Known {
		tb.Logf("nemesis: known anomaly: %s", a)
	}
	topo.DumpStuck()
	if len(rep.Anomalies) > 0 || o.Keep {
		res.Saved = save(tb, o.Results, topo, h, res)
	}
	return res
}

// save writes a failing run's history, a description and the processes'
// logs under dir/<scenario>-<seed>.
func save(tb testing.TB, dir string, topo *Topo, h *History, res Result) string {
	out := filepath.Join(dir, fmt.Sprintf("%s-%d", res.Scenario, res.Seed))
	if err := h.Save(out); err != nil {
		tb.Errorf("save the history: %v", err)
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "scenario %s, seed %d, lease %v: %d anomalies\n", res.Scenario, res.Seed, h.Lease, len(res.Report.Anomalies))
	fmt.Fprintf(&b, "replay: make nemesis SCENARIO=%s SEED=%d\n\n", res.Scenario, res.Seed)
	for _, a := range res.Report.Anomalies {
		fmt.Fprintf(&b, "%s\n\n", a)
	}
	_, faults := h.Snapshot()
	b.WriteString("faults:\n")
	for _, f := range faults {
		fmt.Fprintf(&b, "  %8.3fs..%8.3fs %s %s %s\n", float64(f.At)/1e9, float64(f.End)/1e9, f.Kind, f.Target, f.Detail)
	}
	b.WriteString("\nnotes:\n")
	h.mu.Lock()
	for _, n := range h.Notes {
		fmt.Fprintf(&b, "  %s\n", n)
	}
	h.mu.Unlock()
	if err := os.WriteFile(filepath.Join(out, "description.txt"), []byte(b.String()), 0o644); err != nil {
		tb.Errorf("save the description: %v", err)
	}
	logs, _ := filepath.Glob(filepath.Join(topo.C.Dir(), "*.log"))
	for _, l := range logs {
		if data, err := os.ReadFile(l); err == nil {
			_ = os.WriteFile(filepath.Join(out, filepath.Base(l)), data, 0o644)
		}
	}
	tb.Logf("nemesis: the history, a description and the logs are in %s", out)
	return out
}

// hash spreads a scenario's name into a seed's second word, so two
// scenarios under one seed draw different schedules.
func hash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return h
}
