package nemesis

import (
	"context"
	"slices"
	"time"
)

// Scenarios are every scenario by name, in the order the issue lists
// them, then the mixed schedule. Each Step is one fault episode, ended
// before it returns unless it says otherwise.
func Scenarios() []Scenario {
	return []Scenario{
		{Name: "pause", Bound: 2.2, About: "a node paused (SIGSTOP) for 1.5 leases, its tenants' clients writing through the routers and straight to it, then continued",
			Step: stepPause},
		{Name: "clock", Bound: 2, About: "a node's lease clock jumped ahead up to half a lease, or slewed up to 5 % either way for a while, sometimes while it is cut off from its leaser",
			Step: stepClock},
		{Name: "partition", Bound: 3.5, About: "partial partitions in two tiers: a node cut off from its leaser alone, or from everyone but its leaser; a standby router off its directory; eu's routers off the global directory; the global tier off eu",
			Shape: Shape{Regions: true}, Step: stepPartition},
		{Name: "handoff", Bound: 3, About: "eu's leasing handed to eu and back under writes with the giving or the taking router killed at a random moment; the global tier lost, eu's forced takeover, the global tier back",
			Shape: Shape{Regions: true}, Step: stepHandoff},
		{Name: "move", Bound: 3.5, About: "tenants moved under writes, the source, the target or the leading router killed at a random moment of the move",
			Shape: Shape{Ballast: 2 << 20}, Step: stepMove},
		{Name: "replicas", Bound: 6.5, About: "a node cut off from everyone while copies are added (the repair, a standby renamed) and taken (a node killed, its tenants promoted on their copies)",
			Step: stepReplicas},
		{Name: "power", Bound: 2, About: "power lost on a primary and its copy at once, or a node alone, under --sync always: every unsynced byte dropped, sometimes a torn write left, then started again",
			Step: stepPower},
		{Name: "power-100", Bound: 2, About: "the same under the default --sync 100: writes a node acknowledged in the 100 ms (and a second's slack) before it lost power may be lost, nothing older",
			Shape: Shape{Sync: "100"}, Step: stepPower,
			Claims: Claims{LossWindow: 1100 * time.Millisecond}},
		{Name: "corrupt", Bound: 3.8, About: "a copy's file damaged (a bit flipped, or its tail cut off) while its node is down, then its primary killed or paused past its lease",
			Step: stepCorrupt},
		{Name: "retries", Bound: 2.5, About: "increments with Idempotency-Key sent again through 500 outcome-unknown, 502 and 503 until settled, while primaries are killed, paused and cut off, routers killed and connections reset",
			Mix:  Mix{RegWrite: 10, RegRead: 10, Append: 15, ListRead: 10, Incr: 45, CntRead: 10},
			Step: stepRetries},
		// Bound: a primary killed is failed over as under pause (a lease
		// after its last grant's answer, a tenth, the next grant's third);
		// a copy lost to a kill or a cut holds its primary's writes half a
		// lease (replicaWait) before it is recorded behind.
		{Name: "ryw", Bound: 2, About: "read-your-writes across regions: clients in us write through the router near them to eu's primaries and read back through it, " +
			"with Fenec-After of their own write or a Fenec-Max-Staleness of 0 to 5000 ms, from read copies in us; the copy's links to eu cut or slowed, the router's to it cut, " +
			"its node killed, a primary moved or failed over (half the time with its read copy cut off or slowed), the global tier cut off from us; a tenant in three survives its region",
			Shape: Shape{Far: "us"}, Step: stepFar},
		{Name: "mixed", Bound: 5, About: "every fault above but the power loss under --sync 100, drawn together, on the two-tier deployment",
			Shape: Shape{Regions: true, Ballast: 256 << 10}, Step: stepMixed},
	}
}

// ScenarioNamed is the scenario called name.
func ScenarioNamed(name string) (Scenario, bool) {
	all := Scenarios()
	i := slices.IndexFunc(all, func(s Scenario) bool { return s.Name == name })
	if i < 0 {
		return Scenario{}, false
	}
	return all[i], true
}

