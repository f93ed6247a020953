package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The deployment's shape, as deploy/compose.yaml has it.
var (
	regionNodes   = map[string][]string{"eu": {"n1", "n2", "n3"}, "us": {"n4", "n5"}, "ap": {"n6", "n7"}}
	regionRouters = map[string][]string{"eu": {"eu1", "eu2"}, "us": {"us1", "us2"}, "ap": {"ap1", "ap2"}} // the writers' routers
	allRouters    = []string{"g1", "g2", "g3", "eu1", "eu2", "eu3", "us1", "us2", "us3", "ap1", "ap2", "ap3"}
)

// victim is the node the drill loses.
const victim = "n1"

// result is one run of one case.
type result struct {
	kase   string
	run    int
	notRun string // why the case measured nothing

	wroteAgain   []time.Duration // per tenant of the victim: kill → first write acknowledged after it
	victimPause  time.Duration   // the victim's tenants: longest time without an acknowledged write, across the cut
	failedOver   time.Duration   // kill → the directory showing every victim tenant elsewhere (-1: never)
	disconnected time.Duration   // how long before the kill the node was cut off
	acked, lost  int
	cut          map[string]float64 // requests the routers cut, by outcome
	pause        time.Duration      // the region's other tenants, their replica elsewhere: longest time without a write, from the cut on
	pauseCopy    time.Duration      // the region's other tenants whose replica was on the victim: the same
	pauseBefore  time.Duration      // the region's other tenants over the warm-up before the cut
	otherRegion  time.Duration      // the other region's tenants: longest pause from the cut on
	victimErrors map[int]int        // answers other than 200 the victim's writers saw, by status
	copyErrors   map[int]int        // the same, for the writers of tenants whose replica was the victim

	wanMode   string        // how the wide-area delay was put on ("": none)
	wanDelay  time.Duration // one way's
	lostRun   *lostResult   // the lost case's measures
	partRun   *partResult   // the partitioned case's
	rehomeRun *rehomeResult // the rehome case's

	writers []*writer  // every writer of the run, for the histories' check
	lin     *linResult // porcupine's check of each tenant's history
}

// runCase runs one case on a fresh deployment and takes it down after.
func runCase(ctx context.Context, cfg config, d *deployment, kase string, run int, keep bool) (result, error) {
	res := result{kase: kase, run: run, failedOver: -1}
	resolver := ""
	if kase == "resolver" {
		resolver = "resolver:5353"
	}
	_ = d.down() // what an interrupted run left
	ports, err := freePorts()
	if err != nil {
		return res, err
	}
	d.env = []string{"FENEC_LEASE=2", "FENEC_UPSTREAM_TIMEOUT=4", "FENEC_RESOLVER=" + resolver,
		"FENEC_LOG_FORMAT=text", "FENEC_PORTS=" + ports, "FENEC_PROMETHEUS_PORT=" + ports + "90"}
	if !keep {
		defer func() {
			if err := d.down(); err != nil {
				fmt.Fprintln(os.Stderr, "drill: take the deployment down:", err)
			}
		}()
	}
	uctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := d.up(uctx); err != nil {
		return res, err
	}
	if cfg.wan > 0 && slices.Contains(cfg.wanCases, kase) {
		wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		link, err := applyWAN(wctx, d, cfg.wan, cfg.wanMode, filepath.Join(filepath.Dir(d.file), "bin", "fenec-drill-wanproxy"))
		cancel()
		if err != nil {
			return res, err
		}
		defer link.stop()
		res.wanMode, res.wanDelay = link.mode, link.delay
	}
	hc := d.client(10*time.Second, 2)
	defer hc.CloseIdleConnections()
	if err := settle(uctx, d, hc); err != nil {
		return res, err
	}
	res, err = runKind(ctx, uctx, cfg, d, hc, kase, res)
	if err != nil || res.notRun != "" {
		return res, err
	}
	res.lin = checkHistories(res.writers, cfg.checkTimeout, cfg.visDir, fmt.Sprintf("%s-%d", kase, run))
	return res, nil
}

// runKind runs the case on the deployment up and settled.
func runKind(ctx, uctx context.Context, cfg config, d *deployment, hc *http.Client, kase string, res result) (result, error) {
	switch kase {
	case "lost":
		return runLost(ctx, cfg, d, hc, res)
	case "partitioned":
		return runPartitioned(ctx, cfg, d, hc, res)
	case "rehome":
		return runRehome(ctx, cfg, d, hc, res)
	}
	tenants, err := placeTenants(uctx, d, hc, cfg.tenants)
	if err != nil {
		return res, err
	}
	leader := "g1"
	if kase == "region" {
		if why, err := regionLeases(uctx, d, hc); err != nil || why != "" {
			res.notRun = why
			return res, err
		}
		leader = "eu1"
	}
	return measure(ctx, cfg, d, hc, kase, tenants, leader, res)
}

