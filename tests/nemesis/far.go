package nemesis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fenec-go/fenec/internal/history"
	"github.com/fenec-go/fenec/tests/proxy"
	"github.com/fenec-go/fenec/wire"
)

// The far region's readers (Shape.Far): clients in it write through the
// router near them, which sends writes to the tenants' primaries in eu,
// and read through it stating what they can take — Fenec-After and
// Fenec-History of their own last write to the object (read-your-writes),
// or a Fenec-Max-Staleness — which it sends to the tenant's read copy in
// their region first, and to the primary when the copy cannot prove it.
// Every answer goes into the history: checkAfterReads and checkStaleness
// hold it to what it states, linearizability when it states 0, and
// checkNearReads to who it says served it.

// farClients is how many clients read and write through the near router.
const farClients = 3

// farBounds are the Fenec-Max-Staleness a far client's read asks, in ms.
var farBounds = []int64{0, 100, 1000, 5000}

// runFar is a far client: every tick, a write (four times in ten) or a
// read through the near router, until the workload stops.
func (w *Workload) runFar(c *client) {
	t := time.NewTicker(w.every)
	defer t.Stop()
	tenants := w.topo.Tenants()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		tenant := tenants[c.rng.IntN(len(tenants))]
		reg := c.rng.IntN(2) == 0
		if c.rng.IntN(10) < 4 {
			kind := ListAppend
			if reg {
				kind = RegWrite
			}
			w.one(c, tenant, kind, false)
			continue
		}
		kind := ListRead
		if reg {
			kind = RegRead
		}
		op, body := w.newOp(c, tenant, kind, false)
		if last := c.appended[history.Object(op)]; last != nil && c.rng.IntN(2) == 0 {
			op.After = last.ID
			op.Ask = []string{wire.HeaderAfter, strconv.FormatUint(last.Seq, 10), wire.HeaderHistory, last.History}
		} else {
			ms := farBounds[c.rng.IntN(len(farBounds))]
			op.Ask = []string{wire.HeaderMaxStaleness, strconv.FormatInt(ms, 10)}
		}
		w.do(c, op, body)
	}
}

// askedBound is the Fenec-Max-Staleness op was sent with (false: none).
func askedBound(op *Op) (int64, bool) {
	for i := 0; i+1 < len(op.Ask); i += 2 {
		if op.Ask[i] == wire.HeaderMaxStaleness {
			ms, err := strconv.ParseInt(op.Ask[i+1], 10, 64)
			return ms, err == nil
		}
	}
	return 0, false
}

// checkNearReads holds every read answered through a router near the far
// region to who it says served it and to the bound it was asked: one
// sent stating a bound or a seq names who served it (Fenec-Served-By:
// copy or primary); a copy's answer comes from a node holding one of the
// tenant's read copies (Fenec-Node), a primary's from none of them;
// every one states its staleness, within the Fenec-Max-Staleness asked.
// One that stated nothing of the kind names no Fenec-Served-By.
func checkNearReads(h *History, ops []*Op) []Anomaly {
	h.mu.Lock()
	copies := make(map[string][]string, len(h.ReadCopies))
	for t, ns := range h.ReadCopies {
		copies[t] = ns
	}
	h.mu.Unlock()
	var out []Anomaly
	for _, op := range ops {
		if op.Kind.Write() || op.Outcome != OK {
			continue
		}
		bad := func(what string) {
			out = append(out, Anomaly{Check: "served by", Tenant: op.Tenant, What: what,
				Excerpt: []string{"the read: " + op.String() + " asked " + strings.Join(op.Ask, " ") + " served by " + op.ServedBy}})
		}
		if len(op.Ask) == 0 {
			if op.ServedBy != "" {
				bad("a read that stated no bound named who served it")
			}
			continue
		}
		onCopy := slices.Contains(copies[op.Tenant], op.Node)
		switch {
		case op.ServedBy == wire.ServedByCopy && !onCopy:
			bad(fmt.Sprintf("an answer served by a copy came from %q, which holds none of the tenant's read copies %v", op.Node, copies[op.Tenant]))
		case op.ServedBy == wire.ServedByPrimary && onCopy:
			bad(fmt.Sprintf("an answer served by the primary came from %q, the tenant's read copy", op.Node))
		case op.ServedBy != wire.ServedByCopy && op.ServedBy != wire.ServedByPrimary:
			bad(fmt.Sprintf("a bounded read's answer named who served it %q", op.ServedBy))
		}
		bound, asked := askedBound(op)
		switch {
		case op.Staleness == NoBound:
			bad("a bounded read's answer stated no staleness")
		case asked && (op.Staleness == Unbounded || op.Staleness > bound):
			bad(fmt.Sprintf("asked at most %d ms old, answered stating %s", bound, staleness(op.Staleness)))
		}
	}
	return out
}

func staleness(ms int64) string {
	if ms == Unbounded {
		return "unbounded"
	}
	return strconv.FormatInt(ms, 10) + " ms"
}