// stepPause pauses a node holding a primary for 1.5 leases.
func stepPause(ctx context.Context, r *Run) {
	n := r.AnyNode()
	if _, p, ok := r.AnyTenant(ctx); ok {
		n = r.T.Node(p.Node)
	}
	if n.down {
		return
	}
	f := r.T.Pause(n)
	sleep(context.Background(), r.Between(r.Leases(1.25), r.Leases(1.75)))
	r.T.Continue(n, f)
}

// stepClock jumps a node's lease clock ahead, or slews it, sometimes
// while the node is cut off from its leaser (its lease then lapses, and
// its tenants fail over, by the moved clock).
func stepClock(ctx context.Context, r *Run) {
	n := r.AnyNode()
	var f *Fault
	switch r.Rng.IntN(2) {
	case 0:
		f = r.T.MoveClock(n, r.Between(r.Leases(0.1), r.Leases(0.5)), 0)
	default:
		slew := int64(r.Rng.IntN(100_001)) - 50_000 // ±5 %: the tenth a router waits past a lease covers it
		f = r.T.MoveClock(n, 0, slew)
	}
	if r.Chance(0.5) {
		cut := r.T.Cut(n, r.T.Leader().Name)
		sleep(context.Background(), r.Between(r.Leases(0.5), r.Leases(2.5)))
		r.T.Heal(n, r.T.Leader().Name, cut)
	} else {
		sleep(ctx, r.Between(r.Leases(1), r.Leases(3)))
	}
	r.T.StopSlew(n, f)
}

// stepPartition cuts one set of links and heals it.
func stepPartition(ctx context.Context, r *Run) {
	t := r.T
	n := r.AnyNode()
	lead := t.Leader()
	var heal []func()
	switch r.Rng.IntN(5) {
	case 0: // node ↔ its leaser alone
		f := t.Cut(n, lead.Name)
		heal = append(heal, func() { t.Heal(n, lead.Name, f) })
	case 1: // node ↔ everyone but its leaser
		for _, who := range append(routerNames(t), peersLink) {
			if who == lead.Name {
				continue
			}
			f := t.Cut(n, who)
			heal = append(heal, func() { t.Heal(n, who, f) })
		}
	case 2: // a standby router ↔ its directory
		rt := t.Routers[1]
		if t.shape.Regions && r.Chance(0.5) {
			rt = t.Routers[3]
		}
		f := t.CutDirectory(rt)
		heal = append(heal, func() { t.HealDirectory(rt, f) })
	case 3: // eu's routers ↔ the global directory
		for _, rt := range t.Routers[2:] {
			f := t.CutGlobal(rt)
			heal = append(heal, func() { t.HealGlobal(rt, f) })
		}
	default: // the global tier ↔ eu: its routers' links to the nodes, eu's to the global directory
		for _, rt := range t.Routers[2:] {
			f := t.CutGlobal(rt)
			heal = append(heal, func() { t.HealGlobal(rt, f) })
		}
		for _, node := range t.Nodes {
			for _, g := range t.Routers[:2] {
				f := t.Cut(node, g.Name)
				heal = append(heal, func() { t.Heal(node, g.Name, f) })
			}
		}
	}
	sleep(context.Background(), r.Between(r.Leases(0.5), r.Leases(3)))
	for _, h := range heal {
		h()
	}
}

func routerNames(t *Topo) []string {
	var out []string
	for _, rt := range t.Routers {
		out = append(out, rt.Name)
	}
	return out
}