// measure runs the writers, loses the victim, and reads what came of it.
func measure(ctx context.Context, cfg config, d *deployment, hc *http.Client, kase string, tenants map[string]placed, leader string, res result) (result, error) {
	writers := startWriters(d, tenants)
	res.writers = writers
	wctx, stopWriters := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, w := range writers {
		wg.Go(func() { w.run(wctx) })
	}
	defer func() { stopWriters(); wg.Wait() }()
	before, err := scrapeCuts(ctx, d, hc)
	if err != nil {
		return res, err
	}
	const warm = 4 * time.Second
	time.Sleep(warm)

	id, err := d.container(ctx, victim)
	if err != nil {
		return res, err
	}
	cutAt := time.Now()
	if _, err := docker(ctx, "network", "disconnect", "-f", d.network(), id); err != nil {
		return res, err
	}
	killAt := time.Now()
	verb := []string{"kill", id}
	if kase == "resolver" {
		verb = []string{"rm", "-f", id} // its name unknown to Docker from now on
	}
	if _, err := docker(ctx, verb...); err != nil {
		return res, err
	}
	res.disconnected = killAt.Sub(cutAt)
	res.failedOver = watchFailover(ctx, d, hc, leader, tenants, killAt, cfg.after)
	if rest := time.Until(killAt.Add(cfg.after)); rest > 0 {
		time.Sleep(rest)
	}
	stopWriters()
	wg.Wait()
	after, err := scrapeCuts(ctx, d, hc)
	if err != nil {
		return res, err
	}
	res.cut = map[string]float64{}
	for k, v := range after {
		res.cut[k] = v - before[k]
	}
	return res, judge(ctx, d, hc, leader, writers, cutAt, killAt, cfg.after, warm, &res)
}

// judge reads every writer's acknowledged keys back and measures the
// pauses.
//
// The keys are read straight from each tenant's node as the leading router
// places it now, not through a router: a read that would show a write its
// dead copy never acknowledged waits for that copy as a write does (half
// the lease, then a round of grants; 5 s and more before the node's bound
// followed the lease, which the routers' upstream timeout, 4 s, cut every
// time — a finding of this drill, in bench/drill.txt's notes).
func judge(ctx context.Context, d *deployment, hc *http.Client, leader string, writers []*writer, cutAt, killAt time.Time, after, warm time.Duration, res *result) error {
	res.victimErrors, res.copyErrors = map[int]int{}, map[int]int{}
	end := killAt.Add(after)
	// Placements as the leading router has them, and each region's router
	// for what it does not list (with the global tier stopped, a region's
	// router lists its own region only).
	now := map[string]string{}
	for i, r := range []string{leader, "eu1", "us1"} {
		var rows []struct {
			Name string `json:"name"`
			Node string `json:"node"`
		}
		st, err := call(ctx, hc, "GET", d.url(r)+"/_shard/tenants", d.tokens["router"], nil, &rows)
		if err != nil || st != 200 {
			if i == 0 {
				return fmt.Errorf("placements: %d %v", st, err)
			}
			continue
		}
		for _, row := range rows {
			if _, ok := now[row.Name]; !ok {
				now[row.Name] = row.Node
			}
		}
	}
	slow := d.client(15*time.Second, 2)
	defer slow.CloseIdleConnections()
	for _, w := range writers {
		acks, errs := w.snapshot()
		have, err := readBack(ctx, slow, d.url(now[w.tenant]), d.tokens["http"], w.tenant)
		if err != nil {
			return err
		}
		for _, a := range acks {
			res.acked++
			if !have[a.k] {
				res.lost++
			}
		}
		switch {
		case w.node == victim:
			res.wroteAgain = append(res.wroteAgain, firstAfter(acks, killAt))
			res.victimPause = max(res.victimPause, longestGap(acks, cutAt.Add(-time.Second), end))
			for s, n := range errs {
				res.victimErrors[s] += n
			}
		case regionOf(w.node) == regionOf(victim):
			if w.replica == victim {
				res.pauseCopy = max(res.pauseCopy, longestGap(acks, cutAt, end))
				for s, n := range errs {
					res.copyErrors[s] += n
				}
			} else {
				res.pause = max(res.pause, longestGap(acks, cutAt, end))
			}
			res.pauseBefore = max(res.pauseBefore, longestGap(acks, cutAt.Add(-warm+time.Second), cutAt))
		default:
			res.otherRegion = max(res.otherRegion, longestGap(acks, cutAt, end))
		}
	}
	return nil
}

