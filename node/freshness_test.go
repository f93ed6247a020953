package node

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/forwarded"
	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/lease"
	"github.com/fenec-go/fenec/tests/proxy"
	"github.com/fenec-go/fenec/wire"
)

// leaseA grants n a running lease naming tenant "a" (a minute by n's
// clock) and returns the grants, to send more.
func leaseA(t *testing.T, n *testNode) *leaseGrants {
	t.Helper()
	g := &leaseGrants{t: t, n: n}
	list := lease.List{Tenants: []string{"a"}}
	g.send(&list, "")
	g.send(nil, list.ID())
	return g
}

// staleness is an answer's Fenec-Staleness-Ms: the bound in ms, or
// false for "unbounded". An answer without it fails the test.
func staleness(tb testing.TB, r *resp) (int64, bool) {
	tb.Helper()
	v := r.Header.Get(wire.HeaderStaleness)
	if v == wire.StalenessUnbounded {
		return 0, false
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 0 {
		tb.Fatalf("answer %d %s carries Fenec-Staleness-Ms %q", r.Status, r.Body, v)
	}
	return ms, true
}

// boundedRead reads tenant a's rows on n asking for at most maxMS of
// staleness.
func boundedRead(n *testNode, maxMS int) *resp {
	return n.do("GET", "/t/a/c?count", "", wire.HeaderMaxStaleness, strconv.Itoa(maxMS))
}

// wantDeclined checks a copy's decline: 421, the Fenec-Refused value, a
// wire.Declined body.
func wantDeclined(t *testing.T, r *resp, refused string) wire.Declined {
	t.Helper()
	wantJSONError(t, r, wire.StatusDeclined)
	if got := r.Header.Get(wire.HeaderRefused); got != refused {
		t.Fatalf("declined with Fenec-Refused %q, want %q: %s", got, refused, r.Body)
	}
	var d wire.Declined
	if err := json.Unmarshal(r.Body, &d); err != nil {
		t.Fatalf("declined body %s: %v", r.Body, err)
	}
	return d
}

// A copy of a leased primary proves a bound of about a round trip and the
// probe interval; the primary's own reads are 0. Cut off from it, the
// copy's bound grows with the time since the cut — never less — and a
// bounded read it cannot prove is declined, saying what it can prove;
// healed, the bound is small again.
func TestCopyBoundWhileLeasedAndCut(t *testing.T) {
	a, b, p, _, _ := copyThroughProxyAfter(t, func(c *Config) { c.Lease = true }, func(a *testNode) { leaseA(t, a) })
	if ms, ok := staleness(t, a.do("GET", "/t/a/c?count", "")); !ok || ms != 0 {
		t.Fatalf("the leased primary's bound: %d %v", ms, ok)
	}
	var small int64
	testkit.Eventually(t, 10*time.Second, func() bool {
		r := boundedRead(b, 1000)
		if r.Status != 200 {
			return false
		}
		small, _ = staleness(t, r)
		return small <= 250
	}, "the copy proves a bound of a quarter second or less")
	t.Logf("the copy's bound on loopback: %d ms", small)
	st := replication(t, b, "a")["freshness"].(map[string]any)
	if st["probing"] != true || st["warm"] != true || st["staleness_ms"] == nil || st["proof_seq"] == json.Number("0") {
		t.Fatalf("the copy's freshness status %v", st)
	}

	p.Cut()
	cut := time.Now()
	time.Sleep(300 * time.Millisecond)
	last := int64(0)
	for range 5 {
		since := time.Since(cut).Milliseconds()
		ms, ok := staleness(t, b.do("GET", "/t/a/c?count", ""))
		if !ok || ms < since || ms < last {
			t.Fatalf("cut %d ms ago, the copy says %d ms (%v), after %d", since, ms, ok, last)
		}
		last = ms
		time.Sleep(50 * time.Millisecond)
	}
	since := time.Since(cut).Milliseconds()
	d := wantDeclined(t, boundedRead(b, 200), wire.RefusedStale)
	if d.StalenessMS == nil || *d.StalenessMS < since || d.Seq == 0 || d.History == 0 {
		t.Fatalf("decline cut %d ms ago: %+v", since, d)
	}
	if !strings.Contains(d.Error, "primary") {
		t.Fatalf("the decline does not say where to read: %s", d.Error)
	}

	p.Heal()
	testkit.Eventually(t, 20*time.Second, func() bool {
		r := boundedRead(b, 1000)
		return r.Status == 200
	}, "healed, the copy proves its bound again")
}

// A primary whose lease lapsed answers no probe as leased: its copy's
// bound grows from before the lapse, and the primary's own reads say the
// time since it lapsed.
func TestCopyBoundGrowsOnceThePrimaryLapsed(t *testing.T) {
	clock := &jumpClock{now: time.Hour}
	a := startNode(t, func(c *Config) { withRepl(c); c.Lease = true; c.LeaseClock = clock })
	leaseA(t, a)
	people(t, a)
	b := startNode(t, withRepl)
	b.mkTenant("a")
	b.admin("POST", "tenants/a/follow", `{"from":"`+a.url+`"}`)
	testkit.Eventually(t, 10*time.Second, func() bool { return boundedRead(b, 1000).Status == 200 }, "the copy proves its bound")

	clock.advance(61 * time.Second) // the minute's lease ran out a second ago
	lapsed := time.Now()
	if ms, ok := staleness(t, a.do("GET", "/t/a/c?count", "")); !ok || ms < 1000 || ms > 1100 {
		t.Fatalf("the lapsed primary says %d ms (%v), lapsed 1000 ms ago by its clock", ms, ok)
	}
	time.Sleep(200 * time.Millisecond)
	for range 10 {
		since := time.Since(lapsed).Milliseconds()
		ms, ok := staleness(t, b.do("GET", "/t/a/c?count", ""))
		if !ok || ms < since {
			t.Fatalf("lapsed %d ms ago, the copy says %d ms (%v)", since, ms, ok)
		}
		time.Sleep(30 * time.Millisecond)
	}
	wantDeclined(t, boundedRead(b, 100), wire.RefusedStale)
	// The primary answers bounded reads only within what it can say.
	if r := boundedRead(a, 5000); r.Status != 200 {
		t.Fatalf("lapsed a second ago, asked five: %d %s", r.Status, r.Body)
	}
	r := boundedRead(a, 500)
	wantJSONError(t, r, 503)
	if r.Header.Get(wire.HeaderRefused) != wire.RefusedLease || r.Header.Get("Retry-After") == "" {
		t.Fatalf("lapsed primary asked for 500 ms: %v", r.Header)
	}
}

// A copy whose primary is gone proves nothing newer: its bound grows from
// before the primary went, and a bounded read is declined at once.
func TestCopyBoundGrowsOnceThePrimaryIsGone(t *testing.T) {
	a := startNode(t, func(c *Config) { withRepl(c); c.Lease = true })
	leaseA(t, a)
	people(t, a)
	b := startNode(t, withRepl)
	b.mkTenant("a")
	b.admin("POST", "tenants/a/follow", `{"from":"`+a.url+`"}`)
	testkit.Eventually(t, 10*time.Second, func() bool { return boundedRead(b, 1000).Status == 200 }, "the copy proves its bound")
	gone := time.Now()
	if err := a.s.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	for range 5 {
		since := time.Since(gone).Milliseconds()
		ms, ok := staleness(t, b.do("GET", "/t/a/c?count", ""))
		if !ok || ms < since {
			t.Fatalf("the primary went %d ms ago, the copy says %d ms (%v)", since, ms, ok)
		}
		time.Sleep(50 * time.Millisecond)
	}
	start := time.Now()
	wantDeclined(t, boundedRead(b, 100), wire.RefusedStale)
	if took := time.Since(start); took > directFreshWait/2 {
		t.Fatalf("declined after %v with no feed open", took)
	}
}

// A primary without --lease claims nothing of its copies: its own reads
// are 0, its copy's are unbounded, and a bounded read of the copy is
// declined.
func TestCopyOfAnUnleasedPrimaryProvesNothing(t *testing.T) {
	a := startNode(t, withRepl)
	people(t, a)
	b := startNode(t, withRepl)
	b.mkTenant("a")
	b.admin("POST", "tenants/a/follow", `{"from":"`+a.url+`"}`)
	testkit.Eventually(t, 10*time.Second, func() bool { return count(b, "a") == `{"count":3}` }, "the copy caught up")
	if ms, ok := staleness(t, a.do("GET", "/t/a/c?count", "")); !ok || ms != 0 {
		t.Fatalf("unleased primary: %d %v", ms, ok)
	}
	for _, r := range []*resp{
		b.do("GET", "/t/a/c?count", ""),
		b.query("a", "get c count"),
		b.do("GET", "/t/a/_changes?since="+replication(t, b, "a")["seq"].(json.Number).String(), ""),
		b.do("POST", "/t/a/batch", `{"query": "get c count"}`+"\n"),
	} {
		if r.Status != 200 {
			t.Fatalf("read of the copy: %d %s", r.Status, r.Body)
		}
		if _, ok := staleness(t, r); ok {
			t.Fatalf("a copy of an unleased primary states a bound: %v", r.Header)
		}
	}
	d := wantDeclined(t, boundedRead(b, 60000), wire.RefusedStale)
	if d.StalenessMS != nil {
		t.Fatalf("declined stating a bound: %+v", d)
	}
	if w := a.q("a", `put c {name: "w"}`); w.Header.Get(wire.HeaderStaleness) != "" {
		t.Fatal("a write's answer carries a staleness bound")
	}
}

// A copy probes about once a second until a read asks it for a bound,
// then every --freshness-interval for a while; with the interval 0 it
// never probes.
func TestCopyProbesWarmOnlyWhenAsked(t *testing.T) {
	a := startNode(t, func(c *Config) { withRepl(c); c.Lease = true })
	leaseA(t, a)
	people(t, a)
	ta := holdTenant(t, a, "a")
	// probes is the newest probe the copy following as name sent.
	probesOf := func(name string) uint64 {
		ta.mu.Lock()
		defer ta.mu.Unlock()
		var n uint64
		for f := range ta.feeds {
			if f.copy == name {
				n = max(n, f.asked.Load())
			}
		}
		return n
	}
	probes := func() uint64 { return probesOf("nb") }
	b := startNode(t, func(c *Config) { withRepl(c); c.FreshnessInterval = 20 * time.Millisecond })
	b.mkTenant("a")
	b.admin("POST", "tenants/a/follow", `{"from":"`+a.url+`","as":"nb"}`)
	testkit.Eventually(t, 10*time.Second, func() bool { return probes() > 0 }, "the copy probes")
	p0 := probes()
	time.Sleep(2 * time.Second)
	if cold := probes() - p0; cold > 4 {
		t.Fatalf("%d probes in 2 s with no bounded read", cold)
	}
	boundedRead(b, 1000)
	p1 := probes()
	time.Sleep(time.Second)
	if warm := probes() - p1; warm < 10 {
		t.Fatalf("%d probes in 1 s warm, at 20 ms", warm)
	}

	c := startNode(t, func(c *Config) { withRepl(c); c.FreshnessInterval = 0 })
	c.mkTenant("a")
	c.admin("POST", "tenants/a/follow", `{"from":"`+a.url+`","as":"nc"}`)
	testkit.Eventually(t, 10*time.Second, func() bool { return count(c, "a") == `{"count":3}` }, "the copy caught up")
	wantDeclined(t, boundedRead(c, 60000), wire.RefusedStale)
	time.Sleep(300 * time.Millisecond)
	if got := probesOf("nc"); got != 0 {
		t.Fatalf("a copy with --freshness-interval 0 probed %d times", got)
	}
}

// rolesOf lists the roles of the copies streaming from n's tenant a.
func rolesOf(t *testing.T, n *testNode) []string {
	t.Helper()
	var out []string
	for _, c := range replication(t, n, "a")["copies"].([]any) {
		out = append(out, c.(map[string]any)["role"].(string))
	}
	return out
}

// A read copy is sent only what the tenant committed: with the copy the
// lease list has in step cut off, a write lands on the primary and is
// held, and neither a read copy following already nor one that starts
// following now (sent an image) gets it; once the list records the
// voting copy behind and the write is answered, both do. A read copy is
// never what a write waits for.
func TestReadCopyStopsAtTheCommitPoint(t *testing.T) {
	var g *leaseGrants
	a, b, p, _, tb := copyThroughProxyAfter(t, func(c *Config) { c.Lease = true; c.ReplicaWait = 300 * time.Millisecond },
		func(a *testNode) { g = leaseA(t, a) })
	inStep := lease.List{Tenants: []string{"a"}, InStep: []string{"a"}}
	g.send(&inStep, "")
	follower := func() *testNode {
		n := startNode(t, func(c *Config) { withRepl(c); c.Sync = "60000" })
		n.mkTenant("a")
		if r := n.admin("POST", "tenants/a/follow", `{"from":"`+a.url+`","role":"read"}`); r.Status != 200 || r.Obj(t)["role"] != wire.RoleRead {
			t.Fatalf("follow as a read copy: %d %s", r.Status, r.Body)
		}
		return n
	}
	c := follower()
	w1 := answeredSeq(t, a.q("a", `put c {name: "one"}`))
	testkit.Eventually(t, 10*time.Second, func() bool { return seqOf(t, c, "a") >= w1 }, "the read copy has the answered write")
	testkit.Eventually(t, 10*time.Second, func() bool {
		got := strings.Join(rolesOf(t, a), ",")
		return got == "read,voting" || got == "voting,read"
	}, "the primary streams to a voting copy and a read copy")
	if st := replication(t, c, "a"); st["copy_role"] != wire.RoleRead {
		t.Fatalf("the read copy's status: %v", st)
	}

	p.Cut()
	write := pending(func() *resp { return a.q("a", `put c {name: "held"}`) })
	testkit.Eventually(t, 5*time.Second, func() bool { return seqOf(t, a, "a") > w1 }, "the write landed on the primary")
	c2 := follower() // a new read copy: sent an image, once committed
	for range 10 {
		if got, voted := seqOf(t, c, "a"), tb.db.Seq(); got > voted {
			t.Fatalf("the read copy holds seq %d, the voting copy %d", got, voted)
		}
		if got := count(c2, "a"); got != `{"error":"unknown collection: c"}` && got != `{"count":3}` && got != `{"count":4}` {
			t.Fatalf("the new read copy shows %s", got)
		}
		if count(c2, "a") == `{"count":5}` || count(c, "a") == `{"count":5}` {
			t.Fatal("a read copy shows a write no voting copy holds")
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case r := <-write:
		t.Fatalf("the write was answered while its copy in step was cut: %d %s", r.Status, r.Body)
	default:
	}

	// Recorded behind, the write is answered: committed, both get it.
	var asked uint64
	testkit.Eventually(t, 10*time.Second, func() bool {
		asked = g.send(nil, inStep.ID()).Behind["a"]
		return asked > 0
	}, "the node asks for its copy to be recorded behind")
	g.send(&lease.List{Tenants: []string{"a"}, Behind: map[string]uint64{"a": asked}}, "")
	if r := <-write; r.Status != 200 {
		t.Fatalf("the held write: %d %s", r.Status, r.Body)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		return count(c, "a") == `{"count":5}` && count(c2, "a") == `{"count":5}`
	}, "both read copies have the write once committed")
	_ = b
}

// A write waits for no read copy: one cut off holds up nothing, and is
// never counted lagging.
func TestReadCopyIsNeverWaitedFor(t *testing.T) {
	a := startNode(t, func(c *Config) { withRepl(c); c.Sync = "always" })
	people(t, a)
	p := proxy.New(t, strings.TrimPrefix(a.url, "http://"))
	c := startNode(t, withRepl)
	c.mkTenant("a")
	c.admin("POST", "tenants/a/follow", `{"from":"http://`+p.Addr()+`","role":"read"}`)
	testkit.Eventually(t, 10*time.Second, func() bool { return count(c, "a") == `{"count":3}` }, "the read copy caught up")
	ta := holdTenant(t, a, "a")
	testkit.Eventually(t, 10*time.Second, func() bool { open, _ := feedsWaitedFor(ta); return open == 1 }, "its stream is open")
	p.Cut()
	start := time.Now()
	a.q("a", `put c {name: "alone"}`)
	if took := time.Since(start); took > defaultReplicaWait/2 {
		t.Fatalf("a write waited %v with only a read copy, cut", took)
	}
	for _, cp := range replication(t, a, "a")["copies"].([]any) {
		if m := cp.(map[string]any); m["lagging"] != false || m["role"] != wire.RoleRead {
			t.Fatalf("the read copy's status on the primary: %v", m)
		}
	}
}

// A read copy is never promoted, forced or not, alone or in a batch: the
// refusal names its role and how to make it a voting copy, which can then
// be promoted.
func TestReadCopyIsNeverPromoted(t *testing.T) {
	a := startNode(t, withRepl)
	people(t, a)
	b := startNode(t, withRepl)
	b.mkTenant("a")
	b.admin("POST", "tenants/a/follow", `{"from":"`+a.url+`","role":"read"}`)
	testkit.Eventually(t, 10*time.Second, func() bool { return count(b, "a") == `{"count":3}` }, "the read copy caught up")
	lin := lineageOf(t, a, "a")
	for _, body := range []string{`{"lineage": ` + lin + `}`, `{"lineage": ` + lin + `, "force": true}`} {
		m := wantJSONError(t, b.admin("POST", "tenants/a/promote", body), 409)
		if m["role"] != wire.RoleRead || !strings.Contains(m["error"].(string), `"role": "voting"`) {
			t.Fatalf("promote %s: %v", body, m)
		}
	}
	many := b.admin("POST", "promote", `{"tenants": [{"tenant": "a", "lineage": `+lin+`}], "force": true}`)
	if m := many.Obj(t)["tenants"].([]any)[0].(map[string]any); m["status"] != json.Number("409") || m["promoted"] != false {
		t.Fatalf("promote many: %s", many.Body)
	}
	if st := replication(t, b, "a"); st["role"] != "replica" || st["copy_role"] != wire.RoleRead {
		t.Fatalf("after refusals: %v", st)
	}
	a.q("a", `put c {name: "still followed"}`)
	testkit.Eventually(t, 10*time.Second, func() bool { return count(b, "a") == `{"count":4}` }, "the refused read copy follows on")

	wantJSONError(t, b.admin("POST", "tenants/a/follow", `{"from":"`+a.url+`","role":"witness"}`), 400)
	if r := b.admin("POST", "tenants/a/follow", `{"from":"`+a.url+`","role":"voting"}`); r.Status != 200 || r.Obj(t)["role"] != wire.RoleVoting {
		t.Fatalf("follow as voting: %d %s", r.Status, r.Body)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return replication(t, b, "a")["heard"] == true }, "the voting copy heard")
	if r := b.admin("POST", "tenants/a/promote", `{"lineage": `+lin+`}`); r.Status != 200 || r.Obj(t)["promoted"] != true {
		t.Fatalf("promote the voting copy: %d %s", r.Status, r.Body)
	}
}