// stepHandoff hands eu's leasing to the other side, killing the giving
// or the taking router at a random moment now and then; or loses the
// global tier, forces eu's takeover and brings the global tier back.
func stepHandoff(ctx context.Context, r *Run) {
	t := r.T
	if r.Chance(0.2) {
		forcedTakeover(r)
		return
	}
	to := "region"
	if t.regionLeases() {
		to = "global"
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.Handoff(to, false, 10*time.Second)
	}()
	if r.Chance(0.7) {
		victim := t.Routers[0]
		if r.Chance(0.5) {
			victim = t.Routers[2]
		}
		sleep(context.Background(), r.Between(0, 100*time.Millisecond))
		state := t.handoffState()
		f := t.KillRouter(victim)
		t.h.Note("%s killed with eu's handoff %s (as read just before)", victim.Name, state)
		t.h.Killed("handoff " + state)
		sleep(context.Background(), r.Between(r.Leases(0.5), r.Leases(2)))
		t.StartRouter(victim, f)
	}
	<-done
}

// forcedTakeover loses the global tier (both its routers killed), forces
// eu's takeover on eu's router, and starts the global tier again.
func forcedTakeover(r *Run) {
	t := r.T
	var fs []*Fault
	for _, g := range t.Routers[:2] {
		fs = append(fs, t.KillRouter(g))
	}
	sleep(context.Background(), r.Between(r.Leases(0.5), r.Leases(1.5)))
	t.Handoff("region", true, 10*time.Second)
	sleep(context.Background(), r.Between(r.Leases(1), r.Leases(2)))
	for i, g := range t.Routers[:2] {
		t.StartRouter(g, fs[i])
	}
}

// stepMove moves a tenant to another node and, most times, kills its
// source, its target or the leading router at a random moment of it.
func stepMove(ctx context.Context, r *Run) {
	t := r.T
	tenant, p, ok := r.AnyTenant(ctx)
	if !ok {
		return
	}
	var to *Node
	for to == nil || to.Name == p.Node {
		to = r.AnyNode()
	}
	lead := t.Leader()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f := t.h.Begin("move", tenant, p.Node+" to "+to.Name)
		res := lead.cl.Do("POST", "/_shard/tenants/"+tenant+"/move", map[string]any{"to": to.Name})
		t.h.End(f)
		t.h.Note("move of %s from %s to %s: %s", tenant, p.Node, to.Name, res)
	}()
	if r.Chance(0.75) {
		sleep(context.Background(), r.Between(0, 800*time.Millisecond))
		switch r.Rng.IntN(3) {
		case 0:
			n := t.Node(p.Node)
			step := t.moveStep(tenant, p.Node, to.Name)
			f := t.KillNode(n)
			t.h.Killed("move " + step)
			sleep(context.Background(), r.Between(r.Leases(0.3), r.Leases(1.5)))
			t.StartNode(n, f)
		case 1:
			step := t.moveStep(tenant, p.Node, to.Name)
			f := t.KillNode(to)
			t.h.Killed("move " + step)
			sleep(context.Background(), r.Between(r.Leases(0.3), r.Leases(1.5)))
			t.StartNode(to, f)
		default:
			step := t.moveStep(tenant, p.Node, to.Name)
			f := t.KillRouter(lead)
			t.h.Killed("move " + step)
			sleep(context.Background(), r.Between(r.Leases(0.3), r.Leases(1.5)))
			t.StartRouter(lead, f)
		}
	}
	<-done
}

// stepReplicas cuts a node off from everyone and, meanwhile, adds or
// takes copies.
func stepReplicas(ctx context.Context, r *Run) {
	t := r.T
	n := r.AnyNode()
	var heal []func()
	for _, who := range append(routerNames(t), peersLink) {
		f := t.Cut(n, who)
		heal = append(heal, func() { t.Heal(n, who, f) })
	}
	sleep(context.Background(), r.Between(0, r.Leases(1)))
	lead := t.Leader()
	switch r.Rng.IntN(3) {
	case 0:
		f := t.h.Begin("repair", "replicas", "POST /_shard/replicas")
		res := lead.cl.Do("POST", "/_shard/replicas", nil)
		t.h.End(f)
		t.h.Note("repair during the cut of %s: %s", n.Name, res)
	case 1:
		var m, sb *Node
		for m == nil || m == sb {
			m, sb = r.AnyNode(), r.AnyNode()
		}
		f := t.h.Begin("standby", m.Name, "named "+sb.Name)
		res := lead.cl.Do("PUT", "/_shard/nodes/"+m.Name, map[string]any{"standby": sb.Name})
		t.h.End(f)
		t.h.Note("%s's standby named %s during the cut of %s: %s", m.Name, sb.Name, n.Name, res)
	default:
		var m *Node
		for m == nil || m == n {
			m = r.AnyNode()
		}
		f := t.KillNode(m)
		sleep(context.Background(), r.Between(r.Leases(1.5), r.Leases(3)))
		t.StartNode(m, f)
	}
	sleep(context.Background(), r.Between(r.Leases(0.5), r.Leases(2)))
	for _, h := range heal {
		h()
	}
}

