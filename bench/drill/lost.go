package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// The lost case: region eu lost whole, the global tier's leader with it
// (DESIGN.md §10, docs/regions.md "What a tenant survives").
//
// Tenants are placed on eu's nodes, every other one set to survive its
// region (`PUT /_shard/tenants/<t>/survive`, its voting copy on a node of
// us), the rest left to zone (their copy on another node of eu). Each is
// written by a keyed writer from us: through one of us's routers, and
// through the global tier's router placed in us (g2) when us's router does
// not take it (a region's routers hold their own region's tenants only).
// Then every container of eu — n1–n3, eu1–eu3 — and g1, the global tier's
// leader, are killed at once, and the operator promotes g2 (`POST
// /_shard/promote`), whose global directory keeps its quorum with g2 and
// g3. Measured from the promotion: when each region tenant wrote again
// (the bound: what its leases may still run, lease × 1.1, a round of
// grants, lease / 3, and a round trip of the link), when g2's placements
// showed every one of them out of eu, every acknowledged write of theirs
// read back from where they are now, and what the zone tenants' writers
// were answered and how fast.

// lostLease is the lease the drill runs the deployment with (FENEC_LEASE).
const lostLease = 2 * time.Second

// lostRegion is the region lost, lostLeader the global tier's leader in it,
// lostPromoted the standby promoted (in us), lostRouters the routers of us
// the writers use first.
const (
	lostRegion   = "eu"
	lostLeader   = "g1"
	lostPromoted = "g2"
)

var lostRouters = []string{"us1", "us2"}

// lostResult is what one run of the lost case measured.
type lostResult struct {
	link         wanTimes                   // the link as measured before the loss
	region, zone int                        // tenants of each kind
	killTook     time.Duration              // the one docker kill of the region's containers, asked → returned
	killToPromo  time.Duration              // the kill returned → the promotion answered
	promoTries   int                        // the promotions asked until one was answered 200
	promoRefused string                     // the first promotion's refusal, if any
	bound        time.Duration              // lease × 1.1 + lease / 3 + a round trip
	wroteAgain   []time.Duration            // region tenants: promotion → first acknowledged write after it
	firstVia     map[string]int             // the router of each one's first write after the promotion
	viaUS        []time.Duration            // promotion → the first write acknowledged by one of us's own routers (-1: none)
	failedOver   time.Duration              // promotion → g2 placing every region tenant out of eu (-1: not seen)
	acked, lost  int                        // region tenants' acknowledged writes, and those not read back
	zoneAcked    int                        // zone tenants' writes acknowledged before the loss (on eu's nodes: not read back)
	zoneAnswers  map[string][]time.Duration // zone tenants' answers after the kill by router and status: how long each took
	zoneBodies   map[string]string          // the first body of each router's and status's answer to them
	zoneAfter    int                        // zone tenants' writes acknowledged after the kill
}

// runLost is the lost case on a settled deployment.
func runLost(ctx context.Context, cfg config, d *deployment, hc *http.Client, res result) (result, error) {
	lr := &lostResult{failedOver: -1, firstVia: map[string]int{}, zoneAnswers: map[string][]time.Duration{}, zoneBodies: map[string]string{}}
	res.lostRun = lr
	tenants, survive, err := placeLost(ctx, d, hc, cfg.tenants)
	if err != nil {
		return res, err
	}
	if lr.link, err = measureWAN(ctx, d); err != nil {
		return res, fmt.Errorf("measure the link: %w", err)
	}
	lr.bound = lostLease*11/10 + lostLease/3 + 2*res.wanDelay

	writers := lostWriters(d, tenants)
	res.writers = writers
	wctx, stopWriters := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, w := range writers {
		wg.Go(func() { w.run(wctx) })
	}
	defer func() { stopWriters(); wg.Wait() }()
	const warm = 4 * time.Second
	time.Sleep(warm)

	asked, killAt, err := killRegion(ctx, d)
	if err != nil {
		return res, err
	}
	lr.killTook = killAt.Sub(asked)
	promoAt, tries, refused, err := promote(ctx, d, hc, lostPromoted)
	if err != nil {
		return res, err
	}
	lr.killToPromo, lr.promoTries, lr.promoRefused = promoAt.Sub(killAt), tries, refused
	lr.failedOver = watchOut(ctx, d, hc, survive, promoAt, cfg.after)
	if rest := time.Until(promoAt.Add(cfg.after)); rest > 0 {
		time.Sleep(rest)
	}
	stopWriters()
	wg.Wait()
	return res, judgeLost(ctx, d, hc, writers, survive, killAt, promoAt, lr)
}

