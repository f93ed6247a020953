package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/fenec-go/fenec/bench/internal/benchkit"
)

const (
	adminToken = "bench-admin-token"
	replToken  = "bench-replication-token"
	tenant     = "t0"
	// (f)'s tenants, both on eu1: zoneTenant survives its zone (its
	// voting copy on eu2), regionTenant its region (on us1).
	zoneTenant   = "z0"
	regionTenant = "r0"
)

// deployment is two regions leased by the global tier: eu1 (the
// tenant's home) and eu2 (its voting copy, eu1's standby) in eu, us1
// (its read copy) in us; g, the global tier's leading router, beside eu's nodes; near, a
// standby of g's directory with --near us, beside us1. Each side looks
// node names up at a name server of its own: eu's names its own nodes
// 127.0.0.1 (the node itself) and us1 127.0.0.2 (a wanLink in front of
// it on the same port), us's the other way round. So us1's feed and
// probes, near's forwarding to eu1 and near's watch of g's directory
// cross the link; g's leases of us1 too. (f)'s two tenants live on eu1
// too, z0's voting copy on eu2 and r0's on us1: r0's feed crosses the
// link, and so does its copy's answer that it holds a write.
type deployment struct {
	cfg   config
	dir   string
	c     *http.Client
	g     string // g's URL (in eu)
	near  string // near's URL (in us)
	procs []*benchkit.Proc
	sides *benchkit.Sides
	// ids names each node by its id (Fenec-Node).
	ids map[string]string
	// nodeProcs are the nodes' processes by name ((g) kills eu1's).
	nodeProcs map[string]*benchkit.Proc
	addrs     map[string]string // the nodes' own addresses by name
	proxy     string            // nginx's URL in front of us1; "" when none runs (-nginx none)
}

func (d *deployment) close() {
	for _, p := range slices.Backward(d.procs) {
		p.Stop()
	}
	if d.sides != nil {
		d.sides.Close()
	}
	d.c.CloseIdleConnections()
	os.RemoveAll(d.dir)
}

// startDeployment starts every process, places the tenant on eu1 with
// its copy on eu2 and its read copy on us1, and writes its one row; then
// (f)'s tenants (placeSurvivors).
func startDeployment(cfg config) (*deployment, error) {
	d := &deployment{cfg: cfg, c: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}},
		ids: map[string]string{}, nodeProcs: map[string]*benchkit.Proc{}, addrs: map[string]string{}}
	var err error
	if d.dir, err = os.MkdirTemp("", "fenec-geo-bench-"); err != nil {
		return d, err
	}
	if d.sides, err = benchkit.StartSides(cfg.delay, "eu", "us"); err != nil {
		return d, err
	}

	g, err := benchkit.StartRouterProc(cfg.shardBin, filepath.Join(d.dir, "g"), "g",
		"--auto-failover", "2", "--insecure", "--resolver", d.sides.Resolver("eu"))
	if err != nil {
		return d, fmt.Errorf("router g: %w", err)
	}
	d.procs = append(d.procs, g.P)
	d.g = g.URL
	for _, n := range []struct{ name, region string }{{"eu1", "eu"}, {"eu2", "eu"}, {"us1", "us"}} {
		if err := d.startNode(n.name, n.region); err != nil {
			return d, err
		}
	}
	if _, err := d.call("PUT", d.g+"/_shard/nodes/eu1", `{"standby":"eu2"}`, 201, nil); err != nil {
		return d, err
	}
	if err := benchkit.WaitLeased(d.c, d.g, 30*time.Second, "eu1", "eu2", "us1"); err != nil {
		return d, err
	}

	// near reads g's directory across the link, as a router in us would.
	dirLink, err := d.sides.Link("127.0.0.1:0", g.Etcd[len("http://"):])
	if err != nil {
		return d, err
	}
	addr, err := benchkit.FreeAddr()
	if err != nil {
		return d, err
	}
	args := append([]string{"--listen", addr, "--id", "near", "--directory", "http://" + dirLink.Addr(), "--standby",
		"--near", "us", "--insecure", "--resolver", d.sides.Resolver("us")}, g.Secrets...)
	near, err := benchkit.StartProc("fenec-shard near", nil, cfg.shardBin, args...)
	if err != nil {
		return d, err
	}
	d.procs = append(d.procs, near)
	d.near = "http://" + addr
	if err := near.WaitHTTP(d.near + "/_health"); err != nil {
		return d, err
	}
	if cfg.nginx != "none" {
		ng, base, err := benchkit.StartNginx(cfg.nginx, filepath.Join(d.dir, "nginx"), d.addrs["us1"], "1")
		if err != nil {
			return d, err
		}
		d.procs = append(d.procs, ng)
		d.proxy = base
	}
	if err := d.placeTenant(); err != nil {
		return d, err
	}
	return d, d.placeSurvivors()
}

