package main

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fenec-go/fenec/bench/internal/benchkit"
)

// results is one run's measurements.
type results struct {
	far, near, ryw, steady, tight sample
	direct                        sample          // the read straight to us1
	proxied                       sample          // the read through nginx in front of us1 (none: -nginx none)
	zone, region                  []time.Duration // (f)'s writes to z0 and to r0
	pairs                         checked
	began                         time.Time
	loadBefore, loadAfter         string
	commit                        string
}

// report is the run's table.
func report(cfg config, r results) []byte {
	var out bytes.Buffer
	fmt.Fprintf(&out, "fenec geo bench, %s, commit %s\n", r.began.UTC().Format("2006-01-02 15:04 MST"), r.commit)
	fmt.Fprintf(&out, "%s, %d cores; load average %s at the start, %s at the end\n",
		benchkit.CPUName(), runtime.NumCPU(), r.loadBefore, r.loadAfter)
	if busy(r.loadBefore) || busy(r.loadAfter) {
		fmt.Fprintln(&out, "NOTE: a load average above 4 on this machine: single figures are noisy; the ratios, dominated by the delay, still hold")
	}
	fmt.Fprintf(&out, "tenant t0 homed on eu1 (region eu; voting copy eu2, --sync always), its read copy on us1 (region us); %v added each way between us and eu\n", cfg.delay)
	fmt.Fprintln(&out, "(f)'s tenants on eu1 too: z0 survives its zone (voting copy eu2), r0 its region (voting copy us1); a writer beside eu1 writes to them in turns through g, one write at a time")
	fmt.Fprintln(&out, "the reader in us reads through near (fenec-shard --standby --near us, --copy-wait 250 ms), one keyed read of one row, one client on one connection")
	fmt.Fprintln(&out, "routers and nodes each a process of their own (fenec-shard, fenec-node) on loopback; the wide-area link, the name servers and the clients are the bench's")
	fmt.Fprintln(&out)

	tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tn\tp50 ms\tp99 ms\tmax ms\tby copy\tby primary\t")
	row := func(name string, ds []time.Duration, copies, primaries string) {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", name, len(ds),
			ms(benchkit.Percentile(ds, 0.5)), ms(benchkit.Percentile(ds, 0.99)), ms(benchkit.Percentile(ds, 1)), copies, primaries)
	}
	who := func(s sample) (string, string) {
		c, p := servedBy(s)
		return strconv.Itoa(c), strconv.Itoa(p)
	}
	c, p := who(r.far)
	row("(a) stating nothing", took(r.far), c, p)
	c, p = who(r.near)
	row("(b) Fenec-Max-Staleness: 1000", took(r.near), c, p)
	row("    the same read straight to us1, no router", took(r.direct), "-", "-")
	if len(r.proxied.answers) > 0 {
		row("    the same read through nginx to us1", took(r.proxied), "-", "-")
	}
	c, p = who(r.ryw)
	row("(c) Fenec-After of the client's write", took(r.ryw), c, p)
	row("(c) that write, through near to eu1", r.ryw.writes, "-", "-")
	c, p = who(r.steady)
	row(fmt.Sprintf("(d) Fenec-Max-Staleness: %d, %d writes/s on eu1", cfg.bound, cfg.rate), took(r.steady), c, p)
	row(fmt.Sprintf("(d) its writes, through g beside eu1 (%.0f/s)", float64(len(r.steady.writes))/cfg.steady.Seconds()), r.steady.writes, "-", "-")
	c, p = who(r.tight)
	row(fmt.Sprintf("(e) Fenec-Max-Staleness: %d, below the round trip", cfg.delay.Milliseconds()), took(r.tight), c, p)
	row("(f) a write to z0, survive zone (copy on eu2)", r.zone, "-", "-")
	row("(f) a write to r0, survive region (copy on us1)", r.region, "-", "-")
	tw.Flush()
	fmt.Fprintln(&out)

	fp50, fp99 := benchkit.Percentile(took(r.far), 0.5), benchkit.Percentile(took(r.far), 0.99)
	for _, x := range []struct {
		name string
		s    sample
	}{{"(b) / (a)", r.near}, {"(c) / (a)", r.ryw}, {"(e) / (a)", r.tight}} {
		fmt.Fprintf(&out, "%s: p50 %.4f, p99 %.4f\n", x.name,
			ratio(benchkit.Percentile(took(x.s), 0.5), fp50), ratio(benchkit.Percentile(took(x.s), 0.99), fp99))
	}
	dp50, dp99 := benchkit.Percentile(took(r.direct), 0.5), benchkit.Percentile(took(r.direct), 0.99)
	for _, x := range []struct {
		name string
		s    sample
	}{{"(b) / straight to us1", r.near}, {"(c) / straight to us1", r.ryw}} {
		fmt.Fprintf(&out, "%s: p50 %.2f, p99 %.2f\n", x.name,
			ratio(benchkit.Percentile(took(x.s), 0.5), dp50), ratio(benchkit.Percentile(took(x.s), 0.99), dp99))
	}
	if px := took(r.proxied); len(px) > 0 {
		pp50, pp99 := benchkit.Percentile(px, 0.5), benchkit.Percentile(px, 0.99)
		fmt.Fprintf(&out, "through nginx / straight to us1: p50 %.2f, p99 %.2f (what a hop through a plain proxy costs here)\n",
			ratio(pp50, dp50), ratio(pp99, dp99))
		fmt.Fprintf(&out, "(b) / through nginx: p50 %.2f, p99 %.2f (near's hop, a placement lookup and the copy's proof included, against nginx's)\n",
			ratio(benchkit.Percentile(took(r.near), 0.5), pp50), ratio(benchkit.Percentile(took(r.near), 0.99), pp99))
	}
	wc := costOf(r.zone, r.region, cfg.delay)
	fmt.Fprintf(&out, "(f) region / zone: p50 %.2f, p99 %.2f\n", wc.p50, wc.p99)
	fmt.Fprintf(&out, "(f) region's p50 less zone's: %s ms, against the round trip between eu and us (2 × %v = %v): %.2f round trips\n",
		ms(wc.extra), cfg.delay, wc.rtt, wc.trips)
	fmt.Fprintln(&out)

	fmt.Fprintln(&out, "the staleness the copy stated (Fenec-Staleness-Ms of its answers, ms)")
	tw = tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tanswers\tp50\tp99\tmax\t")
	for _, x := range []struct {
		name string
		s    sample
	}{{"(b) no writes", r.near}, {fmt.Sprintf("(d) %d writes/s", cfg.rate), r.steady}} {
		st := copyStaleness(x.s)
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t\n", x.name, len(st),
			msWhole(benchkit.Percentile(st, 0.5)), msWhole(benchkit.Percentile(st, 0.99)), msWhole(benchkit.Percentile(st, 1)))
	}
	tw.Flush()
	fmt.Fprintln(&out)
	fmt.Fprintf(&out, "(c) reads without the client's own write: %d of %d\n", r.ryw.wrong, r.ryw.checked)
	fmt.Fprintf(&out, "(d) answers missing a write acknowledged more than their stated staleness before they were sent: %d of %d (stating no bound, not checked: %d)\n",
		r.steady.wrong, r.steady.checked, r.steady.unbounded)
	g := r.pairs
	fmt.Fprintf(&out, "(g) %d write-then-read pairs by %d clients in us through near, eu1 killed (SIGKILL) after pair %d: writes acknowledged by %s; longest time no write was acknowledged %s ms; requests asked again %d\n",
		g.pairs, cfg.pairClients, g.killAt, primaries(g.primaries), ms(g.gap), g.retried)
	c, p = who(g.after)
	fmt.Fprintf(&out, "(g) Fenec-After of the client's write: %d reads (%s by the copy, %s by a primary), without that write: %d\n", g.after.checked, c, p, g.after.wrong)
	c, p = who(g.bounded)
	fmt.Fprintf(&out, "(g) Fenec-Max-Staleness: %d: %d reads (%s by the copy, %s by a primary), missing a write acknowledged more than their stated staleness before they were sent: %d of %d (stating no bound, not checked: %d)\n",
		cfg.pairBound, len(g.bounded.answers), c, p, g.bounded.wrong, g.bounded.checked, g.bounded.unbounded)
	st := copyStaleness(g.bounded)
	fmt.Fprintf(&out, "(g) the staleness the copy stated, ms: p50 %s, p99 %s, max %s\n",
		msWhole(benchkit.Percentile(st, 0.5)), msWhole(benchkit.Percentile(st, 0.99)), msWhole(benchkit.Percentile(st, 1)))
	var mismatched int
	for _, s := range []sample{r.near, r.ryw, r.steady, r.tight, g.after, g.bounded} {
		mismatched += disagree(s)
	}
	fmt.Fprintf(&out, "answers whose Fenec-Served-By disagreed with the node that gave them (Fenec-Node): %d\n", mismatched)
	return out.Bytes()
}