// doH sends a request with hdr as given (a name may repeat).
func (n *testNode) doH(method, path, body string, hdr http.Header) *resp {
	n.tb.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, n.url+path, rd)
	if err != nil {
		n.tb.Fatal(err)
	}
	req.Header = hdr
	res, err := n.client.Do(req)
	if err != nil {
		n.tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		n.tb.Fatal(err)
	}
	return &resp{Status: res.StatusCode, Header: res.Header, Body: b}
}

// Fenec-Max-Staleness is one decimal integer of milliseconds up to a day:
// anything else, on any read route, primary or copy, is 400 saying what
// is allowed, and nothing runs. Fenec-Copy-Wait is looked at only beside
// a router's proof that matches.
func TestStalenessHeadersHostile(t *testing.T) {
	a := startNode(t, func(c *Config) { withRepl(c); c.Lease = true })
	leaseA(t, a)
	people(t, a)
	b := startNode(t, withRepl)
	b.mkTenant("a")
	b.admin("POST", "tenants/a/follow", `{"from":"`+a.url+`"}`)
	testkit.Eventually(t, 10*time.Second, func() bool { return boundedRead(b, 1000).Status == 200 }, "the copy proves its bound")
	bad := [][]string{
		{"-1"}, {"abc"}, {"1.5"}, {"+5"}, {"5 6"}, {"5ms"}, {""}, {"0x10"}, {"1e3"},
		{"86400001"}, {"99999999999999999999999"}, {"5", "6"}, {"5, 6"},
	}
	routes := []struct{ method, path, body string }{
		{"GET", "/t/a/c?count", ""},
		{"POST", "/t/a/query", `{"query": "get c count"}`},
		{"POST", "/t/a/batch", `{"query": "get c count"}` + "\n"},
		{"GET", "/t/a/_changes?since=0", ""},
		{"POST", "/t/a/query", `{"query": "put c {name: \"never\"}"}`},
	}
	for _, n := range []*testNode{a, b} {
		for _, vs := range bad {
			for _, rt := range routes {
				h := http.Header{wire.HeaderMaxStaleness: vs}
				m := wantJSONError(t, n.doH(rt.method, rt.path, rt.body, h), 400)
				if !strings.Contains(m["error"].(string), "from 0 to 86400000") {
					t.Fatalf("%q on %s %s: %v", vs, rt.method, rt.path, m)
				}
			}
		}
	}
	if got := count(a, "a"); got != `{"count":3}` {
		t.Fatalf("a write under a bad header ran: %s", got)
	}
	for _, v := range []string{"0", "007", "86400000"} {
		if r := a.doH("GET", "/t/a/c?count", "", http.Header{wire.HeaderMaxStaleness: {v}}); r.Status != 200 {
			t.Fatalf("%q on the primary: %d %s", v, r.Status, r.Body)
		}
	}

	// Fenec-Copy-Wait without a proof, or with a wrong one, is not looked
	// at: Fenec-After waits as ever and answers 504; a write is 503.
	after := strconv.FormatUint(seqOf(t, b, "a")+100, 10)
	for _, proof := range []string{"", "0123456789abcdef", forwarded.Proof("not-the-admin-token")} {
		h := http.Header{wire.HeaderCopyWait: {"garbage"}, wire.HeaderAfter: {after}, wire.HeaderWait: {"200"}}
		if proof != "" {
			h.Set(wire.HeaderRouterProof, proof)
		}
		start := time.Now()
		m := wantJSONError(t, b.doH("GET", "/t/a/c?count", "", h), 504)
		if time.Since(start) < 200*time.Millisecond || m["seq"] == nil {
			t.Fatalf("Fenec-Copy-Wait with proof %q was honoured: %v", proof, m)
		}
		h.Del(wire.HeaderAfter)
		r := b.doH("POST", "/t/a/query", `{"query": "put c {name: \"no\"}"}`, h)
		wantJSONError(t, r, 503)
		if r.Header.Get(wire.HeaderRefused) != wire.RefusedReplica {
			t.Fatalf("a write to the copy without a router's proof: %v", r.Header)
		}
	}
	// With the proof, a bad wait is 400.
	for _, v := range []string{"-1", "x", "30001"} {
		h := http.Header{wire.HeaderCopyWait: {v}, wire.HeaderRouterProof: {forwarded.Proof(adminToken)}}
		wantJSONError(t, b.doH("GET", "/t/a/c?count", "", h), 400)
	}
}

