package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// The rehome case: tenants moved between regions under writers, the
// global tier's leading router killed and the source cut off part-way
// (DESIGN.md §10; docs/regions.md "Rehoming a tenant under writes").
//
// Tenants are placed as in the lost case (placeLost): on eu's nodes, every
// other one set to survive its region with its voting copy in us. Each has
// two keyed writers with keys of their own, as in the partitioned case:
// one from us (us1/us2, then g2), one from eu (eu1/eu2, then g2: eu's
// routers do not know a tenant moved to us with no copy in eu). Then, in
// three phases, each move sent as `POST /_shard/tenants/<t>/move` to the
// global tier's leading router:
//
//  1. clean: each tenant in turn moved to a node of us and back to its node
//     of eu; the move's answer (pause_ms) recorded.
//  2. router killed: every tenant moved to the other region at once, and
//     g1, the leading router, killed (docker kill) a delay drawn from the
//     run's seeded source after the moves were asked; the move_step g1's
//     placements showed last for each tenant before the kill recorded; g2
//     promoted (POST /_shard/promote); the run waits until g2 places every
//     tenant active again — the move finished or put back by its
//     recoverMoves.
//  3. source cut: each tenant in turn moved to the other region through g2,
//     and its source node cut off from every other container (iptables
//     DROP in its namespace, as partition.go does) a drawn delay after the
//     move was asked; healed rehomeCutFor later; the run waits until the
//     tenant is active again.
//
// After each move: the tenant is active on one node in the leading
// router's placements, and the other node of the move refuses a write sent
// straight to it (the data token on its /t/: any answer but 200 — 404, no
// file, or 503 with Fenec-Refused — is a refusal; 200 is a second
// primary). At the end every write acknowledged to either writer is read
// back from the node the tenant is placed on. Measured per move: its
// answer, the longest time without an acknowledged write of the tenant
// (both writers) from the move asked until it settled, the writers'
// answers other than 200 meanwhile, and overlaps: writes the move's source
// acknowledged that were sent after its target had acknowledged one (the
// node that took each write is its answer's Fenec-Node).

// rehomeCutFor is how long phase 3 keeps a move's source cut off.
const rehomeCutFor = 3 * time.Second

// rehomeSettle bounds the wait for a tenant to be active again after a
// kill or a cut.
const rehomeSettle = 2 * time.Minute

// rehomeResult is what one run of the rehome case measured.
type rehomeResult struct {
	link      wanTimes
	seed      uint64
	region    int            // tenants that survive their region
	zone      int            // the others
	moves     []*rehomeMove  // every move, in the order asked
	promoted  time.Duration  // phase 2: the kill returned → the promotion answered
	acked     int            // every acknowledged write of either side
	lost      int            // those not read back
	lostSome  []string       // the first lost writes
	probes    map[string]int // the straight writes to a move's other node, by answer
	seconds   int            // straight writes answered 200 (a second primary)
	unknown   int            // acknowledged writes whose answer named no node
	notActive []string       // tenants not active on one node at the end
}

// rehomeMove is one move of one tenant.
type rehomeMove struct {
	phase      string // clean, killed, cut
	tenant     string
	from, to   string
	asked      time.Time
	delay      time.Duration  // phase 2 and 3: the move asked → the kill or the cut
	lastStep   string         // phase 2 and 3: the step the placements showed last before it
	answer     string         // the move's answer: 200 or what came back
	pauseMS    int64          // the answer's pause_ms (-1: no answer)
	ms         int64          // the answer's ms (-1: no answer)
	settled    time.Time      // the tenant seen active again
	settleTook time.Duration  // phase 2: promotion → active; phase 3: heal → active
	ended      string         // moved, put back, stuck
	at         string         // the node it is active on
	probe      string         // what the other node answered a straight write
	gap        time.Duration  // the longest time without an acknowledged write, asked → settled
	writersSaw map[string]int // the writers' answers other than 200 in the window, by router and status
	refused    int            // the times the move was refused before it began (409) and asked again
	overlap    int            // the source's acknowledgements of writes sent after the target's first
	elsewhere  int            // acknowledgements in the window by a node neither source nor target
}

// placement is a tenant as a router's placements list it.
type placement struct {
	Name     string `json:"name"`
	Node     string `json:"node"`
	State    string `json:"state"`
	Target   string `json:"target"`
	MoveStep string `json:"move_step"`
}

