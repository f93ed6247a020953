//go:build nemesis

package nemesis

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenec-go/fenec/tests/cluster"
)

// The suite's flags: make nemesis passes them (SCENARIO, SEED, SEEDS,
// DURATION, LEASE, TABLE).
var (
	flagScenario = flag.String("scenario", "all", "the scenarios to run, by name, comma-separated, or all")
	flagSeed     = flag.Uint64("seed", 0, "the first seed (0: one from the clock, printed)")
	flagSeeds    = flag.Int("seeds", 1, "how many seeds per scenario, from the first on")
	flagDuration = flag.Duration("duration", 15*time.Second, "how long faults run in each run")
	flagLease    = flag.Duration("lease", time.Second, "every router's --auto-failover")
	flagResults  = flag.String("results", "results", "where a failing run's history goes")
	flagNodeArgs = flag.String("node-args", "", "more flags for every node, space-separated (e.g. \"--log-level debug\")")
	flagKeep     = flag.Bool("keep", false, "save every run's history, not only a failing one's")
	flagTable    = flag.String("table", "", "write the results table here too (e.g. ../../bench/nemesis.txt)")
)

func TestMain(m *testing.M) { cluster.MainTags(m, "nemesis") }

// TestNemesis runs the scenarios the flags name, each under each seed,
// prints the results table, and fails if any run found an anomaly.
func TestNemesis(t *testing.T) {
	names := strings.Split(*flagScenario, ",")
	if *flagScenario == "all" {
		names = nil
		for _, sc := range Scenarios() {
			names = append(names, sc.Name)
		}
	}
	seed := *flagSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano() % 1_000_000)
	}
	var results []Result
	for _, name := range names {
		sc, ok := ScenarioNamed(name)
		if !ok {
			t.Fatalf("no scenario %q", name)
		}
		for i := range *flagSeeds {
			s := seed + uint64(i)
			t.Run(name+"/"+itoa(s), func(t *testing.T) {
				if sc.Skip != "" {
					t.Skip(sc.Skip)
				}
				sc.Shape.NodeArgs = strings.Fields(*flagNodeArgs)
				res := RunScenario(t, sc, s, Options{Duration: *flagDuration, Lease: *flagLease, Results: *flagResults, Keep: *flagKeep})
				results = append(results, res)
				for _, a := range res.Report.Anomalies {
					t.Errorf("anomaly: %s", a)
				}
			})
		}
	}
	table := Table(results, *flagLease, *flagDuration)
	t.Logf("\n%s", table)
	if *flagTable != "" {
		what := fmt.Sprintf("scenarios %s, seeds %d to %d", *flagScenario, seed, seed+uint64(*flagSeeds)-1)
		if err := WriteTable(*flagTable, what, table); err != nil {
			t.Error(err)
		}
	}
}

// The suite finds two primaries when there are two. A node's lease clock
// is held still for two leases — outside what leases claim to survive
// (the boot clock never stands still; the tenth a router waits past a
// lease covers clocks 5 % apart) — while it is cut off from its leader,
// and a client keeps writing straight to it: it writes on a lease it
// believes it still holds after its copy was promoted and took writes.
// The checks must say so; a suite that passed this would be blind.
func TestNemesisSeesTwoPrimaries(t *testing.T) {
	lease := *flagLease
	h := NewHistory("two-primaries", 1, lease)
	topo := Start(t, h, Shape{Tenants: 1}, lease)
	w := StartWorkload(topo, h, 1, DefaultMix, 2, 0, 40*time.Millisecond)
	ps, err := topo.Placements(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := topo.Node(ps["t0"].Node)
	pinned := &client{id: 99, via: "node:" + n.Name, direct: map[string]*cluster.Client{n.Name: cluster.NewClient(t, n.DirectURL(), "")},
		rng: rand.New(rand.NewPCG(1, 99))}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			w.one(pinned, "t0", RegWrite, false)
		}
	})
	topo.MoveClock(n, -2*lease, 0)
	f := topo.Cut(n, topo.Leader().Name)
	sleep(context.Background(), 4*lease)
	topo.Heal(n, topo.Leader().Name, f)
	close(stop)
	wg.Wait()
	topo.HealAll()
	topo.Settle(time.Minute)
	w.Stop()
	w.FinalReads(time.Minute)
	rep := Check(h, Claims{})
	// The two primaries show as such when the new one took a write while
	// the old still answered; when the old one's writes all came before
	// the new one's first, they show as a register no order explains.
	// Either way the suite sees them.
	for _, a := range rep.Anomalies {
		if a.Check == "two primaries" || a.Check == "linearizable" && a.Tenant == "t0" {
			t.Logf("found, as it must: %s", a)
			return
		}
	}
	t.Fatalf("a node whose clock stood still a lease, cut off from its leader and written to, gave no two primaries: %d operations, anomalies %v",
		rep.Ops, rep.Anomalies)
}

