package tests

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/tests/cluster"
)

// soakFigures are what a soak measured: what the test logs, and make soak
// writes as a table (bench/soak.txt).
type soakFigures struct {
	plan         soakPlan
	took         time.Duration
	writes       int
	alone, under lightFigures
	hits         *hostileCounts
	peaks        map[string]int64 // resident peaks, by process
	audit        []int64          // audit logs' sizes: router, n1, n2

	// Read from the servers' series.
	upstream                 [2]float64 // fenec_router_upstream_errors_total of n1, n2
	failovers                float64
	bodiesRefused            float64 // fenec_router_refused_bodies_total, both reasons
	bodies503, bodies429     float64
	cutByNode, cutByClient   float64
	clientGone               float64 // fenec_router_requests_total{code="499"}, every route
	tokensRefused            float64 // fenec_router_refused_tokens_total, both answers
	routerConns, nodeConns   float64 // refused_connections_total, both reasons (n1)
	cancelledTime, cancelled float64 // n1's statements stopped at the time bound, and by their clients
	answersRefused           float64 // n1's fenec_node_answers_refused_total
}

// read reads the servers' series, one scrape of each.
func (f *soakFigures) read(t *testing.T, r *cluster.Router, n1 *cluster.Node) {
	t.Helper()
	s := seriesOf(t, r.Client())
	f.upstream = [2]float64{s[`fenec_router_upstream_errors_total{node="n1"}`], s[`fenec_router_upstream_errors_total{node="n2"}`]}
	f.failovers = s[`fenec_router_auto_failovers_total{outcome="done"}`] + s[`fenec_router_auto_failovers_total{outcome="partial"}`] +
		s[`fenec_router_auto_failovers_total{outcome="failed"}`]
	f.bodies503 = s[`fenec_router_refused_bodies_total{reason="total"}`]
	f.bodies429 = s[`fenec_router_refused_bodies_total{reason="address"}`]
	f.bodiesRefused = f.bodies503 + f.bodies429
	f.cutByNode = s[`fenec_router_answers_cut_total{by="node"}`]
	f.cutByClient = s[`fenec_router_answers_cut_total{by="client"}`]
	for _, route := range []string{"query", "batch", "rest", "changes", "other"} {
		f.clientGone += s[fmt.Sprintf(`fenec_router_requests_total{code="499",route="%s"}`, route)]
	}
	f.tokensRefused = s[`fenec_router_refused_tokens_total{answer="unauthorized"}`] + s[`fenec_router_refused_tokens_total{answer="held_off"}`]
	f.routerConns = s[`fenec_router_refused_connections_total{reason="address"}`] + s[`fenec_router_refused_connections_total{reason="total"}`]
	s = seriesOf(t, n1.Admin())
	f.nodeConns = s[`fenec_node_refused_connections_total{reason="address"}`] + s[`fenec_node_refused_connections_total{reason="total"}`]
	f.cancelledTime = s[`fenec_node_statements_cancelled_total{reason="time"}`]
	f.cancelled = s[`fenec_node_statements_cancelled_total{reason="client"}`]
	f.answersRefused = s["fenec_node_answers_refused_total"]
}

// seriesOf is every series of a server's /_metrics, by its name and
// labels as written there.
func seriesOf(t *testing.T, c *cluster.Client) map[string]float64 {
	t.Helper()
	res := c.Do("GET", "/_metrics", nil)
	wantStatus(t, res, 200, "metrics of "+c.Base())
	series := map[string]float64{}
	for _, line := range strings.Split(string(res.Body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); i > 0 && err == nil {
			series[line[:i]] = v
		}
	}
	return series
}

// auditBound is the bound on each audit log over the soak's minutes.
func (f *soakFigures) auditBound() int64 {
	return soakAuditBound(int(f.took/time.Minute)+2, len(soakShardAddrs)+8)
}

// unbounded is the least the router's audit log would hold written a
// line a refusal of the /_shard/ flood: its path alone cut at 200 bytes.
func (f *soakFigures) unbounded() int64 { return 200 * f.hits.shardRefused.Load() }

