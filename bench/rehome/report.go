package main

import (
	"bytes"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fenec-go/fenec/bench/internal/benchkit"
)

// results is one way of moving's measurements.
type results struct {
	moves    []moved
	acked    int
	refusals map[int]int
	lost     int
	bytes    int64
}

// medians are the medians of the longest gap, the move's time and the
// pause the router reports, in ms, over moves.
func medians(ms []moved) (gap, took, pause float64) {
	var g, t, p []float64
	for _, m := range ms {
		g = append(g, float64(m.gap)/float64(time.Millisecond))
		t = append(t, float64(m.ms))
		p = append(p, float64(m.pauseMS))
	}
	return benchkit.Median(g), benchkit.Median(t), benchkit.Median(p)
}

// report is the run's table.
func report(cfg config, res map[string]*results, began time.Time, loadBefore, loadAfter, commit string) []byte {
	var out bytes.Buffer
	fmt.Fprintf(&out, "fenec rehome bench, %s, commit %s\n", began.UTC().Format("2006-01-02 15:04 MST"), commit)
	fmt.Fprintf(&out, "%s, %d cores; load average %s at the start, %s at the end\n",
		benchkit.CPUName(), runtime.NumCPU(), loadBefore, loadAfter)
	fmt.Fprintf(&out, "tenant t0: %d documents of a %d-float vector and a title (%.1f MB on disk), moved eu1 (region eu) -> us1 (region us) -> eu1, %d round(s); %v added each way between eu and us\n",
		cfg.docs, cfg.dims, float64(res["follow"].bytes)/1e6, cfg.rounds, cfg.delay)
	fmt.Fprintf(&out, "a writer beside the router g (in eu) begins %d writes/s through it, each with its Idempotency-Key, each asked again after any refusal until acknowledged; nodes --lease --sync always\n", cfg.rate)
	fmt.Fprintln(&out, "two deployments side by side, their moves taking turns: image = g --move-image (the source frozen for its image's copy), follow = the target's copy follows the source, frozen for the switch alone")
	fmt.Fprintln(&out, "routers and nodes each a process of their own (fenec-shard, fenec-node) on loopback; the wide-area link, the name servers and the writer are the bench's")
	fmt.Fprintln(&out, "gap: the longest time between two acknowledged writes from the move's start to a second after its answer, and when it ended (ms from the move's start) against when the move answered; move: its answer's ms; paused: its pause_ms (the source frozen until the flip, which comes just before the answer)")
	fmt.Fprintln(&out)

	tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "way\tto\tby\tgap ms\tgap ended\tanswered\tmove ms\tpaused ms\t")
	for _, mode := range modes {
		for _, m := range res[mode].moves {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%d\t%d\t%d\t%d\t\n", mode, m.to, m.by, float64(m.gap)/float64(time.Millisecond),
				m.gapEnd, m.answer, m.ms, m.pauseMS)
		}
	}
	tw.Flush()
	fmt.Fprintln(&out)

	tw = tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "way\tmoves\tgap ms p50\tgap ms max\tmove ms p50\tpaused ms p50\tacknowledged\trefusals asked again\tlost\t")
	for _, mode := range modes {
		r := res[mode]
		gap, took, pause := medians(r.moves)
		var worst time.Duration
		for _, m := range r.moves {
			worst = max(worst, m.gap)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%d\t%s\t%d\t\n", mode, len(r.moves), gap, float64(worst)/float64(time.Millisecond),
			took, pause, r.acked, refusals(r.refusals), r.lost)
	}
	tw.Flush()
	fmt.Fprintln(&out)
	ig, it, ip := medians(res["image"].moves)
	fg, ft, fp := medians(res["follow"].moves)
	fmt.Fprintf(&out, "follow against image, medians: longest gap %.3fx (%.0f against %.0f ms), source frozen %.3fx (%.0f against %.0f ms), whole move %.2fx (%.0f against %.0f ms)\n",
		ratio(fg, ig), fg, ig, ratio(fp, ip), fp, ip, ratio(ft, it), ft, it)
	return out.Bytes()
}

// refusals lists the refusals by status ("none" when there were none; 0
// is no answer).
func refusals(r map[int]int) string {
	if len(r) == 0 {
		return "none"
	}
	var parts []string
	for _, st := range slices.Sorted(maps.Keys(r)) {
		parts = append(parts, fmt.Sprintf("%d×%d", r[st], st))
	}
	return strings.Join(parts, " ")
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