// A read a router sends a copy (Fenec-Copy-Wait beside its proof) is
// answered when the copy can, or declined at once — Fenec-After not
// reached within the wait (behind), a bound it cannot prove (stale), a
// write (replica, unrun) — and a primary answers it as ever.
func TestCopyWaitDeclinesAtOnce(t *testing.T) {
	a := startNode(t, func(c *Config) { withRepl(c); c.Lease = true })
	leaseA(t, a)
	people(t, a)
	p := proxy.New(t, strings.TrimPrefix(a.url, "http://"))
	b := startNode(t, withRepl)
	b.mkTenant("a")
	b.admin("POST", "tenants/a/follow", `{"from":"http://`+p.Addr()+`"}`)
	testkit.Eventually(t, 10*time.Second, func() bool { return boundedRead(b, 1000).Status == 200 }, "the copy proves its bound")
	wait := "100"
	routed := func(hdr ...string) http.Header {
		h := http.Header{wire.HeaderCopyWait: {wait}, wire.HeaderRouterProof: {forwarded.Proof(adminToken)}, wire.HeaderClient: {"10.1.2.3"}}
		for i := 0; i+1 < len(hdr); i += 2 {
			h.Set(hdr[i], hdr[i+1])
		}
		return h
	}
	// Answered: the write it waits for arrives within the wait (a wait
	// of seconds, so that a loaded machine's slow feed is no refusal).
	w := answeredSeq(t, a.q("a", `put c {name: "new"}`))
	wait = "10000"
	r := b.doH("GET", "/t/a/c?count", "", routed(wire.HeaderAfter, strconv.FormatUint(w, 10), wire.HeaderMaxStaleness, "1000"))
	wait = "100"
	if r.Status != 200 || strings.TrimSpace(string(r.Body)) != `{"count":4}` {
		t.Fatalf("routed read: %d %s", r.Status, r.Body)
	}
	if _, ok := staleness(t, r); !ok {
		t.Fatal("a routed answer with no bound")
	}

	p.Cut()
	time.Sleep(150 * time.Millisecond)
	// Behind: a write past what it holds.
	start := time.Now()
	d := wantDeclined(t, b.doH("GET", "/t/a/c?count", "", routed(wire.HeaderAfter, strconv.FormatUint(w+1, 10))), wire.RefusedBehind)
	if took := time.Since(start); took > time.Second || d.Seq != w {
		t.Fatalf("behind: declined after %v: %+v", took, d)
	}
	// Stale: it cannot prove 100 ms, cut off 150 ms ago.
	start = time.Now()
	d = wantDeclined(t, b.doH("POST", "/t/a/query", `{"query": "get c count"}`, routed(wire.HeaderMaxStaleness, "100")), wire.RefusedStale)
	if took := time.Since(start); took > time.Second || d.StalenessMS == nil || *d.StalenessMS < 150 {
		t.Fatalf("stale: declined after %v: %+v", took, d)
	}
	// A write: declined unrun.
	for _, rq := range []struct{ method, path, body string }{
		{"POST", "/t/a/query", `{"query": "put c {name: \"routed\"}"}`},
		{"POST", "/t/a/c", `{"name": "routed"}`},
		{"POST", "/t/a/batch", `{"query": "put c {name: \"routed\"}"}` + "\n"},
		{"DELETE", "/t/a/c?name=eq.new", ""},
	} {
		d = wantDeclined(t, b.doH(rq.method, rq.path, rq.body, routed()), wire.RefusedReplica)
		if !strings.Contains(d.Error, "primary") {
			t.Fatalf("%s %s declined: %+v", rq.method, rq.path, d)
		}
	}
	if got := count(b, "a"); got != `{"count":4}` {
		t.Fatalf("the copy after declined writes: %s", got)
	}
	// The primary answers a routed read as it would any.
	if r := a.doH("GET", "/t/a/c?count", "", routed(wire.HeaderMaxStaleness, "0")); r.Status != 200 || r.Header.Get(wire.HeaderStaleness) != "0" {
		t.Fatalf("routed read of the primary: %d %s %v", r.Status, r.Body, r.Header)
	}
}

