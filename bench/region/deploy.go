package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fenec-go/fenec/bench/internal/benchkit"
	"github.com/fenec-go/fenec/tests/dnsstub"
	"github.com/fenec-go/fenec/tests/proxy"
)

// The deployment the bench drives: routers and nodes each a process of
// their own, started and stopped here.

// benchRouter is one router process and where it listens.
type benchRouter struct {
	p    *benchkit.Proc
	id   string
	url  string
	etcd string // its embedded etcd member's client URL ("" for a standby)
	// secrets give another router its directory's key and password.
	secrets []string
}

// deployment is one run's routers, nodes, proxies and name servers.
type deployment struct {
	cfg    config
	dir    string
	c      *http.Client
	global *benchRouter // the global tier's leading router
	beside *benchRouter // a standby of the global tier, looking names up as eu does
	eu     *benchRouter // eu's leading router
	nodes  map[string]*benchkit.Proc
	fronts []*proxy.Proxy            // every proxy, closed at the end
	cuts   map[string][]*proxy.Proxy // each node's proxies, cut to kill it
	dns    []*dnsstub.Server
}

func (d *deployment) close() {
	for _, r := range []*benchRouter{d.eu, d.beside, d.global} {
		if r != nil && r.p != nil {
			r.p.Stop()
		}
	}
	for _, p := range d.fronts {
		p.Close()
	}
	for _, n := range d.nodes {
		n.Stop()
	}
	for _, s := range d.dns {
		s.Close()
	}
	d.c.CloseIdleConnections()
	os.RemoveAll(d.dir)
}

func startDeployment(cfg config) (*deployment, error) {
	dir, err := os.MkdirTemp("", "fenec-region-bench-")
	if err != nil {
		return &deployment{c: &http.Client{}}, err
	}
	d := &deployment{cfg: cfg, dir: dir,
		c: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}, nodes: map[string]*benchkit.Proc{}, cuts: map[string][]*proxy.Proxy{}}
	globalDNS, err := dnsstub.Start()
	if err != nil {
		return d, err
	}
	euDNS, err := dnsstub.Start()
	if err != nil {
		return d, err
	}
	d.dns = append(d.dns, globalDNS, euDNS)
	if d.global, err = d.router("global", true, "--resolver", globalDNS.Addr()); err != nil {
		return d, err
	}
	wan, err := d.front("127.0.0.1:0", strings.TrimPrefix(d.global.etcd, "http://"), cfg.wan)
	if err != nil {
		return d, err
	}
	// Every other router holds the global tier's key and password, which
	// its router made as it founded the global directory.
	if d.beside, err = d.router("beside", false, append([]string{"--standby", "--directory", d.global.etcd, "--resolver", euDNS.Addr()}, d.global.secrets...)...); err != nil {
		return d, err
	}
	if d.eu, err = d.router("eu", true, append([]string{"--region", "eu", "--global", "http://" + wan.Addr(), "--resolver", euDNS.Addr()}, d.global.secrets...)...); err != nil {
		return d, err
	}
	for _, name := range []string{"eu1", "eu2"} {
		if err := d.startNode(name, euDNS, globalDNS); err != nil {
			return d, err
		}
	}
	for i, name := range []string{"eu1", "eu2"} {
		standby := []string{"eu2", "eu1"}[i]
		if _, err := d.call(d.global, "PUT", "/_shard/nodes/"+name, `{"standby":"`+standby+`"}`, 201); err != nil {
			return d, err
		}
	}
	if err := d.waitLeased(d.global, "eu1", "eu2"); err != nil {
		return d, err
	}
	for i := range cfg.tenants {
		t := "t" + strconv.Itoa(i)
		if _, err := d.call(d.global, "PUT", "/_shard/tenants/"+t, `{"node":"eu1"}`, 201); err != nil {
			return d, err
		}
		if _, err := d.call(d.global, "POST", "/t/"+t+"/query", `{"query":"create collection c (n int)"}`, 200); err != nil {
			return d, err
		}
	}
	// Every tenant in eu's copy, and written through eu's router.
	for i := range cfg.tenants {
		t := "t" + strconv.Itoa(i)
		if err := waitFor(func() error {
			_, err := d.call(d.eu, "POST", "/t/"+t+"/query", `{"query":"put c {n: 0}"}`, 200)
			return err
		}); err != nil {
			return d, err
		}
	}
	return d, nil
}