// nearCounts counts the reads through the near router that stated a
// bound or a seq, by who served them.
func nearCounts(ops []*Op) (byCopy, byPrimary int) {
	for _, op := range ops {
		if len(op.Ask) == 0 || op.Outcome != OK {
			continue
		}
		switch op.ServedBy {
		case wire.ServedByCopy:
			byCopy++
		case wire.ServedByPrimary:
			byPrimary++
		}
	}
	return byCopy, byPrimary
}

// stepFar is one fault episode of the far region's reads: the far node's
// links to eu cut or slowed, the near router's link to it cut, the far
// node killed, a tenant with a read copy moved or failed over (half the
// time while its copy is cut off or slowed), or the global tier's links
// to the far region cut (its routers' to the far node, the near router's
// to the directory).
func stepFar(ctx context.Context, r *Run) {
	t := r.T
	far, near := t.FarNode(), t.NearRouter()
	switch r.Rng.IntN(7) {
	case 0, 1: // the far node ↔ eu's nodes, cut or slowed: replication and proofs both ways
		heal := cutFar(t, far, r)
		sleep(context.Background(), r.Between(r.Leases(0.5), r.Leases(3)))
		heal()
	case 2: // the near router ↔ the read copy
		f := t.Cut(far, near.Name)
		sleep(context.Background(), r.Between(r.Leases(0.5), r.Leases(2)))
		t.Heal(far, near.Name, f)
	case 3:
		f := t.KillNode(far)
		sleep(context.Background(), r.Between(r.Leases(0.5), r.Leases(2)))
		t.StartNode(far, f)
	case 4, 5: // a tenant with a read copy moved or failed over, half the time while its copy is cut off or slowed
		heal := func() {}
		if r.Chance(0.5) {
			heal = cutFar(t, far, r)
		}
		if r.Chance(0.5) {
			moveCopied(ctx, r)
		} else if _, p, ok := anyCopied(ctx, r); ok {
			n := t.Node(p.Node)
			f := t.KillNode(n)
			sleep(context.Background(), r.Between(r.Leases(1.5), r.Leases(3)))
			t.StartNode(n, f)
		}
		sleep(context.Background(), r.Between(0, r.Leases(1)))
		heal()
	default: // the global tier ↔ the far region
		var heal []func()
		for _, g := range t.Routers {
			if g.Near != "" {
				continue
			}
			f := t.Cut(far, g.Name)
			heal = append(heal, func() { t.Heal(far, g.Name, f) })
		}
		f := t.CutDirectory(near)
		heal = append(heal, func() { t.HealDirectory(near, f) })
		sleep(context.Background(), r.Between(r.Leases(0.5), r.Leases(2.5)))
		for _, h := range heal {
			h()
		}
	}
}

// cutFar cuts the far node's links to and from eu's nodes, or (half the
// time) slows them by 50 to 400 ms each way; the func it returns ends it.
func cutFar(t *Topo, far *Node, r *Run) func() {
	links := []*proxy.Proxy{far.links[peersLink]}
	for _, m := range t.HomeNodes() {
		links = append(links, m.links[far.Name])
	}
	if r.Chance(0.5) {
		d := r.Between(50*time.Millisecond, 400*time.Millisecond)
		f := t.h.Begin("delay", far.Name+"<->"+region, fmt.Sprintf("%v each way", d))
		for _, l := range links {
			l.SetDelay(d)
		}
		return func() {
			for _, l := range links {
				l.SetDelay(farDelay)
			}
			t.h.End(f)
		}
	}
	f := t.h.Begin("cut", far.Name+"<->"+region, "replication and proofs, both ways")
	for _, l := range links {
		l.Cut()
	}
	return func() {
		for _, l := range links {
			l.Heal()
		}
		t.h.End(f)
	}
}

// anyCopied is a tenant with a read copy, drawn at random, and its
// placement now.
func anyCopied(ctx context.Context, r *Run) (string, Placement, bool) {
	for range 10 {
		name, p, ok := r.AnyTenant(ctx)
		if ok && len(p.ReadCopies) > 0 {
			return name, p, true
		}
	}
	return "", Placement{}, false
}

// moveCopied moves a tenant with a read copy to another of eu's nodes.
func moveCopied(ctx context.Context, r *Run) {
	t := r.T
	tenant, p, ok := anyCopied(ctx, r)
	if !ok {
		return
	}
	home := t.HomeNodes()
	to := home[r.Rng.IntN(len(home))]
	for to.Name == p.Node {
		to = home[r.Rng.IntN(len(home))]
	}
	f := t.h.Begin("move", tenant, p.Node+" to "+to.Name)
	res := t.Leader().cl.Do("POST", "/_shard/tenants/"+tenant+"/move", map[string]any{"to": to.Name})
	t.h.End(f)
	t.h.Note("move of %s from %s to %s: %s", tenant, p.Node, to.Name, res)
}
