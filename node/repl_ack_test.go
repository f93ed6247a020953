package node

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenec-go/fenec/engine"
	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/tests/proxy"
)

// holdTenant acquires a tenant on n for the test's length.
func holdTenant(tb testing.TB, n *testNode, name string) *tenant {
	tb.Helper()
	tn, err := n.s.reg.acquire(context.Background(), name)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { n.s.reg.release(tn) })
	return tn
}

// feedsWaitedFor counts the primary's replication streams open and those
// of them a write would wait for (not lagging).
func feedsWaitedFor(tn *tenant) (open, waited int) {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	for f := range tn.feeds {
		open++
		if !f.lagging {
			waited++
		}
	}
	return open, waited
}

// answeredSeq is the seq a write was answered with.
func answeredSeq(tb testing.TB, r *resp) uint64 {
	tb.Helper()
	seq, err := strconv.ParseUint(r.Header.Get("Fenec-Seq"), 10, 64)
	if err != nil {
		tb.Fatalf("write answered without Fenec-Seq: %d %s", r.Status, r.Body)
	}
	return seq
}

// warnCounter counts log records whose message holds a phrase.
type warnCounter struct {
	phrase string
	n      *atomic.Int64
}

func (w warnCounter) Enabled(context.Context, slog.Level) bool { return true }
func (w warnCounter) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, w.phrase) {
		w.n.Add(1)
	}
	return nil
}
func (w warnCounter) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w warnCounter) WithGroup(string) slog.Handler      { return w }

// copyThroughProxy starts a --sync always primary a (more set by cfg, if
// any) holding tenant a, and a copy b syncing only once a minute that
// follows it through a cuttable proxy p; it returns once b caught up and
// a's stream to it is open and waited for, with both tenants held.
func copyThroughProxy(t *testing.T, cfg func(*Config)) (a, b *testNode, p *proxy.Proxy, ta, tb *tenant) {
	return copyThroughProxyAfter(t, cfg, nil)
}

// copyThroughProxyAfter is copyThroughProxy calling before, if set, with
// the primary before its tenant is made.
func copyThroughProxyAfter(t *testing.T, cfg func(*Config), before func(a *testNode)) (a, b *testNode, p *proxy.Proxy, ta, tb *tenant) {
	t.Helper()
	a = startNode(t, func(c *Config) {
		withRepl(c)
		c.Sync = "always"
		if cfg != nil {
			cfg(c)
		}
	})
	if before != nil {
		before(a)
	}
	b = startNode(t, func(c *Config) { withRepl(c); c.Sync = "60000" })
	p = proxy.New(t, strings.TrimPrefix(a.url, "http://"))
	people(t, a)
	b.mkTenant("a")
	b.admin("POST", "tenants/a/follow", `{"from":"http://`+p.Addr()+`"}`)
	testkit.Eventually(t, 10*time.Second, func() bool { return count(b, "a") == `{"count":3}` }, "the copy caught up")
	ta, tb = holdTenant(t, a, "a"), holdTenant(t, b, "a")
	testkit.Eventually(t, 10*time.Second, func() bool {
		open, waited := feedsWaitedFor(ta)
		return open == 1 && waited == 1
	}, "the copy's stream is open and waited for")
	return a, b, p, ta, tb
}