// Nodes from before probes and read copies keep working with nodes after
// them, both ways: a copy probes only a primary that says it answers
// probes (one from before would end the feed on the first), a read copy
// takes nothing from a primary that does not say it honours the role,
// and a copy from before — which never probes — is never sent a frame
// it does not know.
func TestFeedsAcrossVersions(t *testing.T) {
	a := startNode(t, func(c *Config) { withRepl(c); c.Lease = true })
	a.s.oldFeeds.Store(true) // a primary from before
	leaseA(t, a)
	people(t, a)
	ta := holdTenant(t, a, "a")
	feedOf := func(name string) *feed {
		ta.mu.Lock()
		defer ta.mu.Unlock()
		for f := range ta.feeds {
			if f.copy == name {
				return f
			}
		}
		return nil
	}
	b := startNode(t, withRepl)
	b.mkTenant("a")
	b.admin("POST", "tenants/a/follow", `{"from":"`+a.url+`","as":"nb"}`)
	c := startNode(t, withRepl)
	c.mkTenant("a")
	c.admin("POST", "tenants/a/follow", `{"from":"`+a.url+`","as":"nc","role":"read"}`)
	testkit.Eventually(t, 10*time.Second, func() bool { return count(b, "a") == `{"count":3}` && feedOf("nb") != nil }, "the voting copy follows")
	first := feedOf("nb")
	start := time.Now()
	wantDeclined(t, boundedRead(b, 60000), wire.RefusedStale) // warm: it would probe now
	if took := time.Since(start); took > directFreshWait/2 {
		t.Fatalf("a copy of a primary answering no probes waited %v", took)
	}
	for i := range 10 {
		a.q("a", `put c {name: "w`+strconv.Itoa(i)+`"}`)
		time.Sleep(30 * time.Millisecond)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return count(b, "a") == `{"count":13}` }, "the voting copy keeps up")
	if feedOf("nb") != first || first.asked.Load() != 0 {
		t.Fatal("the copy's feed from the old primary was broken or probed")
	}
	if st := replication(t, b, "a")["freshness"].(map[string]any); st["probing"] != false {
		t.Fatalf("probing an old primary: %v", st)
	}
	if got := count(c, "a"); got != `{"error":"unknown collection: c"}` || feedOf("nc") != nil {
		t.Fatalf("a read copy of an old primary took %s", got)
	}

	// A copy from before, on a new primary: acks only, and only the
	// frames it knows come back.
	n := startNode(t, func(c *Config) { withRepl(c); c.Lease = true })
	leaseA(t, n)
	people(t, n)
	seq, hist := seqOf(t, n, "a"), replication(t, n, "a")["history"].(json.Number).String()
	pr, pw := io.Pipe()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", n.url+"/t/a/_replication?since="+strconv.FormatUint(seq, 10)+"&history="+hist, pr)
	req.Header.Set("Authorization", "Bearer "+replToken)
	req.ContentLength = -1
	go func() {
		var ack [13]byte
		ack[0] = frameAck
		ack[4] = 8
		for i := 5; i < 13; i++ {
			ack[i] = byte(seq >> (8 * (12 - i)))
		}
		pw.Write(ack[:])
	}()
	res, err := n.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	defer pw.Close()
	if f, r := feedFeatures(res.Header); !f || !r {
		t.Fatalf("the new primary's features: %v", res.Header)
	}
	n.q("a", `put c {name: "to the old copy"}`)
	br := bufio.NewReader(res.Body)
	kinds := map[byte]int{}
	for kinds[frameRecord] == 0 {
		kind, _, err := readFrame(br)
		if err != nil {
			t.Fatalf("after %v: %v", kinds, err)
		}
		kinds[kind]++
	}
	for k := range kinds {
		if k != frameHello && k != frameRecord && k != frameKeep {
			t.Fatalf("an old copy was sent a frame %q: %v", k, kinds)
		}
	}
}

