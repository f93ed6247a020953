package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// The partitioned case: region eu cut off from us and ap but alive, the
// global tier's leader (g1) on eu's side of the cut (DESIGN.md §10, the
// hard cases; docs/regions.md "What a tenant survives").
//
// Tenants are placed as in the lost case (placeLost): on eu's nodes, every
// other one set to survive its region with its voting copy in us. Each
// tenant has two keyed writers, one from each side, each with keys of its
// own: one through us's routers and g2, as in the lost case, one through
// eu's own routers (eu1, eu2). Then every container of eu and g1 has its
// packets to and from the other regions dropped (iptables in its network
// namespace; the processes, their sockets and eu's own traffic untouched),
// and the operator promotes g2, whose global directory keeps its quorum
// with g3. g2 cannot reach eu's nodes: their leases lapse by their own
// clocks, and only then may g2 fail the region tenants over to their copies
// in us. After -after the cut is healed and the writers run on a while.
//
// What must hold, read back once healed: every write acknowledged on
// either side is on the node each tenant is placed on then — a write that
// eu's old primary acknowledged after its copy in us took over would be
// missing there, the mark of two primaries. Measured: for each region
// tenant, when eu's side last had a write acknowledged after the cut and
// when us's side first had one after the promotion.

// partResult is what one run of the partitioned case measured.
type partResult struct {
	link         wanTimes
	region, zone int
	cutToPromo   time.Duration   // the cut in place → the promotion answered
	promoTries   int             // the promotions asked until one was answered 200
	wroteAgain   []time.Duration // region tenants: promotion → first write acknowledged from us after it
	euLast       []time.Duration // region tenants: cut → the last write acknowledged to eu's side before the heal (-1: none)
	overlap      int             // region tenants whose eu side had a write acknowledged after us's side first had one
	failedOver   time.Duration   // promotion → g2 placing every region tenant out of eu (-1: not seen)
	zoneEU       int             // zone tenants' writes acknowledged to eu's side between the cut and the heal
	zoneUS       int             // the same, to us's side
	acked, lost  int             // every acknowledged write of either side, and those not read back
	lostBy       map[string]int  // lost by side ("eu", "us") and kind
	lostSome     []string        // the first lost writes: tenant, key, side, when sent and acknowledged (from the cut), router
	euAnswers    map[string]int  // eu's side's answers other than 200 during the cut, by router and status
	euBodies     map[string]string
}

// runPartitioned is the partitioned case on a settled deployment.
func runPartitioned(ctx context.Context, cfg config, d *deployment, hc *http.Client, res result) (result, error) {
	pr := &partResult{failedOver: -1, lostBy: map[string]int{}, euAnswers: map[string]int{}, euBodies: map[string]string{}}
	res.partRun = pr
	tenants, survive, err := placeLost(ctx, d, hc, cfg.tenants)
	if err != nil {
		return res, err
	}
	if pr.link, err = measureWAN(ctx, d); err != nil {
		return res, fmt.Errorf("measure the link: %w", err)
	}
	usSide := lostWriters(d, tenants)
	euSide := euWriters(d, tenants)
	res.writers = append(slices.Clone(usSide), euSide...)
	wctx, stopWriters := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, w := range append(slices.Clone(usSide), euSide...) {
		wg.Go(func() { w.run(wctx) })
	}
	defer func() { stopWriters(); wg.Wait() }()
	time.Sleep(4 * time.Second) // warm

	cut, err := partition(ctx, d, lostRegion)
	if err != nil {
		return res, err
	}
	defer cut.heal()
	cutAt := time.Now()
	promoAt, tries, _, err := promote(ctx, d, hc, lostPromoted)
	if err != nil {
		return res, err
	}
	pr.cutToPromo, pr.promoTries = promoAt.Sub(cutAt), tries
	pr.failedOver = watchOut(ctx, d, hc, survive, promoAt, cfg.after)
	if rest := time.Until(promoAt.Add(cfg.after)); rest > 0 {
		time.Sleep(rest)
	}
	cut.heal()
	healAt := time.Now()
	time.Sleep(8 * time.Second) // eu back: its routers and nodes catch up while the writers run on
	stopWriters()
	wg.Wait()
	return res, judgePartitioned(ctx, d, hc, usSide, euSide, survive, cutAt, promoAt, healAt, pr)
}

// euWriters makes a second writer for every tenant, from eu's side: every
// write through eu1 or eu2 (in turn by tenant, the other after a failed
// answer), its keys from a million on.
func euWriters(d *deployment, tenants map[string]placed) []*writer {
	names := make([]string, 0, len(tenants))
	for t := range tenants {
		names = append(names, t)
	}
	slices.Sort(names)
	routers := regionRouters[lostRegion]
	var out []*writer
	for i, t := range names {
		p := tenants[t]
		bases := []string{d.url(routers[i%len(routers)]), d.url(routers[(i+1)%len(routers)])}
		w := newWriter(t, p.node, p.replica, bases, d.tokens["http"], d.client(6*time.Second, 2))
		w.first = 1_000_000
		out = append(out, w)
	}
	return out
}

// cutOff is a region's packets to and from the other regions dropped.
type cutOff struct {
	rules []dropRules
	once  sync.Once
}