// runRehome is the rehome case on a settled deployment.
func runRehome(ctx context.Context, cfg config, d *deployment, hc *http.Client, res result) (result, error) {
	rr := &rehomeResult{seed: cfg.seed, probes: map[string]int{}}
	res.rehomeRun = rr
	rnd := rand.New(rand.NewPCG(cfg.seed, uint64(res.run)))
	tenants, survive, err := placeLost(ctx, d, hc, cfg.tenants)
	if err != nil {
		return res, err
	}
	for t := range tenants {
		if survive[t] {
			rr.region++
		} else {
			rr.zone++
		}
	}
	if rr.link, err = measureWAN(ctx, d); err != nil {
		return res, fmt.Errorf("measure the link: %w", err)
	}
	ids, err := nodeIDs(ctx, d, hc)
	if err != nil {
		return res, err
	}
	usSide := lostWriters(d, tenants)
	euSide := rehomeEUWriters(d, tenants)
	res.writers = append(slices.Clone(usSide), euSide...)
	wctx, stopWriters := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, w := range append(slices.Clone(usSide), euSide...) {
		wg.Go(func() { w.run(wctx) })
	}
	defer func() { stopWriters(); wg.Wait() }()
	time.Sleep(4 * time.Second) // warm

	names := make([]string, 0, len(tenants))
	for t := range tenants {
		names = append(names, t)
	}
	slices.Sort(names)
	leader := "g1"
	fmt.Fprintln(os.Stderr, "rehome: clean moves")
	if err := rehomeClean(ctx, d, hc, names, tenants, rr); err != nil {
		return res, err
	}
	longest := time.Second
	for _, m := range rr.moves {
		longest = max(longest, time.Duration(m.ms)*time.Millisecond)
	}
	fmt.Fprintln(os.Stderr, "rehome: moves with g1 killed")
	if err := rehomeKill(ctx, d, hc, rnd, names, longest, rr); err != nil {
		return res, err
	}
	leader = lostPromoted
	fmt.Fprintln(os.Stderr, "rehome: moves with the source cut off")
	if err := rehomeCut(ctx, d, hc, rnd, names, leader, longest, rr); err != nil {
		return res, err
	}
	time.Sleep(4 * time.Second) // the writers run on where the tenants ended
	stopWriters()
	wg.Wait()
	return res, judgeRehome(ctx, d, hc, leader, ids, usSide, euSide, rr)
}

// rehomeEUWriters makes a second writer for every tenant, from eu's side:
// every write through eu1 or eu2 (in turn by tenant) first, then g2, its
// keys from a million on.
func rehomeEUWriters(d *deployment, tenants map[string]placed) []*writer {
	out := euWriters(d, tenants)
	for _, w := range out {
		w.bases = []string{w.bases[0], d.url(lostPromoted)}
		w.preferFirst = true
	}
	return out
}

// rehomeClean moves each tenant to a node of us and back, one at a time,
// through g1.
func rehomeClean(ctx context.Context, d *deployment, hc *http.Client, names []string, tenants map[string]placed, rr *rehomeResult) error {
	for i, t := range names {
		home := tenants[t].node
		for _, to := range []string{farTarget(tenants[t], i), home} {
			now, err := placements(ctx, d, hc, "g1")
			if err != nil {
				return err
			}
			m := &rehomeMove{phase: "clean", tenant: t, from: now[t].Node, to: to}
			rr.moves = append(rr.moves, m)
			m.asked = time.Now()
			askMove(ctx, d, hc, "g1", m)
			if err := settleMove(ctx, d, hc, "g1", m, m.asked); err != nil {
				return err
			}
			probeOther(ctx, d, m, rr)
		}
	}
	return nil
}

// farTarget is the node of the other region a tenant on eu is moved to:
// not the node holding its voting copy (a move there replaces the copy,
// and the tenant would have none until the repair makes one), in turn by
// tenant otherwise.
func farTarget(p placed, i int) string {
	us := regionNodes["us"]
	for j := range us {
		n := us[(i+j)%len(us)]
		if n != p.replica {
			return n
		}
	}
	return us[0]
}

// nearTarget is the node of eu a tenant in us is moved back to: its first
// node, unless that holds its voting copy.
func nearTarget(home, replica string, i int) string {
	if home != replica {
		return home
	}
	eu := regionNodes[lostRegion]
	for j := range eu {
		if n := eu[(i+j)%len(eu)]; n != replica {
			return n
		}
	}
	return eu[0]
}

