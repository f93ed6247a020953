package tests

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/internal/tlsx"
	"github.com/fenec-go/fenec/tests/cluster"
)

// servedSerial is the serial of the certificate a TLS server at hostport
// shows a client verifying it against bundle (a fresh handshake).
func servedSerial(t *testing.T, hostport, bundle string) (string, error) {
	t.Helper()
	src, err := tlsx.Load(tlsx.Files{CA: bundle}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.Dial("tcp", hostport, src.Client(hostport))
	if err != nil {
		return "", err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

// TestTLSForwardMoveAndStrangers: every link under TLS — clients to the
// router, the router to its nodes (mutual, the nodes taking admin calls
// only beside a certificate), the router to its etcd member (client
// certificates required) — forwarding and a move work, the directory
// holds no node token, and certificates of another CA are refused
// wherever they are shown: a client's at the router and at a node, a
// node's to the router recording it, a client's at the etcd port.
func TestTLSForwardMoveAndStrangers(t *testing.T) {
	c := cluster.New(t)
	pki := c.UseTLS()
	r := c.StartRouter("router", cluster.RouterOptions{})
	n1 := c.StartNode("n1", cluster.NodeOptions{})
	n2 := c.StartNode("n2", cluster.NodeOptions{})
	if !strings.HasPrefix(r.URL(), "https://") || !strings.HasPrefix(n1.URL(), "https://") {
		t.Fatalf("urls %s %s", r.URL(), n1.URL())
	}
	r.Register(n1)
	r.Register(n2)
	kvTenant(t, r, "acme", n1, 3)
	cl := r.Client()
	wantStatus(t, cl.Do("PATCH", "/t/acme/kv?k=eq.k1", `{"v": 7}`), 200, "write over tls")
	wantStatus(t, cl.Do("POST", "/_shard/tenants/acme/move", map[string]any{"to": "n2"}), 200, "move over tls")
	if got := placement(t, cl, "acme")["node"]; got != "n2" {
		t.Fatalf("after the move acme is on %v", got)
	}
	res := cl.Do("GET", "/t/acme/kv?k=eq.k1&select=v", nil)
	if res.Status != 200 || !strings.Contains(string(res.Body), `"v":7`) {
		t.Fatalf("read after the move: %s", res)
	}

	// The directory's client port, reached with the cluster's own
	// certificate and the directory's password, holds every node's token
	// sealed; with a certificate of the cluster's CA and no password — a
	// node's, the operator's — it answers nothing and takes nothing.
	for _, name := range []string{"n1", cluster.Operator} {
		if got := testkit.EtcdStranger(t, []string{r.EtcdURL()}, cluster.MustSource(t, pki.Files(name)).Etcd()); len(got) > 0 {
			t.Fatalf("%s's certificate with no password got:\n%s", name, strings.Join(got, "\n"))
		}
	}
	d, err := global.OpenEtcd(context.Background(), []string{r.EtcdURL()}, "",
		global.WithTLS(cluster.MustSource(t, pki.Files(cluster.Operator)).Etcd()), global.WithPassword(r.DirectoryPassword()))
	if err != nil {
		t.Fatalf("the directory over tls: %v", err)
	}
	defer d.Close()
	kvs, _, err := d.List(context.Background(), global.PrefixNodes)
	if err != nil || len(kvs) != 2 {
		t.Fatalf("node records: %d %v", len(kvs), err)
	}
	for _, kv := range kvs {
		if strings.Contains(string(kv.Value), cluster.AdminToken) || !strings.Contains(string(kv.Value), `"sealed"`) {
			t.Fatalf("the directory holds %s", kv.Value)
		}
	}

	// Strangers: certificates of another CA.
	other := cluster.New(t).UseTLS()
	strangerFiles := other.Issue("stranger")
	strangerFiles.CA = pki.Bundle() // it trusts the cluster; the cluster does not trust it
	stranger := cluster.MustSource(t, strangerFiles)
	if res := cluster.NewClientWith(t, r.URL(), cluster.RouterToken, stranger).Do("GET", "/t/acme/kv?count", nil); res.Err == nil {
		t.Fatalf("a client certificate of another CA was served by the router: %s", res)
	}
	if res := cluster.NewClientWith(t, n2.DirectURL(), cluster.AdminToken, stranger).Do("GET", "/_admin/stats", nil); res.Err == nil {
		t.Fatalf("a client certificate of another CA was served by a node: %s", res)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if d, err := global.OpenEtcd(ctx, []string{r.EtcdURL()}, "", global.WithTLS(stranger.Etcd())); err == nil {
		d.Close()
		t.Fatal("a client certificate of another CA read the directory")
	}
	// No certificate at all: the router's /_shard/ and the node's admin
	// surface refuse it though the token is right; data goes through.
	app := cluster.MustSource(t, tlsx.Files{CA: pki.Bundle()})
	wantError(t, cluster.NewClientWith(t, r.URL(), cluster.RouterToken, app).Do("GET", "/_shard/nodes", nil), 403, "/_shard/ without a client certificate")
	wantError(t, cluster.NewClientWith(t, n2.DirectURL(), cluster.AdminToken, app).Do("GET", "/_admin/stats", nil), 403, "node admin without a client certificate")
	wantStatus(t, cluster.NewClientWith(t, r.URL(), "", app).Do("GET", "/t/acme/kv?count", nil), 200, "data without a client certificate")

	// A node whose certificate another CA issued is not recorded: the
	// router does not trust it.
	oc := cluster.New(t)
	oc.UseTLS()
	n3 := oc.StartNode("n3", cluster.NodeOptions{})
	res = cl.Do("PUT", "/_shard/nodes/n3", map[string]any{"addr": n3.URL(), "token": cluster.AdminToken, "region": "local"})
	if res.Status != 502 {
		t.Fatalf("recording a node of another CA: %s, want 502", res)
	}
}

// TestTLSReplicationAndFailoverUnderLeases: under TLS a copy follows its
// primary (the feed over mutual TLS), the router leases both nodes over
// TLS, and when the primary is killed its tenant is failed over onto the
// copy, which holds every write the router answered.
func TestTLSReplicationAndFailoverUnderLeases(t *testing.T) {
	c := cluster.New(t)
	c.UseTLS()
	r := c.StartRouter("router", cluster.RouterOptions{Args: []string{"--auto-failover", leaseSecs, "--upstream-timeout", "5"}})
	n1, n2 := standbyPair(t, c, r)
	kvTenant(t, r, "w", n1, 1)
	caughtUp(t, "w", n1, n2)
	via := r.Client()
	last := 0
	for i := 1; i <= 20; i++ {
		wantStatus(t, via.Do("PATCH", "/t/w/kv?k=eq.k0", fmt.Sprintf(`{"v": %d}`, i)), 200, "write before the kill")
		last = i
	}
	n1.Kill()
	var rows []struct {
		V int `json:"v"`
	}
	cluster.Eventually(t, wait, func() error {
		if got := placement(t, via, "w")["node"]; got != "n2" {
			return fmt.Errorf("w is on %v", got)
		}
		got := via.Do("GET", "/t/w/kv?k=eq.k0&select=v", nil)
		if got.Status != 200 || json.Unmarshal(got.Body, &rows) != nil || len(rows) != 1 {
			return fmt.Errorf("read after the failover: %s", got)
		}
		return nil
	})
	if rows[0].V != last {
		t.Fatalf("the promoted copy holds v=%d, the last write answered before the kill set %d", rows[0].V, last)
	}
	cluster.Eventually(t, wait, func() error {
		if res := via.Do("PATCH", "/t/w/kv?k=eq.k0", `{"v": 100}`, "Idempotency-Key", "after-the-kill"); res.Status != 200 {
			return fmt.Errorf("write after the failover: %s", res)
		}
		return nil
	})
}

// TestTLSRegionMirrorsGlobalOverTLS: a region's leading router mirrors
// its region from the global directory across TLS (the global member's
// client port takes only certificates of the cluster's CA), and forwards
// from its copy.
func TestTLSRegionMirrorsGlobalOverTLS(t *testing.T) {
	c := cluster.New(t)
	c.UseTLS()
	g := c.StartRouter("global", cluster.RouterOptions{})
	if !strings.HasPrefix(g.EtcdURL(), "https://") {
		t.Fatalf("global etcd url %s", g.EtcdURL())
	}
	local := c.StartRouter("local", cluster.RouterOptions{Args: []string{"--region", "local", "--global", g.EtcdURL()}})
	n1 := c.StartNode("n1", cluster.NodeOptions{})
	g.Register(n1)
	kvTenant(t, g, "eu", n1, 2)
	via := local.Client()
	cluster.Eventually(t, wait, func() error {
		res := via.Do("GET", "/t/eu/kv?count", nil)
		if res.Status != 200 || !strings.Contains(string(res.Body), `"count":2`) {
			return fmt.Errorf("read through the region: %s", res)
		}
		return nil
	})
	wantStatus(t, via.Do("PATCH", "/t/eu/kv?k=eq.k1", `{"v": 3}`), 200, "write through the region")
}

// TestTLSRotationDropsNoRequest: with writers running through the
// router, every certificate — the router's, the nodes', the clients' —
// is issued again and the processes told (SIGHUP): each serves its new
// certificate from then on, and every request the writers sent, on
// kept-alive and on fresh connections alike, was answered 2xx.
func TestTLSRotationDropsNoRequest(t *testing.T) {
	c := cluster.New(t)
	pki := c.UseTLS()
	r := c.StartRouter("router", cluster.RouterOptions{})
	n1 := c.StartNode("n1", cluster.NodeOptions{})
	r.Register(n1)
	kvTenant(t, r, "rot", n1, 1)
	routerBefore, nodeBefore := pki.Serial("router"), pki.Serial("n1")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		wg    sync.WaitGroup
		sent  atomic.Int64
		mu    sync.Mutex
		fails []string
	)
	writer := func(id int, fresh bool) {
		defer wg.Done()
		cl := r.Client()
		if fresh {
			cl = cluster.NewClientWith(t, r.URL(), "", cluster.MustSource(t, pki.Files(cluster.Operator))).Fresh()
		}
		for i := 0; ctx.Err() == nil; i++ {
			res := cl.Do("POST", "/t/rot/kv", map[string]any{"k": fmt.Sprintf("w%d-%d", id, i), "v": i})
			sent.Add(1)
			if res.Status != 201 {
				mu.Lock()
				fails = append(fails, res.String())
				mu.Unlock()
			}
		}
	}
	for i := range 4 {
		wg.Add(1)
		go writer(i, i%2 == 1)
	}
	// Rotate while they write: new certificates everywhere, SIGHUP.
	cluster.Eventually(t, wait, func() error {
		if sent.Load() < 50 {
			return fmt.Errorf("%d requests sent before the rotation", sent.Load())
		}
		return nil
	})
	for _, name := range []string{"router", "n1", cluster.Operator} {
		pki.Issue(name)
	}
	r.Hangup()
	n1.Hangup()
	routerAfter, nodeAfter := pki.Serial("router"), pki.Serial("n1")
	if routerAfter == routerBefore || nodeAfter == nodeBefore {
		t.Fatal("the rotation issued the same serials")
	}
	cluster.Eventually(t, wait, func() error {
		got, err := servedSerial(t, r.Addr(), pki.Bundle())
		if err != nil || got != routerAfter {
			return fmt.Errorf("router serves %s (%v), want %s", got, err, routerAfter)
		}
		got, err = servedSerial(t, n1.Direct(), pki.Bundle())
		if err != nil || got != nodeAfter {
			return fmt.Errorf("node serves %s (%v), want %s", got, err, nodeAfter)
		}
		return nil
	})
	// More writers than the router's pooled connections: the router
	// dials the node afresh, under the new certificates on both sides.
	atRotation := sent.Load()
	for i := 4; i < 16; i++ {
		wg.Add(1)
		go writer(i, true)
	}
	cluster.Eventually(t, wait, func() error {
		if n := sent.Load() - atRotation; n < 200 {
			return fmt.Errorf("%d requests sent after the rotation", n)
		}
		return nil
	})
	cancel()
	wg.Wait()
	if len(fails) > 0 {
		t.Fatalf("%d of %d requests not answered 2xx through the rotation; first: %s", len(fails), sent.Load(), fails[0])
	}
	t.Logf("%d requests through the rotation, all answered 201", sent.Load())
	res := r.Client().Do("GET", "/t/rot/kv?count", nil)
	if res.Status != 200 || !strings.Contains(string(res.Body), `"count":`+strconv.FormatInt(sent.Load()+1, 10)) {
		t.Fatalf("after the rotation the tenant counts %s, want %d rows", res, sent.Load()+1)
	}
}

// TestTokensStayOutOfLogsAuditAndArgs: a TLS cluster whose every token
// comes from a file runs a day's work — nodes recorded, a tenant placed
// and written, a copy following, bad tokens refused, a node killed and
// failed over — and no token is on any process's command line (what the
// process list shows), in any log line, or in any audit log.
func TestTokensStayOutOfLogsAuditAndArgs(t *testing.T) {
	c := cluster.New(t)
	pki := c.UseTLS()
	dataToken, replTok := "e2e-data-"+strconv.FormatInt(time.Now().UnixNano(), 36), "e2e-repl-"+strconv.FormatInt(time.Now().UnixNano()+1, 36)
	audit := func(name string) string { return c.Dir() + "/" + name + "-audit.jsonl" }
	r := c.StartRouter("router", cluster.RouterOptions{Args: []string{"--auto-failover", leaseSecs, "--upstream-timeout", "5", "--audit", audit("router")}})
	nodeArgs := func(name string) []string {
		return []string{"--lease", "--sync", "always", "--audit", audit(name),
			"--http-token-file", pki.TokenFile("http-token", dataToken),
			"--replication-token-file", pki.TokenFile("replication-token", replTok)}
	}
	n1 := c.StartNode("n1", cluster.NodeOptions{Args: nodeArgs("n1")})
	n2 := c.StartNode("n2", cluster.NodeOptions{Args: nodeArgs("n2")})
	r.Register(n1)
	r.Register(n2)
	wantStatus(t, r.Client().Do("PUT", "/_shard/nodes/n1", map[string]any{"standby": "n2"}), 201, "name n2 n1's standby")
	waitLeased(t, r, "n1", "n2")
	r.Place("sec", n1)
	data := c.NewClient(r.URL(), dataToken)
	wantStatus(t, data.Do("POST", "/t/sec/query", map[string]any{"query": "create collection kv (k text @unique, v int)"}), 200, "create")
	for i := range 10 {
		wantStatus(t, data.Do("POST", "/t/sec/kv", map[string]any{"k": fmt.Sprint(i), "v": i}), 201, "write")
	}
	caughtUp(t, "sec", n1, n2)
	// Refusals, which the audit logs record.
	wantStatus(t, c.NewClient(r.URL(), "not-the-data-token").Do("GET", "/t/sec/kv?count", nil), 401, "a bad data token")
	wantStatus(t, c.NewClient(r.URL(), "not-the-router-token").Do("GET", "/_shard/nodes", nil), 401, "a bad router token")
	wantStatus(t, c.NewClient(n2.DirectURL(), "not-the-admin-token").Do("GET", "/_admin/stats", nil), 401, "a bad admin token")
	n1.Kill()
	cluster.Eventually(t, wait, func() error {
		if got := placement(t, r.Client(), "sec")["node"]; got != "n2" {
			return fmt.Errorf("sec is on %v", got)
		}
		return nil
	})
	wantStatus(t, data.Do("POST", "/t/sec/kv", map[string]any{"k": "after", "v": 1}), 201, "a write after the failover")

	secrets := map[string]string{"router": cluster.RouterToken, "admin": cluster.AdminToken, "data": dataToken, "replication": replTok}
	texts := map[string]string{}
	for _, p := range []*cluster.Proc{r.Proc, n1.Proc, n2.Proc} {
		texts[p.Name()+" log"] = p.Log()
		texts[p.Name()+" command line"] = strings.Join(p.Args(), " ")
		b, err := os.ReadFile(audit(p.Name()))
		if err != nil || len(b) == 0 {
			t.Fatalf("%s's audit log: %v (%d bytes)", p.Name(), err, len(b))
		}
		texts[p.Name()+" audit log"] = string(b)
	}
	for where, text := range texts {
		for which, tok := range secrets {
			if strings.Contains(text, tok) {
				t.Errorf("the %s token is in the %s", which, where)
			}
		}
	}
}
