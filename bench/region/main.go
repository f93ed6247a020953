// Command region measures what per-region leasing buys, with the global
// tier a wide-area round trip away from region eu: the region's routers
// reach the global directory, and the global tier's router reaches eu's
// nodes, through proxies that hold every chunk for -wan each way.
//
//   - kill to writing again: eu1 (tenants written through eu's leading
//     router by keyed writers, copies on eu2) cut off from everyone; the
//     time until every tenant took a write through eu's router on eu2,
//     with eu leased by the global tier and with eu leasing its own nodes;
//   - the write pause of a planned handoff, to the region and back: the
//     longest time between two answered writes of any tenant;
//   - forwarding: a read through eu's leading router, and through a router
//     of the global tier beside it (a global standby, looking eu's nodes
//     up as eu does), p50 and p99: both forward from an in-memory copy.
//
// Nodes and routers each run as a process of their own (fenec-node,
// fenec-shard), built once at the start, on loopback; the proxies and the
// name servers are the bench's. Every node is recorded by name and each
// side looks names up at a DNS server of its own, which is how the global
// tier's router reaches eu's nodes through the slow proxies while eu's
// routers reach them straight. It prints a table and writes it to -out.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/fenec-go/fenec/bench/internal/benchkit"
)

const (
	adminToken = "bench-admin-token"
	replToken  = "bench-replication-token"
)

type config struct {
	lease   time.Duration
	wan     time.Duration
	runs    int
	tenants int
	reads   int
	out     string
	// the binaries every run starts, built once
	nodeBin, shardBin string
}

func main() {
	var cfg config
	flag.DurationVar(&cfg.lease, "lease", time.Second, "every router's lease (--auto-failover)")
	flag.DurationVar(&cfg.wan, "wan", 40*time.Millisecond, "added each way between eu and the global tier")
	flag.IntVar(&cfg.runs, "runs", 3, "runs of each kill")
	flag.IntVar(&cfg.tenants, "tenants", 10, "tenants on the node killed")
	flag.IntVar(&cfg.reads, "reads", 2000, "reads timed through each router (after a tenth as many to warm up)")
	flag.StringVar(&cfg.out, "out", "bench/region.txt", "file the table is written to")
	flag.Parse()
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "region bench:", err)
		os.Exit(1)
	}
}