func (f *soakFigures) ratio() float64 {
	if f.alone.p(99) == 0 {
		return 0
	}
	return float64(f.under.p(99)) / float64(f.alone.p(99))
}

func (f *soakFigures) log(t *testing.T) {
	t.Logf("soak (%s): %d writes acknowledged and read back; hostile: %s", f.plan.name, f.writes, f.hits.String())
	t.Logf("light tenant: alone %d reads, p50 %v p99 %v; under attack %d reads, p50 %v p99 %v (p99 ×%.1f)",
		len(f.alone.took), f.alone.p(50), f.alone.p(99), len(f.under.took), f.under.p(50), f.under.p(99), f.ratio())
	t.Logf("router: upstream errors n1 %v n2 %v, failovers %v, bodies refused %v (503 %v, 429 %v), answers cut by node %v by client %v, 499s %v, tokens refused %v, connections refused %v; "+
		"n1: connections refused %v, statements stopped at the time bound %v and by their clients %v, answers refused for memory %v; audit logs %v bytes (bound %d each; a line a refusal would be %d bytes at least)",
		f.upstream[0], f.upstream[1], f.failovers, f.bodiesRefused, f.bodies503, f.bodies429, f.cutByNode, f.cutByClient, f.clientGone,
		f.tokensRefused, f.routerConns, f.nodeConns, f.cancelledTime, f.cancelled, f.answersRefused, f.audit, f.auditBound(), f.unbounded())
}

// table is the figures as make soak writes them.
func (f *soakFigures) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "TestSoakHostileClients, its %s plan (make soak: the long one): a router and two nodes under leases of %s s, four writers,\n", f.plan.name, soakLease)
	fmt.Fprintf(&b, "every attack at once for %v beside them; a collection of %d rows of 4 KB, `in` lists of %d values, %d unread readers\n",
		f.plan.attack, f.plan.rows, f.plan.inValues, f.plan.readers+f.plan.readers/2)
	fmt.Fprintf(&b, "(%d through the router, %d straight to the node); the run took %v. Measured %s.\n\n",
		f.plan.readers, f.plan.readers/2, f.took.Round(time.Second), time.Now().UTC().Format("2006-01-02"))
	row := func(k, v string) { fmt.Fprintf(&b, "| %-60s | %-44s |\n", k, v) }
	row("figure", "value")
	fmt.Fprintf(&b, "|%s|%s|\n", strings.Repeat("-", 62), strings.Repeat("-", 46))
	row("writes acknowledged (every one read back)", fmt.Sprint(f.writes))
	mib := func(n int64) string { return fmt.Sprintf("%d MiB", n>>20) }
	row("router resident peak (bound)", fmt.Sprintf("%s (%s)", mib(f.peaks["router"]), mib(soakRouterMemory)))
	row("n1 resident peak (bound)", fmt.Sprintf("%s (%s)", mib(f.peaks["n1"]), mib(soakNodeMemory)))
	row("n2 resident peak (bound)", fmt.Sprintf("%s (%s)", mib(f.peaks["n2"]), mib(soakNodeMemory)))
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
	row("light tenant p50 alone / under attack", ms(f.alone.p(50))+" / "+ms(f.under.p(50)))
	row("light tenant p99 alone / under attack", ms(f.alone.p(99))+" / "+ms(f.under.p(99)))
	row("light tenant p99 under attack / alone (bound)", fmt.Sprintf("%.1f (%d, alone floored at %v)", f.ratio(), soakSlowdown, soakSlowdownFloor))
	row("failovers", fmt.Sprint(f.failovers))
	row("upstream errors counted against n1, n2", fmt.Sprintf("%v, %v", f.upstream[0], f.upstream[1]))
	row("60 MiB tokenless bodies refused by the budget: 503, 429", fmt.Sprintf("%v, %v", f.bodies503, f.bodies429))
	row("60 MiB tokenless bodies sent whole, refused 401 by the node", fmt.Sprint(f.hits.bodies401.Load()))
	row("connections refused: router, n1", fmt.Sprintf("%v, %v", f.routerConns, f.nodeConns))
	row("unread answers begun, refused 503 (answer memory)", fmt.Sprintf("%d, %d", f.hits.readersBegun.Load(), f.hits.readersRefused.Load()))
	row("n1 answers refused for --max-answer-memory", fmt.Sprint(f.answersRefused))
	row("answers cut by the node, by the client", fmt.Sprintf("%v, %v", f.cutByNode, f.cutByClient))
	row("requests counted 499 (the client left)", fmt.Sprint(f.clientGone))
	row("heavy statements stopped: time bound, client gone", fmt.Sprintf("%v, %v", f.cancelledTime, f.cancelled))
	row("restores of zeros refused 400 at the header", fmt.Sprint(f.hits.restoreRefused.Load()))
	row("/_shard/ long paths refused (401, 429)", fmt.Sprintf("%d (router counted %v)", f.hits.shardRefused.Load(), f.tokensRefused))
	row("stalled bodies cut 408; bad tokens; early hang-ups", fmt.Sprintf("%d; %d; %d", f.hits.slow.Load(), f.hits.badToken.Load(), f.hits.hungUp.Load()))
	row("audit log bytes: router, n1, n2 (bound each)", fmt.Sprintf("%d, %d, %d (%d)", f.audit[0], f.audit[1], f.audit[2], f.auditBound()))
	row("router's audit log written a line a refusal, at least", fmt.Sprintf("%d bytes", f.unbounded()))
	return b.String()
}