// placeLost places n tenants on each of eu's nodes through g1, every other
// one set to survive its region with its copy on a node of us, and waits
// until each has its copy. It returns where each is and which survive
// their region.
func placeLost(ctx context.Context, d *deployment, hc *http.Client, n int) (map[string]placed, map[string]bool, error) {
	tok := d.tokens["router"]
	out, survive := map[string]placed{}, map[string]bool{}
	copies := regionNodes["us"]
	i := 0
	for _, node := range regionNodes[lostRegion] {
		for j := range n {
			t := fmt.Sprintf("t-%s-%d", node, j)
			if st, err := call(ctx, hc, "PUT", d.url("g1")+"/_shard/tenants/"+t, tok, map[string]string{"node": node}, nil); err != nil || st != 201 {
				return nil, nil, fmt.Errorf("place %s on %s: %d %v", t, node, st, err)
			}
			q := map[string]string{"query": "create collection w (k int @unique)"}
			if st, err := call(ctx, hc, "POST", d.url("g1")+"/t/"+t+"/query", d.tokens["http"], q, nil); err != nil || st != 200 {
				return nil, nil, fmt.Errorf("create w in %s: %d %v", t, st, err)
			}
			out[t] = placed{node: node}
			if i%2 == 0 {
				body := map[string]string{"survive": "region", "copy": copies[(i/2)%len(copies)]}
				if err := waitFor(ctx, time.Minute, t+" set to survive its region", func() error {
					st, err := call(ctx, hc, "PUT", d.url("g1")+"/_shard/tenants/"+t+"/survive", tok, body, nil)
					if err == nil && st != 200 {
						err = fmt.Errorf("status %d", st)
					}
					return err
				}); err != nil {
					return nil, nil, err
				}
				survive[t] = true
			}
			i++
		}
	}
	err := waitFor(ctx, 2*time.Minute, "every tenant with its copy, answering through g2", func() error {
		var rows []struct {
			Name    string `json:"name"`
			Replica string `json:"replica"`
		}
		if st, err := call(ctx, hc, "GET", d.url("g1")+"/_shard/tenants", tok, nil, &rows); err != nil || st != 200 {
			return fmt.Errorf("tenants: %d %v", st, err)
		}
		for _, r := range rows {
			p, ok := out[r.Name]
			if !ok {
				continue
			}
			if r.Replica == "" {
				return fmt.Errorf("%s has no copy yet", r.Name)
			}
			if (regionOf(r.Replica) != lostRegion) != survive[r.Name] {
				return fmt.Errorf("%s's copy is on %s (survive region: %v)", r.Name, r.Replica, survive[r.Name])
			}
			out[r.Name] = placed{node: p.node, replica: r.Replica}
		}
		for t := range out {
			q := map[string]string{"query": "get w count"}
			if st, err := call(ctx, hc, "POST", d.url(lostPromoted)+"/t/"+t+"/query", d.tokens["http"], q, nil); err != nil || st != 200 {
				return fmt.Errorf("%s through %s: %d %v", t, lostPromoted, st, err)
			}
		}
		return nil
	})
	return out, survive, err
}

// lostWriters makes a writer for every tenant, from us: every write sent
// first to one of us's routers (in turn by tenant), then to g2 when that
// one does not take it.
func lostWriters(d *deployment, tenants map[string]placed) []*writer {
	names := make([]string, 0, len(tenants))
	for t := range tenants {
		names = append(names, t)
	}
	slices.Sort(names)
	var out []*writer
	for i, t := range names {
		p := tenants[t]
		bases := []string{d.url(lostRouters[i%len(lostRouters)]), d.url(lostPromoted)}
		w := newWriter(t, p.node, p.replica, bases, d.tokens["http"], d.client(6*time.Second, 2))
		w.preferFirst = true // us's own router first, every write: it takes the tenant once it is in us
		out = append(out, w)
	}
	return out
}

// killRegion kills every container of the lost region and its global
// router at once (one docker kill), and returns when it was asked and when
// it returned: every one of them dead.
func killRegion(ctx context.Context, d *deployment) (time.Time, time.Time, error) {
	var ids []string
	for svc, r := range serviceRegion {
		if r != lostRegion {
			continue
		}
		id, err := d.container(ctx, svc)
		if err != nil {
			return time.Time{}, time.Time{}, err
		}
		ids = append(ids, id)
	}
	asked := time.Now()
	_, err := docker(ctx, append([]string{"kill"}, ids...)...)
	return asked, time.Now(), err
}