// rehomeKill moves every tenant to the other region at once through g1 and
// kills g1 a drawn delay after, promotes g2 and waits for every move to be
// finished or put back.
func rehomeKill(ctx context.Context, d *deployment, hc *http.Client, rnd *rand.Rand, names []string, longest time.Duration, rr *rehomeResult) error {
	now, err := placements(ctx, d, hc, "g1")
	if err != nil {
		return err
	}
	reps, err := replicas(ctx, d, hc, "g1")
	if err != nil {
		return err
	}
	delay := time.Duration(rnd.Int64N(int64(longest * 6 / 5)))
	var moves []*rehomeMove
	for i, t := range names {
		to := nearTarget(tenantHome(t), reps[t], i)
		if regionOf(now[t].Node) == lostRegion {
			to = farTarget(placed{node: now[t].Node, replica: reps[t]}, i)
		}
		m := &rehomeMove{phase: "killed", tenant: t, from: now[t].Node, to: to, delay: delay}
		moves = append(moves, m)
		rr.moves = append(rr.moves, m)
	}
	watch := startStepWatch(ctx, d, hc, "g1")
	// The asks end with the kill or soon after: a connection to a killed
	// container may never hear back.
	actx, stopAsks := context.WithCancel(ctx)
	defer stopAsks()
	var asks sync.WaitGroup
	for _, m := range moves {
		m.asked = time.Now()
		asks.Go(func() { askMove(actx, d, hc, "g1", m) })
	}
	time.Sleep(delay)
	seen := watch.stop()
	id, err := d.container(ctx, lostLeader)
	if err != nil {
		return err
	}
	if _, err := docker(ctx, "kill", id); err != nil {
		return err
	}
	killAt := time.Now()
	for _, m := range moves {
		m.lastStep = stepText(seen[m.tenant], m)
	}
	promoAt, _, _, err := promote(ctx, d, hc, lostPromoted)
	if err != nil {
		return err
	}
	rr.promoted = promoAt.Sub(killAt)
	time.Sleep(time.Second) // an ask answered as the kill landed
	stopAsks()
	asks.Wait()
	for _, m := range moves {
		if err := settleMove(ctx, d, hc, lostPromoted, m, promoAt); err != nil {
			return err
		}
		probeOther(ctx, d, m, rr)
	}
	return nil
}

// rehomeCut moves each tenant to the other region in turn through leader,
// cuts its source off a drawn delay after, heals it rehomeCutFor later,
// and waits for the move to be finished or put back.
func rehomeCut(ctx context.Context, d *deployment, hc *http.Client, rnd *rand.Rand, names []string, leader string, longest time.Duration, rr *rehomeResult) error {
	for i, t := range names {
		now, err := placements(ctx, d, hc, leader)
		if err != nil {
			return err
		}
		reps, err := replicas(ctx, d, hc, leader)
		if err != nil {
			return err
		}
		from := now[t].Node
		to := nearTarget(tenantHome(t), reps[t], i)
		if regionOf(from) == lostRegion {
			to = farTarget(placed{node: from, replica: reps[t]}, i)
		}
		m := &rehomeMove{phase: "cut", tenant: t, from: from, to: to, delay: time.Duration(rnd.Int64N(int64(longest * 6 / 5)))}
		rr.moves = append(rr.moves, m)
		watch := startStepWatch(ctx, d, hc, leader)
		var ask sync.WaitGroup
		m.asked = time.Now()
		ask.Go(func() { askMove(ctx, d, hc, leader, m) })
		time.Sleep(m.delay)
		seen := watch.stop()
		m.lastStep = stepText(seen[t], m)
		cut, err := cutNode(ctx, d, from)
		if err != nil {
			ask.Wait()
			return err
		}
		time.Sleep(rehomeCutFor)
		cut.heal()
		healAt := time.Now()
		ask.Wait()
		if err := settleMove(ctx, d, hc, leader, m, healAt); err != nil {
			return err
		}
		probeOther(ctx, d, m, rr)
		// The cut lapsed the node's lease: the tenants placed there may be
		// failed over to their copies. The next move is read once that is
		// over.
		if err := leasesRun(ctx, d, hc, leader, time.Minute); err != nil {
			return err
		}
		time.Sleep(2 * lostLease)
	}
	return nil
}