// stepPower cuts the power of a tenant's primary and its copy at once,
// or of one node, or of every node.
func stepPower(ctx context.Context, r *Run) {
	t := r.T
	switch r.Rng.IntN(4) {
	case 0, 1:
		if _, p, ok := r.AnyTenant(ctx); ok && p.Replica != "" {
			t.PowerLoss(r.Rng, t.Node(p.Node), t.Node(p.Replica))
			return
		}
		fallthrough
	case 2:
		t.PowerLoss(r.Rng, r.AnyNode())
	default:
		t.PowerLoss(r.Rng, t.Nodes...)
	}
}

// stepCorrupt damages a tenant's copy, then takes its primary away: the
// damaged copy must be neither promoted nor served.
func stepCorrupt(ctx context.Context, r *Run) {
	t := r.T
	tenant, p, ok := r.AnyTenant(ctx)
	if !ok || p.Replica == "" {
		return
	}
	t.Damage(r.Rng, t.Node(p.Replica), tenant)
	sleep(context.Background(), r.Between(0, r.Leases(1)))
	n := t.Node(p.Node)
	if r.Chance(0.5) {
		f := t.KillNode(n)
		sleep(context.Background(), r.Between(r.Leases(1.5), r.Leases(3)))
		t.StartNode(n, f)
		return
	}
	f := t.Pause(n)
	sleep(context.Background(), r.Leases(1.5))
	t.Continue(n, f)
}

// stepRetries takes a primary away, or the leading router, or resets
// connections, so that writes are answered unknown, 502 and 503 and
// sent again.
func stepRetries(ctx context.Context, r *Run) {
	t := r.T
	_, p, ok := r.AnyTenant(ctx)
	if !ok {
		return
	}
	n := t.Node(p.Node)
	switch r.Rng.IntN(5) {
	case 0:
		f := t.KillNode(n)
		sleep(context.Background(), r.Between(r.Leases(1), r.Leases(3)))
		t.StartNode(n, f)
	case 1:
		f := t.Pause(n)
		sleep(context.Background(), r.Leases(1.5))
		t.Continue(n, f)
	case 2:
		lead := t.Leader().Name
		f := t.Cut(n, lead)
		sleep(context.Background(), r.Between(r.Leases(1), r.Leases(2)))
		t.Heal(n, lead, f)
	case 3:
		lead := t.Leader()
		f := t.KillRouter(lead)
		sleep(context.Background(), r.Between(r.Leases(0.5), r.Leases(1.5)))
		t.StartRouter(lead, f)
	default:
		f := t.h.Begin("reset", n.Name, "every connection to it reset, twice")
		for range 2 {
			for _, l := range n.links {
				l.Reset()
			}
			sleep(context.Background(), r.Leases(0.2))
		}
		t.h.End(f)
	}
}

// stepMixed is one episode of a scenario drawn at random.
func stepMixed(ctx context.Context, r *Run) {
	steps := []func(context.Context, *Run){stepPause, stepClock, stepPartition, stepHandoff, stepMove, stepReplicas, stepPower, stepCorrupt, stepRetries}
	steps[r.Rng.IntN(len(steps))](ctx, r)
}