// The staleness checker: a writer writes increasing values on the primary,
// noting when each write's answer came back; readers read the copy, over
// a link of 10 ms each way that is cut for a while in the middle, asking
// for at most a second of staleness and noting when each read was sent.
// Every answer stating a bound B must show a value at least as new as
// every write answered before the read was sent less B.
func TestCopyAnswersNeverOlderThanTheirBound(t *testing.T) {
	a := startNode(t, func(c *Config) { withRepl(c); c.Lease = true })
	leaseA(t, a)
	a.mkTenant("a")
	a.q("a", "create collection k (v int @sorted)")
	p := proxy.New(t, strings.TrimPrefix(a.url, "http://"))
	p.SetDelay(10 * time.Millisecond)
	b := startNode(t, withRepl)
	b.mkTenant("a")
	b.admin("POST", "tenants/a/follow", `{"from":"http://`+p.Addr()+`"}`)
	testkit.Eventually(t, 10*time.Second, func() bool { return b.do("GET", "/t/a/k?count", "").Status == 200 }, "the copy caught up")

	const wantReads = 3000
	type read struct {
		sent  time.Time
		bound time.Duration
		v     int
	}
	var (
		mu     sync.Mutex
		acks   []time.Time // acks[i]: write v=i+1 answered
		reads  []read
		stale  int // declined: the bound was not proven
		done   = make(chan struct{})
		failed atomic.Bool
	)
	var wg sync.WaitGroup
	wg.Go(func() { // the writer
		for i := 1; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			r := a.do("POST", "/t/a/k", `{"v": `+strconv.Itoa(i)+`}`)
			if r.Status != 201 {
				t.Errorf("write %d: %d %s", i, r.Status, r.Body)
				failed.Store(true)
				return
			}
			mu.Lock()
			acks = append(acks, time.Now())
			mu.Unlock()
		}
	})
	for range 2 {
		wg.Go(func() { // a reader
			for !failed.Load() {
				select {
				case <-done:
					return
				default:
				}
				sent := time.Now()
				r := b.do("GET", "/t/a/k?order=v.desc&limit=1&select=v", "", wire.HeaderMaxStaleness, "1000")
				switch r.Status {
				case 200:
				case wire.StatusDeclined:
					mu.Lock()
					stale++
					mu.Unlock()
					continue
				default:
					t.Errorf("read: %d %s", r.Status, r.Body)
					failed.Store(true)
					return
				}
				ms, ok := staleness(t, r)
				if !ok || ms > 1000 {
					t.Errorf("answered with bound %d (%v) asked at most 1000", ms, ok)
					failed.Store(true)
					return
				}
				var rows []struct{ V int }
				if err := json.Unmarshal(r.Body, &rows); err != nil {
					t.Errorf("read %s: %v", r.Body, err)
					failed.Store(true)
					return
				}
				v := 0
				if len(rows) > 0 {
					v = rows[0].V
				}
				mu.Lock()
				reads = append(reads, read{sent: sent, bound: time.Duration(ms) * time.Millisecond, v: v})
				mu.Unlock()
			}
		})
	}
	got := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(reads)
	}
	deadline := time.Now().Add(90 * time.Second)
	for got() < wantReads/2 && time.Now().Before(deadline) && !failed.Load() {
		time.Sleep(20 * time.Millisecond)
	}
	p.Cut() // the copy hears nothing for a while: its bound grows
	time.Sleep(400 * time.Millisecond)
	p.Heal()
	for got() < wantReads && time.Now().Before(deadline) && !failed.Load() {
		time.Sleep(20 * time.Millisecond)
	}
	close(done)
	wg.Wait()
	if failed.Load() {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reads) < wantReads {
		t.Fatalf("only %d reads answered in time (%d declined)", len(reads), stale)
	}
	var worst, sum time.Duration
	for i, r := range reads {
		// Writes answered before sent-bound: acks is in order.
		before := sort.Search(len(acks), func(j int) bool { return !acks[j].Before(r.sent.Add(-r.bound)) })
		if r.v < before {
			t.Fatalf("read %d, sent with bound %v, shows %d; %d writes were answered before %v",
				i, r.bound, r.v, before, r.sent.Add(-r.bound))
		}
		worst, sum = max(worst, r.bound), sum+r.bound
	}
	t.Logf("%d reads checked against %d writes (%d declined): bound mean %v, worst %v",
		len(reads), len(acks), stale, sum/time.Duration(len(reads)), worst)
}