// Under --sync always a write is answered only once the copy's own file
// holds it durably. The copy syncs on its own only once a minute, so
// what it holds durably at each answer is what it synced to acknowledge.
func TestSyncAlwaysAnswersOnceTheCopyHoldsIt(t *testing.T) {
	a := startNode(t, func(c *Config) { withRepl(c); c.Sync = "always" })
	b := startNode(t, func(c *Config) { withRepl(c); c.Sync = "60000" })
	people(t, a)
	b.mkTenant("a")
	b.admin("POST", "tenants/a/follow", `{"from":"`+a.url+`"}`)
	testkit.Eventually(t, 10*time.Second, func() bool { return count(b, "a") == `{"count":3}` }, "the copy caught up")
	ta, tb := holdTenant(t, a, "a"), holdTenant(t, b, "a")
	testkit.Eventually(t, 10*time.Second, func() bool {
		open, waited := feedsWaitedFor(ta)
		return open == 1 && waited == 1
	}, "the copy's stream is open and waited for")
	for i := range 20 {
		seq := answeredSeq(t, a.q("a", "put c {name: $1}", "s"+strconv.Itoa(i)))
		if d := tb.db.Durable(); d < seq {
			t.Fatalf("write %d answered while the copy's file held %d durably", seq, d)
		}
	}
	// A /batch and a REST write are held the same way.
	seq := answeredSeq(t, a.do("POST", "/t/a/batch", `{"query": "put c {name: \"batch\"}"}`+"\n"))
	if d := tb.db.Durable(); d < seq {
		t.Fatalf("batch %d answered while the copy's file held %d durably", seq, d)
	}
	seq = answeredSeq(t, a.do("POST", "/t/a/c", `{"name": "rest"}`))
	if d := tb.db.Durable(); d < seq {
		t.Fatalf("REST write %d answered while the copy's file held %d durably", seq, d)
	}
	if got := count(b, "a"); got != `{"count":25}` {
		t.Fatalf("copy after the writes: %s", got)
	}
}

// A copy cut off the network holds up one write for at most the bound;
// later writes do not wait for it until it has caught up again, and then
// they do.
func TestCutCopyHoldsUpOneWrite(t *testing.T) {
	var warned atomic.Int64
	a, _, p, ta, tb := copyThroughProxy(t, func(c *Config) {
		c.Logger = slog.New(warnCounter{phrase: "before every replica acknowledged", n: &warned})
	})

	p.Cut()
	w1 := answeredSeq(t, a.q("a", `put c {name: "cut 1"}`))
	if warned.Load() != 1 {
		t.Fatalf("a write the cut copy never acknowledged: %d warnings", warned.Load())
	}
	if d := tb.db.Durable(); d >= w1 {
		t.Fatalf("the cut copy holds %d, the write was %d", d, w1)
	}
	if _, waited := feedsWaitedFor(ta); waited != 0 {
		t.Fatal("the cut copy is still waited for")
	}
	// The primary says so: in its replication status and its metrics.
	copiesLag := func() []any { return replication(t, a, "a")["copies"].([]any) }
	if cs := copiesLag(); len(cs) != 1 || cs[0].(map[string]any)["lagging"] != true {
		t.Fatalf("copies after the cut write: %v", cs)
	}
	unreplicated := func() string {
		m := string(a.do("GET", "/_metrics", "", "Authorization", "Bearer "+adminToken).Body)
		for _, line := range strings.Split(m, "\n") {
			if strings.HasPrefix(line, "fenec_node_writes_unreplicated_total ") {
				return strings.TrimPrefix(line, "fenec_node_writes_unreplicated_total ")
			}
		}
		return "missing"
	}
	if got := unreplicated(); got != "1" {
		t.Fatalf("fenec_node_writes_unreplicated_total after the cut write: %s", got)
	}
	w2 := answeredSeq(t, a.q("a", `put c {name: "cut 2"}`))
	if warned.Load() != 1 {
		t.Fatalf("a second write waited out the bound for a lagging copy (%d warnings)", warned.Load())
	}
	if got := unreplicated(); got != "2" {
		t.Fatalf("fenec_node_writes_unreplicated_total after the second cut write: %s", got)
	}

	p.Heal()
	testkit.Eventually(t, 20*time.Second, func() bool {
		open, waited := feedsWaitedFor(ta)
		return tb.db.Durable() >= w2 && open == 1 && waited == 1
	}, "the copy caught up and is waited for again")
	if cs := copiesLag(); len(cs) != 1 || cs[0].(map[string]any)["lagging"] != false {
		t.Fatalf("copies after the heal: %v", cs)
	}
	w3 := answeredSeq(t, a.q("a", `put c {name: "healed"}`))
	if d := tb.db.Durable(); d < w3 {
		t.Fatalf("write %d answered while the healed copy held %d durably", w3, d)
	}
	if warned.Load() != 1 {
		t.Fatalf("a write after the heal was not acknowledged (%d warnings)", warned.Load())
	}
	if got := unreplicated(); got != "2" {
		t.Fatalf("fenec_node_writes_unreplicated_total after the heal: %s", got)
	}
}