// router starts one router process leasing for the run's lease, with an
// etcd member of its own (embed) or reading another's (extra says where).
func (d *deployment) router(name string, embed bool, extra ...string) (*benchRouter, error) {
	// --insecure: nodes are recorded by name (resolved to loopback by the
	// bench's name servers), which a router otherwise takes only over TLS.
	args := append([]string{"--auto-failover", strconv.FormatFloat(d.cfg.lease.Seconds(), 'g', -1, 64), "--upstream-timeout", "5", "--insecure"}, extra...)
	if embed {
		rp, err := benchkit.StartRouterProc(d.cfg.shardBin, filepath.Join(d.dir, name), name, args...)
		if err != nil {
			return nil, fmt.Errorf("router %s: %w", name, err)
		}
		return &benchRouter{p: rp.P, id: name, url: rp.URL, etcd: rp.Etcd, secrets: rp.Secrets}, nil
	}
	addr, err := benchkit.FreeAddr()
	if err != nil {
		return nil, err
	}
	p, err := benchkit.StartProc("fenec-shard "+name, nil, d.cfg.shardBin, append([]string{"--listen", addr, "--id", name}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("router %s: %w", name, err)
	}
	if err := p.WaitHTTP("http://" + addr + "/_health"); err != nil {
		p.Stop()
		return nil, fmt.Errorf("router %s: %w", name, err)
	}
	return &benchRouter{p: p, id: name, url: "http://" + addr}, nil
}

// front starts a proxy on listen in front of target, holding each chunk
// for delay.
func (d *deployment) front(listen, target string, delay time.Duration) (*proxy.Proxy, error) {
	p, err := proxy.Start(listen, target)
	if err != nil {
		return nil, err
	}
	p.SetDelay(delay)
	d.fronts = append(d.fronts, p)
	return p, nil
}

// startNode starts node name behind two proxies on one port: 127.0.0.1,
// which eu's name server names, and 127.0.0.2, the global tier's, slow;
// and records it at the global tier by name.
func (d *deployment) startNode(name string, euDNS, globalDNS *dnsstub.Server) error {
	s, addr, err := benchkit.StartNodeProc(d.cfg.nodeBin, filepath.Join(d.dir, name), "fenec-node "+name, adminToken,
		"--replication-token", replToken, "--lease", "--sync", "always", "--resolver", euDNS.Addr())
	if err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	d.nodes[name] = s
	near, err := d.front("127.0.0.1:0", addr, 0)
	if err != nil {
		return err
	}
	_, port, _ := net.SplitHostPort(near.Addr())
	far, err := d.front("127.0.0.2:"+port, addr, d.cfg.wan)
	if err != nil {
		return err
	}
	d.cuts[name] = []*proxy.Proxy{near, far}
	host := name + ".bench.test"
	euDNS.Set(host, netip.MustParseAddr("127.0.0.1"))
	globalDNS.Set(host, netip.MustParseAddr("127.0.0.2"))
	body := fmt.Sprintf(`{"addr":"http://%s:%s","token":%q,"region":"eu"}`, host, port, adminToken)
	_, err = d.call(d.global, "PUT", "/_shard/nodes/"+name, body, 201)
	return err
}

// cut cuts node name off from everyone.
func (d *deployment) cut(name string) {
	for _, p := range d.cuts[name] {
		p.Cut()
	}
}

// handoff asks r for eu's handoff to side and returns how long it took.
func (d *deployment) handoff(r *benchRouter, to string) (time.Duration, error) {
	began := time.Now()
	b, err := d.call(r, "POST", "/_shard/regions/eu/handoff", `{"to":"`+to+`"}`, 200)
	if err != nil {
		return 0, err
	}
	took := time.Since(began)
	var ans struct{ Leaser string }
	if err := json.Unmarshal(b, &ans); err != nil || ans.Leaser != to {
		return 0, fmt.Errorf("handoff to %s answered %s", to, b)
	}
	return took, nil
}

// call sends one request to r and wants the status.
func (d *deployment) call(r *benchRouter, method, path, body string, want int) ([]byte, error) {
	req, err := http.NewRequest(method, r.url+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	res, err := d.c.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		return b, fmt.Errorf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
	return b, nil
}

// waitFor calls fn until it returns nil, for 30 s at most.
func waitFor(fn func() error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := fn()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitLeased waits until r runs a lease on every named node.
func (d *deployment) waitLeased(r *benchRouter, nodes ...string) error {
	return waitFor(func() error {
		b, err := d.call(r, "GET", "/_shard/leases", "", 200)
		if err != nil {
			return err
		}
		var a struct {
			Nodes []struct {
				Node   string `json:"node"`
				Ran    bool   `json:"ran"`
				LeftMS int64  `json:"left_ms"`
			} `json:"nodes"`
		}
		if err := json.Unmarshal(b, &a); err != nil {
			return err
		}
		for _, want := range nodes {
			if !slices.ContainsFunc(a.Nodes, func(n struct {
				Node   string `json:"node"`
				Ran    bool   `json:"ran"`
				LeftMS int64  `json:"left_ms"`
			}) bool {
				return n.Node == want && n.Ran && n.LeftMS > 0
			}) {
				return fmt.Errorf("%s not leased by %s", want, r.id)
			}
		}
		return nil
	})
}

// placedOn says where r places tenant t.
func (d *deployment) placedOn(r *benchRouter, t string) string {
	b, err := d.call(r, "GET", "/_shard/tenants", "", 200)
	if err != nil {
		return ""
	}
	var rows []struct{ Name, Node string }
	_ = json.Unmarshal(b, &rows)
	for _, row := range rows {
		if row.Name == t {
			return row.Node
		}
	}
	return ""
}

// readLatencies times n reads of tenant t0's rows through each of a and
// b, in turns of a tenth of n, after a tenth of n through each to warm up.
func (d *deployment) readLatencies(a, b *benchRouter, n int) (latencies, latencies, error) {
	turn := max(n/10, 1)
	var da, db []time.Duration
	for round := range 11 {
		for _, r := range []*benchRouter{a, b} {
			for range turn {
				began := time.Now()
				if _, err := d.call(r, "GET", "/t/t0/c?n=eq.0", "", 200); err != nil {
					return latencies{}, latencies{}, err
				}
				if round == 0 {
					continue // warming up
				}
				if r == a {
					da = append(da, time.Since(began))
				} else {
					db = append(db, time.Since(began))
				}
			}
		}
	}
	return percentiles(da), percentiles(db), nil
}

func percentiles(ds []time.Duration) latencies {
	slices.Sort(ds)
	return latencies{p50: ds[len(ds)/2], p99: ds[len(ds)*99/100]}
}

// writers write every tenant through eu's router, one keyed writer each.
type writers struct {
	d      *deployment
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	writes  map[string]int       // guarded by mu: answered writes per tenant
	lastOK  time.Time            // guarded by mu: when any write was last answered
	longest time.Duration        // guarded by mu: the longest time between two
	resumed map[string]time.Time // guarded by mu: when each tenant's write was last answered
	cutAt   time.Time            // guarded by mu: when a node was cut (zero: none)
	first   map[string]time.Time // guarded by mu: each tenant's first write answered after cutAt
}

func (d *deployment) startWriters() *writers {
	ctx, cancel := context.WithCancel(context.Background())
	w := &writers{d: d, cancel: cancel, writes: map[string]int{}, resumed: map[string]time.Time{}, first: map[string]time.Time{}}
	for i := range d.cfg.tenants {
		t := "t" + strconv.Itoa(i)
		w.wg.Go(func() { w.write(ctx, t) })
	}
	return w
}

func (w *writers) write(ctx context.Context, t string) {
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	for i := 0; ctx.Err() == nil; i++ {
		body := fmt.Sprintf(`{"query":"put c {n: %d}"}`, i+1)
		req, err := http.NewRequestWithContext(ctx, "POST", w.d.eu.url+"/t/"+t+"/query", strings.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Idempotency-Key", t+"-"+strconv.Itoa(i))
		for ctx.Err() == nil {
			res, err := c.Do(req.Clone(ctx))
			if err == nil {
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode == 200 {
					w.answered(t, time.Now())
					break
				}
			}
			req.Body = io.NopCloser(strings.NewReader(body))
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (w *writers) answered(t string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.lastOK.IsZero() {
		w.longest = max(w.longest, at.Sub(w.lastOK))
	}
	w.lastOK = at
	w.writes[t]++
	w.resumed[t] = at
	if _, ok := w.first[t]; !ok && !w.cutAt.IsZero() && at.After(w.cutAt) {
		w.first[t] = at
	}
}

// markCut notes the moment a node was cut: each tenant's first write
// answered after it is when the tenant took writes again.
func (w *writers) markCut(at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cutAt = at
}

func (w *writers) stop() {
	w.cancel()
	w.wg.Wait()
}

// waitWrites waits until every tenant took n more writes.
func (w *writers) waitWrites(n int) error {
	w.mu.Lock()
	base := map[string]int{}
	for t, k := range w.writes {
		base[t] = k
	}
	w.mu.Unlock()
	return waitFor(func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		for i := range w.d.cfg.tenants {
			t := "t" + strconv.Itoa(i)
			if w.writes[t]-base[t] < n {
				return fmt.Errorf("%s: %d writes", t, w.writes[t]-base[t])
			}
		}
		return nil
	})
}

// waitOn waits until every tenant is placed on node by eu's router and
// took a write after that.
func (w *writers) waitOn(d *deployment, node string) error {
	for i := range d.cfg.tenants {
		t := "t" + strconv.Itoa(i)
		if err := waitFor(func() error {
			if on := d.placedOn(d.eu, t); on != node {
				return fmt.Errorf("%s on %q", t, on)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	placed := time.Now()
	return waitFor(func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		for t, at := range w.resumed {
			if at.Before(placed) {
				return fmt.Errorf("%s not written since it was placed on %s", t, node)
			}
		}
		return nil
	})
}

// lastResumed is how long after the cut the last tenant to take a write
// again took its first.
func (w *writers) lastResumed() (time.Duration, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var last time.Duration
	for i := range w.d.cfg.tenants {
		at, ok := w.first["t"+strconv.Itoa(i)]
		if !ok {
			return 0, errNoWrite
		}
		last = max(last, at.Sub(w.cutAt))
	}
	return last, nil
}

func (w *writers) resetPause() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.longest = 0
}

func (w *writers) longestPause() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.longest
}

// errNoWrite: a tenant took no write after the cut.
var errNoWrite = errors.New("no write after the cut")