// nodeNames are every node of the deployment.
func nodeNames() []string {
	var out []string
	for _, ns := range regionNodes {
		out = append(out, ns...)
	}
	slices.Sort(out)
	return out
}

func regionOf(node string) string {
	for r, ns := range regionNodes {
		if slices.Contains(ns, node) {
			return r
		}
	}
	return ""
}

// settle waits until the global tier leads and leases every node, and
// every region's routers hold their copies.
func settle(ctx context.Context, d *deployment, hc *http.Client) error {
	if err := leasesRun(ctx, d, hc, "g1", 3*time.Minute); err != nil {
		return err
	}
	for _, r := range allRouters {
		if err := waitFor(ctx, time.Minute, r+" ready", func() error {
			if st, err := call(ctx, hc, "GET", d.url(r)+"/_ready", "", nil, nil); err != nil || st != 200 {
				return fmt.Errorf("%d %v", st, err)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// placed is where a tenant is: its node and its replica's.
type placed struct{ node, replica string }

// placeTenants places n tenants on every node through the global tier,
// each with a collection w of unique keys, and waits until every one has
// its replica and answers through its region's routers. It returns where
// each tenant is.
func placeTenants(ctx context.Context, d *deployment, hc *http.Client, n int) (map[string]placed, error) {
	out := map[string]placed{}
	for _, ns := range regionNodes {
		for _, node := range ns {
			for i := range n {
				t := fmt.Sprintf("t-%s-%d", node, i)
				if st, err := call(ctx, hc, "PUT", d.url("g1")+"/_shard/tenants/"+t, d.tokens["router"], map[string]string{"node": node}, nil); err != nil || st != 201 {
					return nil, fmt.Errorf("place %s on %s: %d %v", t, node, st, err)
				}
				q := map[string]string{"query": "create collection w (k int @unique)"}
				if st, err := call(ctx, hc, "POST", d.url("g1")+"/t/"+t+"/query", d.tokens["http"], q, nil); err != nil || st != 200 {
					return nil, fmt.Errorf("create w in %s: %d %v", t, st, err)
				}
				out[t] = placed{node: node}
			}
		}
	}
	err := waitFor(ctx, 2*time.Minute, "every tenant replicated and answering through its region", func() error {
		var rows []struct {
			Name    string `json:"name"`
			Replica string `json:"replica"`
		}
		if st, err := call(ctx, hc, "GET", d.url("g1")+"/_shard/tenants", d.tokens["router"], nil, &rows); err != nil || st != 200 {
			return fmt.Errorf("tenants: %d %v", st, err)
		}
		for _, r := range rows {
			if r.Replica == "" {
				return fmt.Errorf("%s has no replica yet", r.Name)
			}
			if p, ok := out[r.Name]; ok {
				out[r.Name] = placed{node: p.node, replica: r.Replica}
			}
		}
		for t, p := range out {
			for _, r := range regionRouters[regionOf(p.node)] {
				q := map[string]string{"query": "get w count"}
				if st, err := call(ctx, hc, "POST", d.url(r)+"/t/"+t+"/query", d.tokens["http"], q, nil); err != nil || st != 200 {
					return fmt.Errorf("%s through %s: %d %v", t, r, st, err)
				}
			}
		}
		return nil
	})
	return out, err
}

// regionLeases stops the global tier and asks eu's router to take eu's
// leasing by force. It returns why not when the router refuses.
func regionLeases(ctx context.Context, d *deployment, hc *http.Client) (string, error) {
	if _, err := d.compose(ctx, "stop", "-t", "5", "g1", "g2", "g3"); err != nil {
		return "", err
	}
	// Both regions take their leasing, so the other region's writers show
	// what it costs a region that lost no node.
	for _, r := range []string{"eu", "us"} {
		lead := regionRouters[r][0]
		req, _ := http.NewRequestWithContext(ctx, "POST", d.url(lead)+"/_shard/regions/"+r+"/handoff",
			strings.NewReader(`{"to": "region", "force": true}`))
		req.Header.Set("Authorization", "Bearer "+d.tokens["router"])
		res, err := hc.Do(req)
		if err != nil {
			return "", err
		}
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		res.Body.Close()
		if res.StatusCode != 200 {
			return fmt.Sprintf("the handoff of %s answered %d: %s", r, res.StatusCode, strings.TrimSpace(string(b))), nil
		}
		if err := waitFor(ctx, time.Minute, r+" leasing its nodes", func() error {
			var ls struct {
				Leasing bool `json:"leasing"`
			}
			if st, err := call(ctx, hc, "GET", d.url(lead)+"/_shard/leases", d.tokens["router"], nil, &ls); err != nil || st != 200 || !ls.Leasing {
				return fmt.Errorf("%s leases: %d %v %v", lead, st, ls.Leasing, err)
			}
			return nil
		}); err != nil {
			return "", err
		}
	}
	return "", nil
}

// startWriters makes a writer for every tenant, through its region's
// routers in turn.
func startWriters(d *deployment, tenants map[string]placed) []*writer {
	names := make([]string, 0, len(tenants))
	for t := range tenants {
		names = append(names, t)
	}
	slices.Sort(names)
	var out []*writer
	for i, t := range names {
		p := tenants[t]
		routers := regionRouters[regionOf(p.node)]
		out = append(out, newWriter(t, p.node, p.replica, []string{d.url(routers[i%len(routers)])}, d.tokens["http"], d.client(6*time.Second, 2)))
	}
	return out
}

// watchFailover polls the leading router's placements until every tenant of
// the victim is placed elsewhere, and returns how long after the kill that
// was first seen (-1 if not within limit).
func watchFailover(ctx context.Context, d *deployment, hc *http.Client, leader string, tenants map[string]placed, killAt time.Time, limit time.Duration) time.Duration {
	return watchPlaced(ctx, d, hc, leader, killAt, limit, func(now map[string]string) bool {
		moved := 0
		for t, n := range now {
			if tenants[t].node == victim && n != victim {
				moved++
			}
		}
		return moved > 0 && moved == countOn(tenants, victim)
	})
}

// watchPlaced polls router's placements (tenant → node) until done holds
// of them, and returns how long after from that was first seen (-1 if
// not within limit).
func watchPlaced(ctx context.Context, d *deployment, hc *http.Client, router string, from time.Time, limit time.Duration, done func(now map[string]string) bool) time.Duration {
	for time.Since(from) < limit {
		var rows []struct {
			Name string `json:"name"`
			Node string `json:"node"`
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := call(cctx, hc, "GET", d.url(router)+"/_shard/tenants", d.tokens["router"], nil, &rows)
		cancel()
		if err == nil && st == 200 {
			now := make(map[string]string, len(rows))
			for _, r := range rows {
				now[r.Name] = r.Node
			}
			if done(now) {
				return time.Since(from)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return -1
}

func countOn(tenants map[string]placed, node string) int {
	n := 0
	for _, p := range tenants {
		if p.node == node {
			n++
		}
	}
	return n
}

// scrapeCuts sums fenec_router_cut_requests_total by outcome over every
// router still up.
func scrapeCuts(ctx context.Context, d *deployment, hc *http.Client) (map[string]float64, error) {
	out := map[string]float64{}
	for _, r := range allRouters {
		req, _ := http.NewRequestWithContext(ctx, "GET", d.url(r)+"/_metrics", nil)
		req.Header.Set("Authorization", "Bearer "+d.tokens["router"])
		res, err := hc.Do(req)
		if err != nil {
			continue // a router stopped (the global tier, in the region case)
		}
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			rest, ok := strings.CutPrefix(line, `fenec_router_cut_requests_total{outcome="`)
			if !ok {
				continue
			}
			outcome, val, _ := strings.Cut(rest, `"} `)
			if f, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
				out[outcome] += f
			}
		}
		res.Body.Close()
	}
	return out, nil
}

// leasesRun waits, within a bound, until router leases every node and
// each runs its lease.
func leasesRun(ctx context.Context, d *deployment, hc *http.Client, router string, within time.Duration) error {
	return waitFor(ctx, within, router+" leasing every node", func() error {
		var ls struct {
			Leasing bool `json:"leasing"`
			Nodes   []struct {
				Node string `json:"node"`
				Ran  bool   `json:"ran"`
			} `json:"nodes"`
		}
		if st, err := call(ctx, hc, "GET", d.url(router)+"/_shard/leases", d.tokens["router"], nil, &ls); err != nil || st != 200 {
			return fmt.Errorf("leases: %d %v", st, err)
		}
		ran := 0
		for _, n := range ls.Nodes {
			if n.Ran {
				ran++
			}
		}
		if want := len(nodeNames()); !ls.Leasing || ran < want {
			return fmt.Errorf("leasing %v, %d of %d nodes run a lease", ls.Leasing, ran, want)
		}
		return nil
	})
}