// A primary ends the feed of a copy that answers none of three keepalives
// in a row (it answers every keepalive with an ack), and keeps the feed of
// one that answers them, however long it takes.
func TestPrimaryDropsASilentCopy(t *testing.T) {
	a := startNode(t, func(c *Config) { withRepl(c); c.KeepAlive = 20 * time.Millisecond })
	b := startNode(t, withRepl)
	p := proxy.New(t, strings.TrimPrefix(a.url, "http://"))
	people(t, a)
	b.mkTenant("a")
	b.admin("POST", "tenants/a/follow", `{"from":"http://`+p.Addr()+`"}`)
	testkit.Eventually(t, 10*time.Second, func() bool { return count(b, "a") == `{"count":3}` }, "the copy caught up")
	ta := holdTenant(t, a, "a")
	// Keepalives come and go with their acks: the feed stays open past
	// three keepalives.
	testkit.Eventually(t, 10*time.Second, func() bool {
		open, _ := feedsWaitedFor(ta)
		return open == 1
	}, "the copy's stream is open")
	f := oneFeed(ta)
	first := f.heard.Load()
	testkit.Eventually(t, 10*time.Second, func() bool {
		return f.heard.Load() >= first+5
	}, "acks to five keepalives")
	if oneFeed(ta) != f {
		t.Fatal("a copy answering keepalives had its feed ended")
	}
	p.Cut()
	testkit.Eventually(t, 10*time.Second, func() bool {
		open, _ := feedsWaitedFor(ta)
		return open == 0
	}, "the silent copy's feed ended")
	p.Heal()
	a.q("a", `put c {name: "after"}`)
	testkit.Eventually(t, 10*time.Second, func() bool { return count(b, "a") == `{"count":4}` }, "the copy follows again")
}

// oneFeed is a tenant's only replication stream.
func oneFeed(tn *tenant) *feed {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	for f := range tn.feeds {
		return f
	}
	return &feed{}
}

// Under --sync always a read shows no write before the copies a write
// waits for hold it: a write the copy never got (lost if this node dies
// and the copy is promoted) is not seen and then unseen. A read, a REST
// read, a change feed and a subscription's event that do show it come only
// once the copy holds it or the write stopped waiting for it.
func TestReadShowsNoWriteTheCopyLacks(t *testing.T) {
	a, _, p, ta, tb := copyThroughProxy(t, nil)
	sub := a.subscribe("/t/a/c/changes")
	t.Cleanup(func() { sub.res.Body.Close() })
	sub.mustNext(t, "seed")
	for i, read := range []struct {
		what string
		do   func(name string, before uint64) *resp
	}{
		// First, before later writes send the subscription more events.
		{"subscription event", func(string, uint64) *resp {
			ev := sub.mustNext(t, "change")
			sub.res.Body.Close()
			b, _ := json.Marshal(ev)
			return &resp{Status: 200, Body: b}
		}},
		{"query", func(name string, _ uint64) *resp { return a.q("a", `get c where name = $1`, name) }},
		{"REST read", func(name string, _ uint64) *resp { return a.do("GET", "/t/a/c?name=eq."+name, "") }},
		{"change feed", func(_ string, before uint64) *resp {
			return a.do("GET", "/t/a/_changes?since="+strconv.FormatUint(before, 10), "")
		}},
	} {
		// Each read kind against its own write, the copy waited for.
		testkit.Eventually(t, 20*time.Second, func() bool {
			_, waited := feedsWaitedFor(ta)
			return waited == 1 && tb.db.Durable() == ta.db.Seq()
		}, "the copy holds everything and is waited for")
		name := "unheld" + strconv.Itoa(i)
		before := ta.db.Seq()
		p.Cut()
		wrote := make(chan *resp, 1)
		go func() { wrote <- a.q("a", `put c {name: $1}`, name) }()
		testkit.Eventually(t, 10*time.Second, func() bool { return ta.db.Seq() > before }, "the write landed on the primary")
		r := read.do(name, before)
		if r.Status != 200 || !strings.Contains(string(r.Body), name) {
			t.Fatalf("%s: %d %s, want the write", read.what, r.Status, r.Body)
		}
		// Answered showing the write: the copy held it, or the write had
		// stopped waiting for the copy.
		if _, waited := feedsWaitedFor(ta); waited != 0 && tb.db.Durable() <= before {
			t.Fatalf("%s showed a write the copy does not hold while writes still wait for it", read.what)
		}
		if w := <-wrote; w.Status != 200 {
			t.Fatalf("the write: %d %s", w.Status, w.Body)
		}
		p.Heal()
	}
}