// promote asks the standby router r to lead, as the operator does, until
// it answers 200; it returns when it did, how many asks it took, and the
// first refusal.
func promote(ctx context.Context, d *deployment, hc *http.Client, r string) (time.Time, int, string, error) {
	var at time.Time
	tries, refused := 0, ""
	err := waitFor(ctx, time.Minute, "the promotion of "+r, func() error {
		tries++
		var ans struct {
			Leader string `json:"leader"`
		}
		st, err := call(ctx, hc, "POST", d.url(r)+"/_shard/promote", d.tokens["router"], map[string]any{}, &ans)
		if err == nil && st != 200 {
			err = fmt.Errorf("status %d", st)
		}
		if err != nil && refused == "" {
			refused = err.Error()
		}
		at = time.Now()
		return err
	})
	return at, tries, refused, err
}

// watchOut polls the promoted router's placements until every region
// tenant is on a node out of the lost region, and returns how long after
// from (-1: not within limit).
func watchOut(ctx context.Context, d *deployment, hc *http.Client, survive map[string]bool, from time.Time, limit time.Duration) time.Duration {
	return watchPlaced(ctx, d, hc, lostPromoted, from, limit, func(now map[string]string) bool {
		out := 0
		for t, n := range now {
			if survive[t] && regionOf(n) != lostRegion {
				out++
			}
		}
		return out == len(survive)
	})
}

// judgeLost reads every region tenant's acknowledged keys back from the
// node it is placed on now, and sums what the writers saw.
func judgeLost(ctx context.Context, d *deployment, hc *http.Client, writers []*writer, survive map[string]bool, killAt, promoAt time.Time, lr *lostResult) error {
	now := map[string]string{}
	var rows []struct {
		Name string `json:"name"`
		Node string `json:"node"`
	}
	if st, err := call(ctx, hc, "GET", d.url(lostPromoted)+"/_shard/tenants", d.tokens["router"], nil, &rows); err != nil || st != 200 {
		return fmt.Errorf("placements: %d %v", st, err)
	}
	for _, r := range rows {
		now[r.Name] = r.Node
	}
	slow := d.client(15*time.Second, 2)
	defer slow.CloseIdleConnections()
	for _, w := range writers {
		acks, _ := w.snapshot()
		if !survive[w.tenant] {
			lr.zone++
			for _, a := range acks {
				if a.at.Before(killAt) {
					lr.zoneAcked++
				} else {
					lr.zoneAfter++
				}
			}
			fails, bodies := w.failures()
			for k, b := range bodies {
				if _, ok := lr.zoneBodies[k]; !ok {
					lr.zoneBodies[k] = b
				}
			}
			for _, f := range fails {
				if f.at.After(killAt) {
					key := fmt.Sprintf("%s %s", hostOf(f.via), statusName(f.status))
					lr.zoneAnswers[key] = append(lr.zoneAnswers[key], f.took)
				}
			}
			continue
		}
		lr.region++
		first := firstAfter(acks, promoAt)
		lr.wroteAgain = append(lr.wroteAgain, first)
		viaUS := time.Duration(-1)
		for _, a := range acks {
			if a.at.After(promoAt) {
				if first >= 0 && a.at.Equal(promoAt.Add(first)) {
					lr.firstVia[hostOf(a.via)]++
				}
				if slices.Contains(lostRouters, hostOf(a.via)) && viaUS < 0 {
					viaUS = a.at.Sub(promoAt)
				}
			}
		}
		lr.viaUS = append(lr.viaUS, viaUS)
		if regionOf(now[w.tenant]) == lostRegion {
			lr.acked += len(acks)
			lr.lost += len(acks) // still placed in the lost region: nothing can be read back
			continue
		}
		have, err := readBack(ctx, slow, d.url(now[w.tenant]), d.tokens["http"], w.tenant)
		if err != nil {
			return err
		}
		for _, a := range acks {
			lr.acked++
			if !have[a.k] {
				lr.lost++
			}
		}
	}
	return nil
}

func hostOf(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	return u.Hostname()
}

func statusName(s int) string {
	if s == 0 {
		return "no answer"
	}
	return fmt.Sprint(s)
}

// zoneText is what the zone tenants' writers were answered after the
// kill: by router and status, how many, and their median and longest time
// to answer.
func (lr *lostResult) zoneText() string {
	if len(lr.zoneAnswers) == 0 {
		return "nothing but 200"
	}
	var parts []string
	for key, ds := range lr.zoneAnswers {
		slices.Sort(ds)
		parts = append(parts, fmt.Sprintf("%s ×%d (p50 %d ms, max %d ms)", key, len(ds), ds[len(ds)/2].Milliseconds(), ds[len(ds)-1].Milliseconds()))
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}

func viaText(m map[string]int) string {
	var parts []string
	for r, n := range m {
		parts = append(parts, fmt.Sprintf("%s×%d", r, n))
	}
	slices.Sort(parts)
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}