// check fails t past any of the soak's bounds: an upstream error counted
// against a healthy node, a failover, an attack that never met its bound
// (of those run), a resident peak, an audit log, the light tenant's p99.
func (f *soakFigures) check(t *testing.T) {
	t.Helper()
	for i, name := range []string{"n1", "n2"} {
		if f.upstream[i] != 0 {
			t.Errorf("%v upstream errors counted against %s, a healthy node: FenecNodeUnreachable would page", f.upstream[i], name)
		}
	}
	if f.failovers != 0 {
		t.Errorf("the router failed over %v times", f.failovers)
	}
	h, on := f.hits, soakAttacksOn()
	if on["floods"] && (f.routerConns == 0 || f.nodeConns == 0) {
		t.Errorf("a flood of connections was never refused: router %v, n1 %v", f.routerConns, f.nodeConns)
	}
	if on["bodies"] && f.bodiesRefused == 0 {
		t.Errorf("no tokenless 60 MiB body was refused by the router's body budget: %s", h.String())
	}
	if on["restore"] && (h.restoreRefused.Load() == 0 || h.restoreOther.Load() != 0) {
		t.Errorf("restores of zeros: %d refused 400, %d answered otherwise", h.restoreRefused.Load(), h.restoreOther.Load())
	}
	if on["readers"] && (h.readersBegun.Load() == 0 || h.readersOther.Load() != 0) {
		t.Errorf("unread readers: %d answers begun, %d answered neither 200 nor 503", h.readersBegun.Load(), h.readersOther.Load())
	}
	if on["shard"] && (h.shardRefused.Load() == 0 || h.shardOther.Load() != 0) {
		t.Errorf("the /_shard/ flood: %d refused 401 or 429, %d answered otherwise", h.shardRefused.Load(), h.shardOther.Load())
	}
	for i, name := range []string{"router", "n1", "n2"} {
		bound := int64(soakNodeMemory)
		if name == "router" {
			bound = soakRouterMemory
		}
		if f.peaks[name] > bound {
			t.Errorf("%s: resident peak %d MiB, past its bound %d MiB", name, f.peaks[name]>>20, bound>>20)
		}
		if b := f.auditBound(); f.audit[i] > b {
			t.Errorf("%s's audit log: %d bytes, past its bound %d", name, f.audit[i], b)
		}
	}
	if limit := soakSlowdown * max(f.alone.p(99), soakSlowdownFloor); f.under.p(99) > limit {
		t.Errorf("the light tenant's p99 under attack %v, past %d times its p99 alone (%v, floored at %v)",
			f.under.p(99), soakSlowdown, f.alone.p(99), soakSlowdownFloor)
	}
}
