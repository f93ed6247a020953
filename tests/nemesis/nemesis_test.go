//go:build nemesis

package nemesis

import (
	"flag"
	"strings"
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
	table := Table(results, *flagLease)
	t.Logf("\n%s", table)
	if *flagTable != "" {
		if err := WriteTable(*flagTable, table); err != nil {
			t.Error(err)
		}
	}
}