func took(s sample) []time.Duration {
	ds := make([]time.Duration, len(s.answers))
	for i, a := range s.answers {
		ds[i] = a.took
	}
	return ds
}

// servedBy counts the answers given by the copy (us1) and the primary.
func servedBy(s sample) (copies, primaries int) {
	for _, a := range s.answers {
		if a.node == "us1" {
			copies++
		} else {
			primaries++
		}
	}
	return copies, primaries
}

// disagree counts answers whose Fenec-Served-By does not name the role of
// the node that gave them.
func disagree(s sample) int {
	n := 0
	for _, a := range s.answers {
		want := "primary"
		if a.node == "us1" {
			want = "copy"
		}
		if a.servedBy != want {
			n++
		}
	}
	return n
}

// copyStaleness is the stated staleness of the copy's answers.
func copyStaleness(s sample) []time.Duration {
	var ds []time.Duration
	for _, a := range s.answers {
		if a.node == "us1" && a.stale >= 0 {
			ds = append(ds, time.Duration(a.stale)*time.Millisecond)
		}
	}
	return ds
}

func ms(d time.Duration) string      { return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) }
func msWhole(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// busy says whether a load average's first figure is above 4.
func busy(load string) bool {
	f, err := strconv.ParseFloat(strings.Fields(load + " x")[0], 64)
	return err == nil && f > 4
}

// primaries names the nodes that acknowledged writes, with how many each.
func primaries(by map[string]int) string {
	names := make([]string, 0, len(by))
	for n := range by {
		names = append(names, n)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, by[n])
	}
	return strings.Join(parts, ", ")
}