// A binary built without the tag nemesis has none of the suite's hooks:
// no symbol of internal/nemesis, of the engine's fsync hook or of the
// node's test clock; no fenec-shard that reads a move's test pause.
func TestDefaultBuildHasNoHooks(t *testing.T) {
	for _, tc := range []struct {
		cmd, tagged string
		syms        []string
		hooked      string // a symbol the suite's build holds
	}{
		{"fenec-node", cluster.Bins().Node, []string{"internal/nemesis", "store.SyncHook", "store.noteSynced", "store.sizeForHook", "main.testHooks"}, "internal/nemesis"},
		{"fenec-shard", cluster.Bins().Shard, []string{"internal/nemesis", "main.testHooks"}, "main.testHooks"},
	} {
		bin := t.TempDir() + "/" + tc.cmd
		build := exec.Command("go", "build", "-o", bin, "github.com/fenec-go/fenec/cmd/"+tc.cmd)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build the default %s: %v\n%s", tc.cmd, err, out)
		}
		out, err := exec.Command("go", "tool", "nm", bin).Output()
		if err != nil {
			t.Fatalf("go tool nm: %v", err)
		}
		for _, sym := range tc.syms {
			if strings.Contains(string(out), sym) {
				t.Errorf("the default %s holds %s", tc.cmd, sym)
			}
		}
		tagged, err := exec.Command("go", "tool", "nm", tc.tagged).Output()
		if err != nil {
			t.Fatalf("go tool nm: %v", err)
		}
		if !strings.Contains(string(tagged), tc.hooked) {
			t.Errorf("the suite's %s has no hooks: the look above would pass whatever it looked at", tc.cmd)
		}
	}
}

// regressions are the runs that found something, kept by scenario and
// seed: each runs again (for -duration) and must find nothing but what
// its scenario knows. A seed fixes the schedule of faults and every
// client's choice of operations, not how the processes' timing falls on
// a shared machine, so the fix of each is also held by a test of its
// own that reproduces it every time (named beside it).
var regressions = []struct {
	scenario string
	seed     uint64
	found    string
}{
	{"power-100", 3, "a copy whose connection was reset before its feed's head came back did not follow its primary for three keepalives " +
		"(45 s) after a power loss healed; node.TestFollowerLosesConnectionBeforeHead"},
	{"corrupt", 1, "a copy whose file was damaged was never replaced; region.TestDamagedCopyReplacedCP; " +
		"and the suite read a copy recorded behind (replica_behind, a seq) as a bool"},
	{"move", 100, "a move onto the copy's node, put back after its router was killed, left the directory naming " +
		"a copy that the move had deleted, and nothing made it again; region.TestMoveOntoCopyPutBackCP, region.TestCopyOwedByStoppedRouterCP"},
}

func TestNemesisRegression(t *testing.T) {
	for _, r := range regressions {
		t.Run(r.scenario+"/"+itoa(r.seed), func(t *testing.T) {
			sc, ok := ScenarioNamed(r.scenario)
			if !ok {
				t.Fatalf("no scenario %q", r.scenario)
			}
			t.Logf("found before: %s", r.found)
			res := RunScenario(t, sc, r.seed, Options{Duration: *flagDuration, Lease: *flagLease, Results: *flagResults})
			for _, a := range res.Report.Anomalies {
				t.Errorf("anomaly: %s", a)
			}
		})
	}
}