// A copy acknowledges records unsynced only when it runs --sync off and
// its primary's hello says no write there waits on the ack; a primary
// that does not say so (one that predates the field, or a hello the copy
// cannot read) gets acks of synced records.
func TestAcksUnsyncedOnlyUnderSyncOffOnBoth(t *testing.T) {
	hello := func(applied bool) []byte {
		b, err := json.Marshal(replHello{History: 7, Seq: 3, Applied: applied})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct {
		name  string
		copy  engine.SyncMode
		hello []byte
		want  bool
	}{
		{"off on both", engine.SyncOff, hello(true), true},
		{"primary --sync always", engine.SyncOff, hello(false), false},
		{"primary says nothing", engine.SyncOff, []byte(`{"history":7,"seq":3,"lineage":[]}`), false},
		{"hello unreadable", engine.SyncOff, []byte(`{"applied":`), false},
		{"copy --sync always", engine.SyncAlways, hello(true), false},
		{"copy syncing every ms", engine.SyncEvery, hello(true), false},
	} {
		tn := &tenant{reg: &registry{engineOpts: engine.Options{Sync: c.copy}}}
		if got := tn.acksUnsynced(c.hello); got != c.want {
			t.Errorf("%s: acks unsynced %v, want %v", c.name, got, c.want)
		}
	}
}

// The acker gives the transport one ack frame per read: the position
// asked from first, then the newest seq offered (offers a read did not
// take in between are overtaken), an ack again when asked to; a read
// waiting for an offer ends as the body is closed or the feed's context
// ends.
func TestAckerFramesTheNewestOffer(t *testing.T) {
	ack := newAcker(context.Background(), 4)
	read := func() uint64 {
		t.Helper()
		buf := make([]byte, 64)
		n, err := ack.Read(buf)
		if err != nil || n != 13 || buf[0] != frameAck {
			t.Fatalf("read %d bytes %q, %v: want one ack frame", n, buf[:n], err)
		}
		kind, payload, err := readFrame(bufio.NewReader(bytes.NewReader(buf[:n])))
		if err != nil || kind != frameAck {
			t.Fatalf("frame %q: %v", kind, err)
		}
		return binary.BigEndian.Uint64(payload)
	}
	if got := read(); got != 4 {
		t.Fatalf("first ack %d, want the position asked from, 4", got)
	}
	ack.offer(5, false)
	ack.offer(7, false)
	if got := read(); got != 7 {
		t.Fatalf("ack %d, want the newest offered, 7", got)
	}
	ack.offer(6, true) // a keepalive answered: the newest again
	if got := read(); got != 7 {
		t.Fatalf("ack again %d, want 7", got)
	}

	ended := make(chan error)
	go func() {
		_, err := ack.Read(make([]byte, 64))
		ended <- err
	}()
	ack.Close()
	if err := <-ended; !errors.Is(err, errFeedEnded) {
		t.Fatalf("a read waiting as the body closed: %v", err)
	}
	ack.Close() // twice is fine

	ctx, cancel := context.WithCancel(context.Background())
	ack = newAcker(ctx, 1)
	read()
	go func() {
		_, err := ack.Read(make([]byte, 64))
		ended <- err
	}()
	cancel()
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("a read waiting as the feed ended: %v", err)
	}
}