// startNode starts node name of region, published on both sides of
// the link (Sides.Publish), and records it at g by that name.
func (d *deployment) startNode(name, region string) error {
	p, addr, url, err := d.sides.StartNode(d.cfg.nodeBin, filepath.Join(d.dir, name), name, region, adminToken,
		"--replication-token", replToken, "--lease", "--sync", "always")
	if err != nil {
		return err
	}
	d.procs = append(d.procs, p)
	d.nodeProcs[name] = p
	d.addrs[name] = addr
	var id struct{ ID string }
	if _, err := d.callToken("GET", "http://"+addr+"/_admin/node", adminToken, "", 200, &id); err != nil {
		return err
	}
	d.ids[id.ID] = name
	body := fmt.Sprintf(`{"addr":%q,"token":%q,"region":%q}`, url, adminToken, region)
	_, err = d.call("PUT", d.g+"/_shard/nodes/"+name, body, 201, nil)
	return err
}

// placeTenant places the tenant on eu1, writes its row through g, gives
// it a read copy on us1, and waits until near sends a bounded read there
// and the copy answers it.
func (d *deployment) placeTenant() error {
	if _, err := d.call("PUT", d.g+"/_shard/tenants/"+tenant, `{"node":"eu1"}`, 201, nil); err != nil {
		return err
	}
	for _, q := range []string{"create collection kv (k text @unique, n int)", "put kv {k: 'x', n: 0}"} {
		if _, err := d.call("POST", d.g+"/t/"+tenant+"/query", benchkit.QueryBody(q), 200, nil); err != nil {
			return err
		}
	}
	if _, err := d.call("PUT", d.g+"/_shard/tenants/"+tenant+"/read-copies", `{"nodes":["us1"]}`, 200, nil); err != nil {
		return err
	}
	r := newReader(d, d.near)
	defer r.close()
	return benchkit.WaitFor(60*time.Second, func() error {
		a, err := r.read(hdrMaxStaleness, "1000")
		if err != nil {
			return err
		}
		if a.node != "us1" {
			return fmt.Errorf("a bounded read through near answered by %s (served by %q)", a.node, a.servedBy)
		}
		return nil
	})
}

// placeSurvivors places (f)'s tenants on eu1, each with the row t0 has:
// z0 survives its zone, its voting copy on eu2 (eu1's standby, as t0's);
// r0 is set to survive its region with its voting copy on us1. It waits
// until the directory records both so, neither copy behind.
func (d *deployment) placeSurvivors() error {
	for _, t := range []string{zoneTenant, regionTenant} {
		if _, err := d.call("PUT", d.g+"/_shard/tenants/"+t, `{"node":"eu1"}`, 201, nil); err != nil {
			return err
		}
		for _, q := range []string{"create collection kv (k text @unique, n int)", "put kv {k: 'x', n: 0}"} {
			if _, err := d.call("POST", d.g+"/t/"+t+"/query", benchkit.QueryBody(q), 200, nil); err != nil {
				return fmt.Errorf("%s: %w", t, err)
			}
		}
	}
	var set struct{ Replica string }
	if _, err := d.call("PUT", d.g+"/_shard/tenants/"+regionTenant+"/survive", `{"survive":"region","copy":"us1"}`, 200, &set); err != nil {
		return err
	}
	if set.Replica != "us1" {
		return fmt.Errorf("%s set to survive its region with its copy on %q, not us1", regionTenant, set.Replica)
	}
	return benchkit.WaitFor(30*time.Second, d.survivorsPlaced)
}

// survivorsPlaced says what, if anything, keeps the directory from
// recording (f)'s tenants as placeSurvivors put them.
func (d *deployment) survivorsPlaced() error {
	var ts []struct {
		Name          string `json:"name"`
		Node          string `json:"node"`
		Replica       string `json:"replica"`
		ReplicaBehind uint64 `json:"replica_behind"`
		Survive       string `json:"survive"`
	}
	if _, err := d.call("GET", d.g+"/_shard/tenants", "", 200, &ts); err != nil {
		return err
	}
	want := map[string][2]string{zoneTenant: {"eu2", "zone"}, regionTenant: {"us1", "region"}}
	for _, t := range ts {
		w, ok := want[t.Name]
		if !ok {
			continue
		}
		if t.Node != "eu1" || t.Replica != w[0] || t.Survive != w[1] || t.ReplicaBehind != 0 {
			return fmt.Errorf("%s on %s, its copy on %q (%d behind), survive %q: want eu1, %s, %s",
				t.Name, t.Node, t.Replica, t.ReplicaBehind, t.Survive, w[0], w[1])
		}
		delete(want, t.Name)
	}
	if len(want) > 0 {
		return fmt.Errorf("%d of (f)'s tenants not placed", len(want))
	}
	return nil
}

// call sends one request with no token and wants the status; out, if
// set, takes the answer's JSON.
func (d *deployment) call(method, url, body string, want int, out any) ([]byte, error) {
	return d.callToken(method, url, "", body, want, out)
}

func (d *deployment) callToken(method, url, token, body string, want int, out any) ([]byte, error) {
	b, err := benchkit.Call(d.c, method, url, token, body, want)
	if err != nil || out == nil {
		return b, err
	}
	return b, json.Unmarshal(b, out)
}
