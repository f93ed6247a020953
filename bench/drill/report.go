package main

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// secs shows a duration in seconds (- for none).
func secs(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return fmt.Sprintf("%.2f", d.Seconds())
}

func millis(d time.Duration) string { return fmt.Sprintf("%d", d.Milliseconds()) }

// span is "min–max" of the durations.
func span(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	if slices.Contains(ds, -1) {
		return "never"
	}
	return secs(slices.Min(ds)) + "–" + secs(slices.Max(ds))
}

func (r result) cutText() string {
	return fmt.Sprintf("%.0f/%.0f/%.0f/%.0f", r.cut["resent"], r.cut["failed_502"], r.cut["stream_ended"], r.cut["left"])
}

func errText(errs map[int]int) string {
	if len(errs) == 0 {
		return "none"
	}
	var parts []string
	for s, n := range errs {
		name := fmt.Sprint(s)
		if s == 0 {
			name = "no answer"
		}
		parts = append(parts, fmt.Sprintf("%s×%d", name, n))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// line is one run in a line, for the log while the drill runs.
func (r result) line() string {
	if r.notRun != "" {
		return fmt.Sprintf("%s #%d: not run: %s", r.kase, r.run, r.notRun)
	}
	if rr := r.rehomeRun; rr != nil {
		return fmt.Sprintf("%s #%d: seed %d; %d moves (%s); %d acknowledged, %d lost; straight writes to a move's other node: %s; overlaps %d",
			r.kase, r.run, rr.seed, len(rr.moves), rr.endedText(), rr.acked, rr.lost, countText(rr.probes), rr.overlaps())
	}
	if pr := r.partRun; pr != nil {
		return fmt.Sprintf("%s #%d: link %s; promoted %s s after the cut; region tenants wrote again from us %s s after the promotion, eu's side last acknowledged %s s after the cut, %d overlapping; all out of eu at %s s; zone tenants acknowledged during the cut: eu's side %d, us's %d; %d acknowledged, %d lost (%s); eu's side answered during the cut: %s",
			r.kase, r.run, r.linkText(), secs(pr.cutToPromo), span(pr.wroteAgain), span(pr.euLast), pr.overlap, secs(pr.failedOver), pr.zoneEU, pr.zoneUS, pr.acked, pr.lost, countText(pr.lostBy), countText(pr.euAnswers))
	}
	if lr := r.lostRun; lr != nil {
		return fmt.Sprintf("%s #%d: link %s; promoted %s s after the kill; region tenants wrote again %s s after the promotion (bound %s s; first through %s; through us1/us2 %s s), all out of eu at %s s; %d acknowledged, %d lost; zone tenants: %d acknowledged before, %d after; answered %s",
			r.kase, r.run, r.linkText(), secs(lr.killToPromo), span(lr.wroteAgain), secs(lr.bound), viaText(lr.firstVia), span(lr.viaUS), secs(lr.failedOver), lr.acked, lr.lost, lr.zoneAcked, lr.zoneAfter, lr.zoneText())
	}
	return fmt.Sprintf("%s #%d: wrote again %s s after the kill, failed over at %s s, %d acknowledged, %d lost, cut %s, region's others paused %s ms (replica on n1: %s ms; %s ms before)",
		r.kase, r.run, span(r.wroteAgain), secs(r.failedOver), r.acked, r.lost, r.cutText(), millis(r.pause), millis(r.pauseCopy), millis(r.pauseBefore))
}

// problems are what -check fails on.
func (r result) problems() []string {
	var out []string
	if r.notRun != "" {
		return nil
	}
	out = append(out, r.lin.problems(r.kase, r.run)...)
	if rr := r.rehomeRun; rr != nil {
		return append(out, rr.problems(r.kase, r.run)...)
	}
	if pr := r.partRun; pr != nil {
		if pr.lost > 0 {
			out = append(out, fmt.Sprintf("%s #%d lost %d acknowledged writes (%s)", r.kase, r.run, pr.lost, countText(pr.lostBy)))
		}
		if pr.overlap > 0 {
			out = append(out, fmt.Sprintf("%s #%d: %d region tenants had writes acknowledged on both sides of the cut at once", r.kase, r.run, pr.overlap))
		}
		if len(pr.wroteAgain) == 0 || slices.Contains(pr.wroteAgain, -1) {
			out = append(out, fmt.Sprintf("%s #%d: a region tenant's writer in us never wrote again", r.kase, r.run))
		}
		return out
	}
	if lr := r.lostRun; lr != nil {
		if lr.lost > 0 {
			out = append(out, fmt.Sprintf("%s #%d lost %d acknowledged writes of region tenants", r.kase, r.run, lr.lost))
		}
		if len(lr.wroteAgain) == 0 || slices.Contains(lr.wroteAgain, -1) {
			out = append(out, fmt.Sprintf("%s #%d: a region tenant's writer never wrote again", r.kase, r.run))
		}
		return out
	}
	if r.lost > 0 {
		out = append(out, fmt.Sprintf("%s #%d lost %d acknowledged writes", r.kase, r.run, r.lost))
	}
	if len(r.wroteAgain) == 0 || slices.Contains(r.wroteAgain, -1) {
		out = append(out, fmt.Sprintf("%s #%d: a dead node's writer never wrote again", r.kase, r.run))
	}
	return out
}

// linkText is the wide-area link a run had.
func (r result) linkText() string {
	if r.wanMode == "" {
		return "none"
	}
	s := fmt.Sprintf("%v each way (%s)", r.wanDelay, r.wanMode)
	if lr := r.lostRun; lr != nil && lr.link.far > 0 {
		s += fmt.Sprintf(", health us1→eu1 %d ms vs us1→us2 %d ms", lr.link.far.Milliseconds(), lr.link.near.Milliseconds())
	}
	if pr := r.partRun; pr != nil && pr.link.far > 0 {
		s += fmt.Sprintf(", health us1→eu1 %d ms vs us1→us2 %d ms", pr.link.far.Milliseconds(), pr.link.near.Milliseconds())
	}
	return s
}

// report is the whole table.
func report(cfg config, results []result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "make drill — %s, %s/%s, %d cores\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	fmt.Fprintf(&b, "deploy/compose.yaml, TLS on every link: global tier g1 (leads) + g2, g3; regions eu (eu1 leads the region's directory,\n")
	fmt.Fprintf(&b, "linked to the global one; eu2, eu3; nodes n1–n3), us (us1–us3; n4, n5) and ap (ap1–ap3; n6, n7); nodes --lease --sync always, every tenant\n")
	fmt.Fprintf(&b, "a replica; routers --auto-failover 2 --upstream-timeout 4 (a region's leading router leases its nodes once handed them).\n")
	var lost, part, cut, rehome []result
	for _, r := range results {
		switch {
		case r.rehomeRun != nil:
			rehome = append(rehome, r)
		case r.lostRun != nil:
			lost = append(lost, r)
		case r.partRun != nil:
			part = append(part, r)
		default:
			cut = append(cut, r)
		}
	}
	if len(cut) > 0 {
		reportCut(&b, cfg, cut)
	}
	if len(lost) > 0 {
		reportLost(&b, cfg, lost)
	}
	if len(part) > 0 {
		reportPartitioned(&b, cfg, part)
	}
	if len(rehome) > 0 {
		reportRehome(&b, cfg, rehome)
	}
	return b.String()
}

// reportCut is the table of the cases that lose n1.
func reportCut(b *strings.Builder, cfg config, results []result) {
	fmt.Fprintf(b, "%d tenants a node, each written by one keyed writer (Idempotency-Key, sent again until 200) through its region's\n", cfg.tenants)
	fmt.Fprintf(b, "routers (eu1/eu2, us1/us2, ap1/ap2) in turn; %s after the kill of n1 (disconnected from the network first), every acknowledged\n", cfg.after)
	fmt.Fprintf(b, "key read back. Target: writers write again within 2.5 s of the kill (the seed's 1.93–2.52 s; 3.94 s before cutting).\n\n")
	tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "case\trun\twrote again (s)\tn1's writers paused (s)\tfailed over (s)\tcut→kill (ms)\tacked\tlost\tcut resent/502/streams/left\teu others' longest pause (ms)\treplica on n1 (ms)\tbefore the cut (ms)\tus (ms)\tn1's writers saw\treplica on n1 saw\tlinearizable")
	for _, r := range results {
		if r.notRun != "" {
			fmt.Fprintf(tw, "%s\t%d\tnot run: %s\n", r.kase, r.run, r.notRun)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.kase, r.run, span(r.wroteAgain), secs(r.victimPause), secs(r.failedOver),
			millis(r.disconnected), r.acked, r.lost, r.cutText(), millis(r.pause), millis(r.pauseCopy), millis(r.pauseBefore), millis(r.otherRegion), errText(r.victimErrors), errText(r.copyErrors), r.lin.text())
	}
	tw.Flush()
	fmt.Fprintf(b, "\nwrote again: from the kill to each of n1's tenants' first acknowledged write after it (min–max over the tenants).\n")
	fmt.Fprintf(b, "failed over: from the kill to the leading router's placements showing every n1 tenant on its copy.\n")
	fmt.Fprintf(b, "eu others: the longest time without an acknowledged write, from the cut to the end, of eu's tenants on n2 and n3 whose\n")
	fmt.Fprintf(b, "replica is elsewhere; \"replica on n1\" those whose replica was n1: under --sync always a write waits for a dead copy\n")
	fmt.Fprintf(b, "half the lease (--replica-wait, at most half the lease), then a round of grants for the router to record the copy\n")
	fmt.Fprintf(b, "behind, within the routers' upstream timeout (4 s); \"before the cut\": all of eu's others over the warm-up; us: region us.\n")
	fmt.Fprintf(b, "n1's writers saw, replica on n1 saw: the answers other than 200 those writers got, by status (none: the routers resent\n")
	fmt.Fprintf(b, "every keyed write cut from n1 to the new primary).\n")
	linLines(b, results)
	linLegend(b)
	fmt.Fprintf(b, "cases: cut = disconnect + kill, names looked up at Docker's resolver; resolver = disconnect + remove, names looked up\n")
	fmt.Fprintf(b, "at a resolver that never answers a name Docker lacks; region = the global tier stopped and eu and us\n")
	fmt.Fprintf(b, "leasing their own nodes (a forced handoff each), Docker's resolver.\n")
}

// reportLost is the lost case's table.
func reportLost(b *strings.Builder, cfg config, results []result) {
	fmt.Fprintf(b, "\nlost: region eu lost whole — n1–n3, eu1–eu3 and g1 (the global tier's leader) killed at once, g2 (in us) promoted\n")
	fmt.Fprintf(b, "(POST /_shard/promote, asked again every 200 ms until answered 200) as soon as the kill returned. %d tenants on each of eu's nodes, every other one `survive: region`\n", cfg.tenants)
	fmt.Fprintf(b, "with its copy on n4 or n5, the rest `zone`; each written by a keyed writer from us, every write sent to us1 or us2 first\n")
	fmt.Fprintf(b, "and to g2 when that router does not take it (us's routers hold us's tenants and those with a copy in us: the region tenants, not the zone ones). Writers ran %s after the promotion.\n\n", cfg.after)
	tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "run\tlink\tkill took (s)\tkill→promoted (s)\tpromotions asked\tregion tenants wrote again (s)\tbound (s)\tfirst through\tthrough us1/us2 (s)\tall out of eu (s)\tacked\tlost\tzone acked before/after\tlinearizable")
	for _, r := range results {
		lr := r.lostRun
		if r.notRun != "" {
			fmt.Fprintf(tw, "%d\tnot run: %s\n", r.run, r.notRun)
			continue
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d/%d\t%s\n", r.run, r.linkText(), secs(lr.killTook), secs(lr.killToPromo), lr.promoTries, span(lr.wroteAgain), secs(lr.bound),
			viaText(lr.firstVia), span(lr.viaUS), secs(lr.failedOver), lr.acked, lr.lost, lr.zoneAcked, lr.zoneAfter, r.lin.text())
	}
	tw.Flush()
	for _, r := range results {
		if lr := r.lostRun; lr != nil && r.notRun == "" {
			if lr.promoRefused != "" {
				fmt.Fprintf(b, "run %d, the first promotion asked: %s\n", r.run, lr.promoRefused)
			}
			fmt.Fprintf(b, "run %d, the zone tenants' writers after the kill, by router and status: %s; the first body of each router's and status's answer:\n", r.run, lr.zoneText())
			keys := make([]string, 0, len(lr.zoneBodies))
			for k := range lr.zoneBodies {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				fmt.Fprintf(b, "  %s: %s\n", k, lr.zoneBodies[k])
			}
		}
	}
	fmt.Fprintf(b, "wrote again: from the promotion answered to each region tenant's first acknowledged write after it (min–max); bound:\n")
	fmt.Fprintf(b, "the leases eu's nodes may still run (lease %v × 1.1), a round of grants (lease / 3) and a round trip of the link.\n", lostLease)
	fmt.Fprintf(b, "lost: region tenants' acknowledged writes not read back from the node g2 places them on after (a tenant still placed\n")
	fmt.Fprintf(b, "in eu counts all its writes lost). The zone tenants' writes stay on eu's dead nodes and are not read back.\n")
	fmt.Fprintf(b, "eu is dead after the kill: a read after the promotion missing a write eu's primary acknowledged before it fails it.\n")
	linLines(b, results)
	linLegend(b)
}

// reportPartitioned is the partitioned case's table.
func reportPartitioned(b *strings.Builder, cfg config, results []result) {
	fmt.Fprintf(b, "\npartitioned: region eu cut off from us and ap but alive — every packet between n1–n3, eu1–eu3, g1 (the global tier's\n")
	fmt.Fprintf(b, "leader) and the other regions dropped in eu's containers' namespaces — and g2 (in us) promoted as soon as the cut was in place.\n")
	fmt.Fprintf(b, "The lost case's tenants (%d on each of eu's nodes, every other one `survive: region` with its copy on n4 or n5), each\n", cfg.tenants)
	fmt.Fprintf(b, "written by two keyed writers with keys of their own: one from us (us1/us2, then g2), one from eu (eu1/eu2). The cut\n")
	fmt.Fprintf(b, "healed %s after the promotion; the writers ran 8 s more; then every write acknowledged on either side read back.\n\n", cfg.after)
	tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "run\tlink\tcut→promoted (s)\tregion tenants wrote again from us (s)\teu's side last acknowledged (s)\toverlapping\tall out of eu (s)\tzone acked during the cut eu/us\tacked\tlost\tlinearizable")
	for _, r := range results {
		pr := r.partRun
		if r.notRun != "" {
			fmt.Fprintf(tw, "%d\tnot run: %s\n", r.run, r.notRun)
			continue
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%d/%d\t%d\t%d\t%s\n", r.run, r.linkText(), secs(pr.cutToPromo), span(pr.wroteAgain), span(pr.euLast),
			pr.overlap, secs(pr.failedOver), pr.zoneEU, pr.zoneUS, pr.acked, pr.lost, r.lin.text())
	}
	tw.Flush()
	for _, r := range results {
		if pr := r.partRun; pr != nil && r.notRun == "" {
			fmt.Fprintf(b, "run %d, lost by side and kind: %s; eu's side's answers other than 200 during the cut: %s; the first body of each:\n", r.run, countText(pr.lostBy), countText(pr.euAnswers))
			for _, l := range pr.lostSome {
				fmt.Fprintf(b, "  lost: %s\n", l)
			}
			keys := make([]string, 0, len(pr.euBodies))
			for k := range pr.euBodies {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				fmt.Fprintf(b, "  %s: %s\n", k, pr.euBodies[k])
			}
		}
	}
	fmt.Fprintf(b, "wrote again: from the promotion answered to each region tenant's first write acknowledged from us after it (min–max);\n")
	fmt.Fprintf(b, "eu's side last acknowledged: from the cut to each region tenant's last write acknowledged from eu before the heal (-1: none);\n")
	fmt.Fprintf(b, "overlapping: region tenants whose eu side had a write acknowledged after us's side had its first (two primaries).\n")
	fmt.Fprintf(b, "lost: writes acknowledged on either side not read back from the node g2 places the tenant on once healed.\n")
	linLines(b, results)
	linLegend(b)
}