func run(cfg config) error {
	nodeBin, shardBin, remove, err := benchkit.BuildTemp("region-bench")
	if err != nil {
		return err
	}
	defer remove()
	cfg.nodeBin, cfg.shardBin = nodeBin, shardBin
	var out bytes.Buffer
	fmt.Fprintf(&out, "fenec region bench, %s, %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), benchkit.Machine())
	fmt.Fprintf(&out, "the global tier (a leading router on the global directory) %v away each way from region eu (a leading router linked to the global directory, two --lease --sync always nodes, each the other's standby); lease %v\n",
		cfg.wan, cfg.lease)
	fmt.Fprintf(&out, "%d tenants on eu1, each written through eu's router by a keyed writer\n", cfg.tenants)
	fmt.Fprintf(&out, "routers and nodes each a process of their own (fenec-shard, fenec-node) on loopback; the wide-area link and the cut are proxies in the bench's process\n\n")

	kills := map[string][]time.Duration{}
	for _, leaser := range []string{"global", "region"} {
		for i := range cfg.runs {
			d, err := killRun(cfg, leaser)
			if err != nil {
				return fmt.Errorf("kill with eu leased by %s, run %d: %w", leaser, i+1, err)
			}
			kills[leaser] = append(kills[leaser], d)
			fmt.Fprintf(os.Stderr, "kill, leased by %s, run %d: %v\n", leaser, i+1, d)
		}
	}
	fmt.Fprintln(&out, "eu1 cut off from everyone at 0: until every tenant took a write through eu's router on eu2 (ms)")
	tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "eu leased by\t")
	for i := range cfg.runs {
		fmt.Fprintf(tw, "run %d\t", i+1)
	}
	fmt.Fprintln(tw, "median\t")
	for _, leaser := range []string{"global", "region"} {
		fmt.Fprintf(tw, "%s\t", leaser)
		for _, d := range kills[leaser] {
			fmt.Fprintf(tw, "%d\t", d.Milliseconds())
		}
		fmt.Fprintf(tw, "%d\t\n", median(kills[leaser]).Milliseconds())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(&out, "region / global (medians): %.2f\n\n", float64(median(kills["region"]))/float64(median(kills["global"])))

	h, err := handoffAndForward(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintln(&out, "a planned handoff under the writers: the longest time between two answered writes of any tenant")
	tw = tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "handoff\tasked to done ms\tlongest pause ms\t")
	fmt.Fprintf(tw, "to the region\t%d\t%d\t\n", h.toRegion.Milliseconds(), h.pauseToRegion.Milliseconds())
	fmt.Fprintf(tw, "back to the global tier\t%d\t%d\t\n", h.toGlobal.Milliseconds(), h.pauseToGlobal.Milliseconds())
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(&out)
	fmt.Fprintf(&out, "a keyed read of one tenant on eu1, one client, %d through each router in turns of a tenth, after a tenth to warm up (µs)\n", cfg.reads)
	tw = tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "through\tp50\tp99\t")
	fmt.Fprintf(tw, "eu's router (its region's copy)\t%.1f\t%.1f\t\n", us(h.regional.p50), us(h.regional.p99))
	fmt.Fprintf(tw, "a global-tier router beside it (the global directory)\t%.1f\t%.1f\t\n", us(h.global.p50), us(h.global.p99))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(&out, "regional / global p50: %.2f\n", float64(h.regional.p50)/float64(h.global.p50))
	os.Stdout.Write(out.Bytes())
	if cfg.out != "" {
		return os.WriteFile(cfg.out, out.Bytes(), 0o644)
	}
	return nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// killRun starts a deployment, has eu leased by leaser, and times eu1's
// loss under the writers.
func killRun(cfg config, leaser string) (time.Duration, error) {
	d, err := startDeployment(cfg)
	defer d.close()
	if err != nil {
		return 0, err
	}
	if leaser == "region" {
		if _, err := d.handoff(d.eu, "region"); err != nil {
			return 0, err
		}
		if err := d.waitLeased(d.eu, "eu1", "eu2"); err != nil {
			return 0, err
		}
	}
	w := d.startWriters()
	defer w.stop()
	if err := w.waitWrites(5); err != nil {
		return 0, err
	}
	w.markCut(time.Now())
	d.cut("eu1")
	if err := w.waitOn(d, "eu2"); err != nil {
		return 0, err
	}
	return w.lastResumed()
}

// handoffResult is the handoff and forwarding run's measurements.
type handoffResult struct {
	toRegion, toGlobal           time.Duration
	pauseToRegion, pauseToGlobal time.Duration
	regional, global             latencies
}

type latencies struct{ p50, p99 time.Duration }

func handoffAndForward(cfg config) (handoffResult, error) {
	var h handoffResult
	d, err := startDeployment(cfg)
	defer d.close()
	if err != nil {
		return h, err
	}
	w := d.startWriters()
	if err := w.waitWrites(20); err != nil {
		w.stop()
		return h, err
	}
	for _, step := range []struct {
		to    string
		took  *time.Duration
		pause *time.Duration
		via   *benchRouter
	}{{"region", &h.toRegion, &h.pauseToRegion, d.eu}, {"global", &h.toGlobal, &h.pauseToGlobal, d.global}} {
		w.resetPause()
		took, err := d.handoff(step.via, step.to)
		if err != nil {
			w.stop()
			return h, err
		}
		if err := w.waitWrites(20); err != nil {
			w.stop()
			return h, err
		}
		*step.took, *step.pause = took, w.longestPause()
	}
	w.stop()
	h.regional, h.global, err = d.readLatencies(d.eu, d.beside, cfg.reads)
	return h, err
}
