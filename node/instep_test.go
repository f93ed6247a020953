package node

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/lease"
)

// leaseGrants sends a node numbered grants of a minute from router "r",
// each acknowledging the one before, so every grant after the first runs
// a lease.
type leaseGrants struct {
	t *testing.T
	n *testNode
	k uint64
}

// send grants list (nil: the list held) and returns the answer.
func (g *leaseGrants) send(list *lease.List, id string) lease.Answer {
	g.t.Helper()
	g.k++
	gr := lease.Grant{Term: 1, Router: "r", N: g.k, Ack: g.k - 1, MS: 60000, List: id}
	if list != nil {
		gr.Tenants, gr.InStep, gr.Behind, gr.Replicas = list.Tenants, list.InStep, list.Behind, list.Replicas
		if gr.Tenants == nil {
			gr.Tenants = []string{}
		}
		gr.List = list.ID()
	}
	r, a := g.n.grant(gr)
	if r.Status != 200 || !a.Took {
		g.t.Fatalf("grant %d: %d %s", g.k, r.Status, r.Body)
	}
	return a
}

// pending runs fn on a goroutine and returns a channel its answer comes on.
func pending(fn func() *resp) <-chan *resp {
	ch := make(chan *resp, 1)
	go func() { ch <- fn() }()
	return ch
}