// reportRehome is the rehome case's table: a row a move.
func reportRehome(b *strings.Builder, cfg config, results []result) {
	fmt.Fprintf(b, "\nrehome: %d tenants on each of eu's nodes (every other one `survive: region`, its copy on n4 or n5), each written by two\n", cfg.tenants)
	fmt.Fprintf(b, "keyed writers with keys of their own, one from us (us1/us2, then g2), one from eu (eu1/eu2, then g2), while each is moved\n")
	fmt.Fprintf(b, "(POST /_shard/tenants/<t>/move on the leading router): clean = to a node of us and back, one at a time, through g1;\n")
	fmt.Fprintf(b, "killed = every tenant to the other region at once and g1 killed (docker kill) a drawn delay after, g2 promoted;\n")
	fmt.Fprintf(b, "cut = one at a time through g2, the move's source cut off from every other container a drawn delay after, for %v.\n\n", rehomeCutFor)
	for _, r := range results {
		rr := r.rehomeRun
		if r.notRun != "" {
			fmt.Fprintf(b, "run %d: not run: %s\n", r.run, r.notRun)
			continue
		}
		fmt.Fprintf(b, "run %d: link %s; seed %d; g2 promoted %s s after the kill\n", r.run, r.linkText(), rr.seed, secs(rr.promoted))
		tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "phase\ttenant\tmove\tdelay (ms)\tlast step seen\tanswer\tpause_ms\tms\tended\tsettled (s)\tlongest gap (ms)\toverlap\telsewhere\tother node answered\twriters refused\tlinearizable")
		for _, m := range rr.moves {
			delay, step := "-", "-"
			if m.phase != "clean" {
				delay, step = millis(m.delay), m.lastStep
			}
			pause, ms := "-", "-"
			if m.pauseMS >= 0 {
				pause, ms = fmt.Sprint(m.pauseMS), fmt.Sprint(m.ms)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s→%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", m.phase, m.tenant, m.from, m.to, delay, step, m.answer, pause, ms,
				m.ended, secs(m.settleTook), millis(m.gap), m.overlap, m.elsewhere, m.probe, countText(m.writersSaw), r.lin.verdict(m.tenant))
		}
		tw.Flush()
		fmt.Fprintf(b, "run %d: %d acknowledged, %d lost; %d acknowledgements named no known node; straight writes to a move's other node: %s\n",
			r.run, rr.acked, rr.lost, rr.unknown, countText(rr.probes))
		for _, l := range rr.lostSome {
			fmt.Fprintf(b, "  lost: %s\n", l)
		}
		fmt.Fprintf(b, "run %d: %s\n", r.run, r.lin.summary())
		for _, l := range r.lin.whyLines() {
			fmt.Fprintf(b, "  %s\n", l)
		}
		if len(rr.notActive) > 0 {
			fmt.Fprintf(b, "  not active at the end: %s\n", strings.Join(rr.notActive, ", "))
		}
	}
	fmt.Fprintf(b, "delay: the move asked → the kill or the cut; last step seen: the tenant's move_step (or not begun / done) in the leading\n")
	fmt.Fprintf(b, "router's placements, polled every 25 ms, last before it. answer: the move's own (no answer: its router killed; a move\n")
	fmt.Fprintf(b, "refused 409 before it began, its record changed as it was read, is asked again while the tenant is where it was).\n")
	fmt.Fprintf(b, "settled: clean, from the move asked; killed, from the promotion; cut, from the heal — to the tenant active on one node.\n")
	fmt.Fprintf(b, "longest gap: the longest time without an acknowledged write of the tenant (both writers), from the move asked to\n")
	fmt.Fprintf(b, "settled. overlap: writes the source acknowledged (Fenec-Node) that were sent after the target acknowledged one: two\n")
	fmt.Fprintf(b, "primaries; elsewhere: acknowledged by a third node (a failover) in the window. other node answered: a write sent\n")
	fmt.Fprintf(b, "straight to the move's node the tenant did not end on, data token: anything but 200 is a refusal.\n")
	linLegend(b)
}