// tenantHome is the node of eu a tenant was placed on (its name says).
func tenantHome(t string) string {
	f := strings.Split(t, "-")
	if len(f) < 3 {
		return ""
	}
	return f[1]
}

// cutNode drops every packet between svc and every other container of the
// deployment, in svc's namespace. The drill's own requests (from the
// host) still reach it.
func cutNode(ctx context.Context, d *deployment, svc string) (*cutOff, error) {
	pid := d.pids[svc]
	if pid == "" || pid == "0" {
		return nil, fmt.Errorf("service %s has no process running", svc)
	}
	ipt, err := iptablesFor(ctx, pid)
	if err != nil {
		return nil, err
	}
	var others []string
	for other, ip := range d.ips {
		if other != svc && ip != "" {
			others = append(others, ip)
		}
	}
	slices.Sort(others)
	r := dropRules{pid: pid, ipt: ipt, far: others}
	if err := r.apply(ctx, "-I"); err != nil {
		return nil, fmt.Errorf("cut %s off: %w", svc, err)
	}
	return &cutOff{rules: []dropRules{r}}, nil
}

// askMove sends m's move to router and records its answer. A move
// refused before it began because the tenant's record changed as it was
// read (409, the directory changed since) is asked again, as an operator
// does, while the tenant is still active where it was: up to four times.
func askMove(ctx context.Context, d *deployment, hc *http.Client, router string, m *rehomeMove) {
	m.pauseMS, m.ms = -1, -1
	var ans struct {
		From    string `json:"from"`
		MS      int64  `json:"ms"`
		PauseMS int64  `json:"pause_ms"`
	}
	slow := d.client(3*time.Minute, 1)
	defer slow.CloseIdleConnections()
	for try := 1; ; try++ {
		mctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		st, err := call(mctx, slow, "POST", d.url(router)+"/_shard/tenants/"+m.tenant+"/move", d.tokens["router"], map[string]string{"to": m.to}, &ans)
		cancel()
		switch {
		case err == nil && st == http.StatusOK:
			m.answer, m.pauseMS, m.ms = "200", ans.PauseMS, ans.MS
			if ans.From != "" && ans.From != m.from {
				m.answer += " (from " + ans.From + ")" // placed elsewhere since it was read
				m.from = ans.From
			}
		case st != 0:
			m.answer = fmt.Sprint(st)
		default:
			m.answer = "no answer"
		}
		if m.refused > 0 {
			m.answer += fmt.Sprintf(" after %d×409", m.refused)
		}
		if st != http.StatusConflict || !strings.Contains(err.Error(), "changed since it was read") || try == 5 || !stillOn(ctx, d, hc, router, m) {
			return
		}
		m.refused++
		time.Sleep(200 * time.Millisecond)
	}
}

// stillOn reports whether router places m's tenant active on its source.
func stillOn(ctx context.Context, d *deployment, hc *http.Client, router string, m *rehomeMove) bool {
	now, err := placements(ctx, d, hc, router)
	return err == nil && now[m.tenant].State == "active" && now[m.tenant].Node == m.from
}

// settleMove waits until router places m's tenant active again, and
// records where.
func settleMove(ctx context.Context, d *deployment, hc *http.Client, router string, m *rehomeMove, from time.Time) error {
	err := waitFor(ctx, rehomeSettle, m.tenant+" active again on "+router, func() error {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		now, err := placements(cctx, d, hc, router)
		if err != nil {
			return err
		}
		p := now[m.tenant]
		if p.State != "active" || p.Node == "" {
			return fmt.Errorf("%s is %s on %s (target %s, step %s)", m.tenant, p.State, p.Node, p.Target, p.MoveStep)
		}
		m.at, m.settled = p.Node, time.Now()
		return nil
	})
	m.settleTook = time.Since(from)
	switch {
	case err != nil:
		m.ended, m.settled = "stuck", time.Now()
		return nil // judged as stuck, the run goes on
	case m.at == m.to:
		m.ended = "moved"
	case m.at == m.from && strings.HasPrefix(m.answer, "409"):
		m.ended = "refused"
	case m.at == m.from:
		m.ended = "put back"
	default:
		m.ended = "on " + m.at
	}
	return ctx.Err()
}