// Under a lease whose list has a tenant's copy in step, a write the cut
// copy never acknowledged is held past the bound — as is a read showing
// it — while the node asks in its grant answers for the copy to be
// recorded behind; a list recording an earlier ask answers nothing, one
// recording this ask answers both. Later writes go on without the copy.
// Once the copy caught up the node says so, and from then on waits for
// it as in step until the list has it in step again.
func TestInStepCopyHoldsWritesUntilRecordedBehind(t *testing.T) {
	var g *leaseGrants
	plain := lease.List{Tenants: []string{"a"}}
	a, _, p, ta, tb := copyThroughProxyAfter(t, func(c *Config) { c.Lease = true }, func(a *testNode) {
		g = &leaseGrants{t: t, n: a}
		g.send(&plain, "")
		g.send(nil, plain.ID())
	})
	inStep := lease.List{Tenants: []string{"a"}, InStep: []string{"a"}}
	if ans := g.send(&inStep, ""); len(ans.Behind) != 0 || len(ans.Caught) != 0 {
		t.Fatalf("answer with the copy in step: %+v", ans)
	}
	w0 := answeredSeq(t, a.q("a", `put c {name: "before"}`))
	if d := tb.db.Durable(); d < w0 {
		t.Fatalf("write %d answered while the copy held %d", w0, d)
	}

	p.Cut()
	start := time.Now()
	write := pending(func() *resp { return a.q("a", `put c {name: "cut"}`) })
	time.Sleep(200 * time.Millisecond) // the write has landed
	read := pending(func() *resp { return a.q("a", `get c where name = "cut"`) })
	var asked uint64
	testkit.Eventually(t, 3*defaultReplicaWait, func() bool {
		ans := g.send(nil, inStep.ID())
		asked = ans.Behind["a"]
		return asked > w0
	}, "the node asks for the copy to be recorded behind")
	if waited := time.Since(start); waited < defaultReplicaWait {
		t.Fatalf("asked after %v, before the bound", waited)
	}
	stillHeld := func(what string) {
		t.Helper()
		select {
		case r := <-write:
			t.Fatalf("%s: the write was answered %d %s", what, r.Status, r.Body)
		case r := <-read:
			t.Fatalf("%s: the read was answered %d %s", what, r.Status, r.Body)
		case <-time.After(300 * time.Millisecond):
		}
	}
	stillHeld("asked, the list unchanged")
	earlier := lease.List{Tenants: []string{"a"}, Behind: map[string]uint64{"a": asked - 1}}
	g.send(&earlier, "")
	stillHeld("a list recording an earlier ask")

	recorded := lease.List{Tenants: []string{"a"}, Behind: map[string]uint64{"a": asked}}
	g.send(&recorded, "")
	for name, ch := range map[string]<-chan *resp{"write": write, "read": read} {
		select {
		case r := <-ch:
			if r.Status != 200 {
				t.Fatalf("%s released: %d %s", name, r.Status, r.Body)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("the %s is held after the list recorded the copy behind", name)
		}
	}
	if ans := g.send(nil, recorded.ID()); len(ans.Behind) != 0 {
		t.Fatalf("the node still asks once recorded: %+v", ans)
	}
	begun := time.Now()
	w2 := answeredSeq(t, a.q("a", `put c {name: "cut 2"}`))
	if d := time.Since(begun); d > defaultReplicaWait/2 {
		t.Fatalf("a write on a copy recorded behind waited %v", d)
	}

	p.Heal()
	testkit.Eventually(t, 20*time.Second, func() bool {
		ans := g.send(nil, recorded.ID())
		return len(ans.Caught) == 1 && ans.Caught[0] == "a" && tb.db.Durable() >= w2
	}, "the node says the copy caught up")
	// Said caught up, the copy is counted on before the list says so: cut
	// again, a write is held and asked about at a later seq.
	p.Cut()
	again := pending(func() *resp { return a.q("a", `put c {name: "cut 3"}`) })
	testkit.Eventually(t, 3*defaultReplicaWait, func() bool {
		return g.send(nil, recorded.ID()).Behind["a"] > asked
	}, "the node asks again")
	stillHeld("claimed caught up, then cut")
	select {
	case r := <-again:
		t.Fatalf("the write after the claim was answered: %d %s", r.Status, r.Body)
	default:
	}
	p.Heal()
	select {
	case r := <-again:
		if r.Status != 200 {
			t.Fatalf("the write the healed copy acknowledged: %d %s", r.Status, r.Body)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the healed copy's ack did not answer the held write")
	}
	_ = ta
}

// Only the copy the list names counts as holding a write: a read replica
// followed by hand, holding every write, does not stand in for the
// directory's replica when that one is cut off.
func TestInStepCountsOnlyTheNamedReplica(t *testing.T) {
	var g *leaseGrants
	plain := lease.List{Tenants: []string{"a"}}
	a, b, p, ta, _ := copyThroughProxyAfter(t, func(c *Config) { c.Lease = true }, func(a *testNode) {
		g = &leaseGrants{t: t, n: a}
		g.send(&plain, "")
		g.send(nil, plain.ID())
	})
	// b follows again under its directory name; c follows unnamed.
	b.admin("POST", "tenants/a/follow", `{"from":"http://`+p.Addr()+`","as":"n2"}`)
	c := startNode(t, func(c *Config) { withRepl(c); c.Sync = "60000" })
	c.mkTenant("a")
	c.admin("POST", "tenants/a/follow", `{"from":"`+a.url+`"}`)
	testkit.Eventually(t, 10*time.Second, func() bool {
		open, waited := feedsWaitedFor(ta)
		return open == 2 && waited == 2
	}, "both copies stream and are waited for")
	named := lease.List{Tenants: []string{"a"}, InStep: []string{"a"}, Replicas: map[string]string{"a": "n2"}}
	g.send(&named, "")
	answeredSeq(t, a.q("a", `put c {name: "both"}`))

	p.Cut()
	write := pending(func() *resp { return a.q("a", `put c {name: "only c"}`) })
	testkit.Eventually(t, 3*defaultReplicaWait, func() bool {
		return g.send(nil, named.ID()).Behind["a"] > 0
	}, "the node asks for n2 to be recorded behind")
	select {
	case r := <-write:
		t.Fatalf("answered while only the unnamed copy held it: %d %s", r.Status, r.Body)
	case <-time.After(300 * time.Millisecond):
	}
	if got := count(c, "a"); got != `{"count":5}` {
		t.Fatalf("the unnamed copy holds %s", got)
	}
	p.Heal()
	select {
	case r := <-write:
		if r.Status != 200 {
			t.Fatalf("answered once n2 holds it: %d %s", r.Status, r.Body)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("n2 back, the write is still held")
	}
}

// A keyed write whose first answer never went out (its client hung up
// while the write waited for a copy the list counts on) is answered on a
// retry of its key only as a fresh write would be: held until the copy
// holds it or the list records the copy behind, then replayed. Replayed
// at once from the stored answer, it would acknowledge a write the copy
// never got, which a failover to the copy loses.
func TestInStepKeyedRetryWaitsAsTheWriteWould(t *testing.T) {
	var g *leaseGrants
	plain := lease.List{Tenants: []string{"a"}}
	a, _, p, ta, _ := copyThroughProxyAfter(t, func(c *Config) { c.Lease = true }, func(a *testNode) {
		g = &leaseGrants{t: t, n: a}
		g.send(&plain, "")
		g.send(nil, plain.ID())
	})
	inStep := lease.List{Tenants: []string{"a"}, InStep: []string{"a"}}
	g.send(&inStep, "")
	w0 := answeredSeq(t, a.q("a", `put c {name: "before"}`))

	p.Cut()
	body := `{"query": "put c {name: \"keyed\"}"}`
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	req, err := http.NewRequestWithContext(ctx, "POST", a.url+"/t/a/query", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Idempotency-Key", "k1")
	if res, err := a.client.Do(req); err == nil {
		res.Body.Close()
		t.Fatalf("the first send was answered %d while the copy was cut off", res.StatusCode)
	}
	cancel()
	testkit.Eventually(t, 5*time.Second, func() bool { return ta.db.Seq() > w0 }, "the keyed write lands")

	start := time.Now()
	retry := pending(func() *resp { return a.do("POST", "/t/a/query", body, "Idempotency-Key", "k1") })
	select {
	case r := <-retry:
		t.Fatalf("the retry was answered %d %s after %v, the copy holding nothing of it", r.Status, r.Body, time.Since(start))
	case <-time.After(time.Second):
	}
	var asked uint64
	testkit.Eventually(t, 3*defaultReplicaWait, func() bool {
		asked = g.send(nil, inStep.ID()).Behind["a"]
		return asked > w0
	}, "the node asks for the copy to be recorded behind")
	recorded := lease.List{Tenants: []string{"a"}, Behind: map[string]uint64{"a": asked}}
	g.send(&recorded, "")
	select {
	case r := <-retry:
		if r.Status != 200 || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("the retry once the copy was recorded behind: %d %s %v", r.Status, r.Body, r.Header)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the retry is held after the list recorded the copy behind")
	}
}