// linLines are each run's check in a sentence, and where each history
// not linearizable stopped.
func linLines(b *strings.Builder, results []result) {
	for _, r := range results {
		if r.notRun != "" {
			continue
		}
		fmt.Fprintf(b, "run %d: %s\n", r.run, r.lin.summary())
		for _, l := range r.lin.whyLines() {
			fmt.Fprintf(b, "  %s\n", l)
		}
	}
}

// linLegend says what the linearizable column checks.
func linLegend(b *strings.Builder) {
	fmt.Fprintf(b, "linearizable: tenants whose history held, of how many. A tenant's writes are appends to a list (its inserts, in id\n")
	fmt.Fprintf(b, "order), and beside each writer a reader reads the whole list every %v through the router the writer asks, no\n", readEvery)
	fmt.Fprintf(b, "staleness asked for; every write and read is recorded with when it was sent and answered and, as tests/nemesis\n")
	fmt.Fprintf(b, "classifies answers (internal/history), done, refused or unknown (for porcupine, never returned). Porcupine checks\n")
	fmt.Fprintf(b, "which elements each read shows (a tenant's two writers append at once: the order's model cannot be searched in\n")
	fmt.Fprintf(b, "time), and the order is held apart: each read a prefix of the longest, an append acknowledged before another was\n")
	fmt.Fprintf(b, "sent ahead of it. Two primaries taking writes at once show as a read missing an append acknowledged before it was\n")
	fmt.Fprintf(b, "sent, or reads that fork. Timed out: porcupine found neither within -check-timeout, reported so, never as a pass;\n")
	fmt.Fprintf(b, "NOT fails the drill, its visualization written beside -out.\n")
}

// overlaps sums the moves' overlaps.
func (rr *rehomeResult) overlaps() int {
	n := 0
	for _, m := range rr.moves {
		n += m.overlap
	}
	return n
}

// endedText counts the moves by phase and how they ended.
func (rr *rehomeResult) endedText() string {
	m := map[string]int{}
	for _, mv := range rr.moves {
		m[mv.phase+" "+mv.ended]++
	}
	return countText(m)
}