// dropRules are the DROP rules in one container's namespace.
type dropRules struct {
	pid, ipt string
	far      []string
}

func (r dropRules) apply(ctx context.Context, op string) error {
	var b strings.Builder
	b.WriteString("*filter\n")
	for _, ip := range r.far {
		fmt.Fprintf(&b, "%s INPUT -s %s/32 -j DROP\n", op, ip)
		fmt.Fprintf(&b, "%s OUTPUT -d %s/32 -j DROP\n", op, ip)
	}
	b.WriteString("COMMIT\n")
	return nsenterIn(ctx, r.pid, b.String(), r.ipt+"-restore", "-w", "--noflush")
}

// partition drops every packet between region's containers and the other
// regions', in region's containers' namespaces (both ways: what they send
// and what reaches them). The wide-area link's proxies, where it runs by
// proxy, dial from the same namespaces: their dials are dropped too.
func partition(ctx context.Context, d *deployment, region string) (*cutOff, error) {
	c := &cutOff{}
	w := &wan{}
	svcs := make([]string, 0, len(serviceRegion))
	for svc, r := range serviceRegion {
		if r == region {
			svcs = append(svcs, svc)
		}
	}
	slices.Sort(svcs)
	for _, svc := range svcs {
		pid := d.pids[svc]
		if pid == "" || pid == "0" {
			c.heal()
			return nil, fmt.Errorf("service %s has no process running", svc)
		}
		ipt, err := iptablesFor(ctx, pid)
		if err != nil {
			c.heal()
			return nil, err
		}
		r := dropRules{pid: pid, ipt: ipt, far: w.farIPs(d, svc)}
		if err := r.apply(ctx, "-I"); err != nil {
			c.heal()
			return nil, fmt.Errorf("cut %s off: %w", svc, err)
		}
		c.rules = append(c.rules, r)
	}
	return c, nil
}

// heal takes the rules off. Safe twice.
func (c *cutOff) heal() {
	c.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, r := range c.rules {
			_ = r.apply(ctx, "-D") // a container gone took its rules with it
		}
	})
}

// judgePartitioned reads every tenant's acknowledged keys, both sides',
// back from the node g2 places it on once healed, and sums the sides'
// timings.
func judgePartitioned(ctx context.Context, d *deployment, hc *http.Client, usSide, euSide []*writer, survive map[string]bool, cutAt, promoAt, healAt time.Time, pr *partResult) error {
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
	eu := map[string]*writer{}
	for _, w := range euSide {
		eu[w.tenant] = w
		for _, f := range w.failuresDuring(cutAt, healAt) {
			pr.euAnswers[fmt.Sprintf("%s %s", hostOf(f.via), statusName(f.status))]++
		}
		_, bodies := w.failures()
		for k, b := range bodies {
			if _, ok := pr.euBodies[k]; !ok {
				pr.euBodies[k] = b
			}
		}
	}
	slow := d.client(15*time.Second, 2)
	defer slow.CloseIdleConnections()
	for _, us := range usSide {
		t := us.tenant
		usAcks, _ := us.snapshot()
		euAcks, _ := eu[t].snapshot()
		during := func(acks []ack) int {
			n := 0
			for _, a := range acks {
				if a.at.After(cutAt) && a.at.Before(healAt) {
					n++
				}
			}
			return n
		}
		if survive[t] {
			pr.region++
			first := firstAfter(usAcks, promoAt)
			pr.wroteAgain = append(pr.wroteAgain, first)
			last := time.Duration(-1)
			for _, a := range euAcks {
				if a.at.After(cutAt) && a.at.Before(healAt) {
					last = a.at.Sub(cutAt)
				}
			}
			pr.euLast = append(pr.euLast, last)
			if first >= 0 && last >= 0 && cutAt.Add(last).After(promoAt.Add(first)) {
				pr.overlap++
			}
		} else {
			pr.zone++
			pr.zoneEU += during(euAcks)
			pr.zoneUS += during(usAcks)
		}
		have, err := readBack(ctx, slow, d.url(now[t]), d.tokens["http"], t)
		if err != nil {
			return err
		}
		kind := "zone"
		if survive[t] {
			kind = "region"
		}
		for side, acks := range map[string][]ack{"us": usAcks, "eu": euAcks} {
			for _, a := range acks {
				pr.acked++
				if !have[a.k] {
					pr.lost++
					pr.lostBy[side+" "+kind]++
					if len(pr.lostSome) < 10 {
						pr.lostSome = append(pr.lostSome, fmt.Sprintf("%s k=%d from %s, sent %+.3f s, acknowledged %+.3f s from the cut, through %s, placed on %s",
							t, a.k, side, a.sent.Sub(cutAt).Seconds(), a.at.Sub(cutAt).Seconds(), hostOf(a.via), now[t]))
					}
				}
			}
		}
	}
	return nil
}

// failuresDuring is the writer's answers other than 200 sent in [from, to).
func (w *writer) failuresDuring(from, to time.Time) []fail {
	fails, _ := w.failures()
	var out []fail
	for _, f := range fails {
		if !f.at.Before(from) && f.at.Before(to) {
			out = append(out, f)
		}
	}
	return out
}

// countText is a count by key, sorted.
func countText(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(m))
	for k, n := range m {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, n))
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}
