package nemesis

import (
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// row is one scenario's line of the table.
type row struct {
	scenario  string
	seeds     int
	ran       time.Duration
	ops       int
	faults    int
	anomalies int
	known     int
	gap       time.Duration
	gapOn     string
	unchecked int
	bound     float64
	killedIn  map[string]int
}

// Table is the results by scenario: seeds run, minutes, operations,
// faults injected, anomalies found, and the longest a tenant went
// without a write against its lease.
func Table(results []Result, lease, faults time.Duration) string {
	var rows []*row
	by := map[string]*row{}
	for _, r := range results {
		rw := by[r.Scenario]
		if rw == nil {
			rw = &row{scenario: r.Scenario, bound: r.Bound, killedIn: map[string]int{}}
			by[r.Scenario] = rw
			rows = append(rows, rw)
		}
		rw.seeds++
		rw.ran += r.Ran
		rw.ops += r.Report.Ops
		rw.faults += r.Faults
		rw.anomalies += len(r.Report.Anomalies)
		rw.known += len(r.Report.Known)
		for k, n := range r.KilledIn {
			rw.killedIn[k] += n
		}
		rw.unchecked += len(r.Report.Unchecked)
		if r.Report.LongestGap > rw.gap {
			rw.gap, rw.gapOn = r.Report.LongestGap, fmt.Sprintf("seed %d, %s", r.Seed, r.Report.LongestGapOn)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "faults for %v a run; lease L = %v (every router's --auto-failover). known: anomalies written up and not yet fixed (docs/testing.md).\n", faults, lease)
	fmt.Fprintf(&b, "unchecked: objects porcupine ran out of time on. longest: the longest a tenant went without an acknowledged write;\n")
	fmt.Fprintf(&b, "bound: the longest the lease arithmetic allows under the scenario's faults (Scenario.Bound), both in leases.\n\n")
	fmt.Fprintf(&b, "%-10s %5s %8s %9s %7s %9s %6s %9s %8s %6s  %s\n", "scenario", "seeds", "minutes", "ops", "faults", "anomalies", "known", "unchecked", "longest", "bound", "where")
	for _, rw := range rows {
		fmt.Fprintf(&b, "%-10s %5d %8.1f %9d %7d %9d %6d %9d %7.2fL %5.1fL  %s\n", rw.scenario, rw.seeds, rw.ran.Minutes(), rw.ops,
			rw.faults, rw.anomalies, rw.known, rw.unchecked, float64(rw.gap)/float64(lease), rw.bound, rw.gapOn)
	}
	var kills []string
	for _, rw := range rows {
		if len(rw.killedIn) == 0 {
			continue
		}
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(rw.killedIn)) {
			parts = append(parts, fmt.Sprintf("%s %d", k, rw.killedIn[k]))
		}
		kills = append(kills, fmt.Sprintf("  %s: %s", rw.scenario, strings.Join(parts, ", ")))
	}
	if len(kills) > 0 {
		b.WriteString("\nprocesses killed in the middle of a handoff or a move, by the state it was seen in:\n")
		b.WriteString(strings.Join(kills, "\n") + "\n")
	}
	return b.String()
}

// WriteTable writes the table to path, with what was run, when and
// where.
func WriteTable(path, what, table string) error {
	host, _ := os.Hostname()
	head := fmt.Sprintf("make nemesis: %s; %s on %s (%d cores)\n\n", what, time.Now().UTC().Format(time.RFC3339), host, runtime.NumCPU())
	return os.WriteFile(path, []byte(head+table), 0o644)
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
