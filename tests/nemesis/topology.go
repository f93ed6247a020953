package nemesis

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/nemesis"
	"github.com/fenec-go/fenec/tests/cluster"
	"github.com/fenec-go/fenec/tests/dnsstub"
	"github.com/fenec-go/fenec/tests/proxy"
)

// replToken is the nodes' replication token.
const replToken = "nemesis-repl-token"

// region is the nodes' region.
const region = "eu"

// Shape is what a scenario runs against.
type Shape struct {
	// Regions runs the global tier (a leading router and a standby) and
	// region eu's own routers (a leading router linked to the global
	// directory, and a standby), the nodes in eu, leased by the global
	// tier at first. Without, one leading router and a standby on its
	// directory (the global tier alone).
	Regions bool
	// Nodes is how many nodes (3 if 0).
	Nodes int
	// Sync is the nodes' --sync ("always" if "").
	Sync string
	// Tenants is how many tenants (4 if 0), placed in turn on the nodes.
	Tenants int
	// Ballast is how many bytes each tenant holds besides the workload's
	// rows, so that its image takes a while to copy (a move's steps).
	Ballast int
	// NodeArgs are more flags for every node (e.g. --log-level debug).
	NodeArgs []string
	// Far, when set, adds a second region of that name, leased by the
	// global tier as eu is: one node there (Far+"1"), a router near it
	// (n1: a standby on the global tier's directory started with --near
	// Far), and a delay of farDelay each way on every link between the
	// two regions. Every third tenant (t2, t5, ...) is set to survive
	// its region, its voting copy on the far node; every other gets a
	// read copy there. Not with Regions (read copies are the global
	// tier's).
	Far string
}

// farDelay is the delay, each way, of every link between eu and the far
// region while no fault changes it: a round trip of 2·farDelay.
const farDelay = 10 * time.Millisecond

// Topo is a running deployment: routers and nodes, and a proxy of its
// own on every link from a router or a node to a node, and from a router
// to a directory it does not embed, each of which can be cut alone.
type Topo struct {
	tb    testing.TB
	C     *cluster.Cluster
	h     *History
	shape Shape
	lease time.Duration
	dir   string // the suite's files: clocks, synced lengths

	Routers []*Router
	Nodes   []*Node
	peers   *dnsstub.Server // eu's nodes' resolver: names at 127.0.0.2
	farDNS  *dnsstub.Server // the far node's: eu's nodes at 127.0.0.3
	// farLinks are the links between eu and the far region, each
	// delayed by farDelay unless a fault changes it.
	farLinks []*proxy.Proxy
	byID     map[string]string
	tenants  []string

	stuck map[string]bool // nodes a check found stuck, by name

	mu        sync.Mutex
	anomalies []Anomaly // guarded by mu: found by the deployment, not in the history
}

// Router is one fenec-shard process of the deployment.
type Router struct {
	*cluster.Router
	// Tier is "global" or the region it serves.
	Tier    string
	Standby bool
	// Near is the region of the readers it serves (--near), if any.
	Near string
	ip   string          // where its proxies to the nodes listen
	dns  *dnsstub.Server // its resolver: node names at ip
	// dirLink is its proxy to its directory (a standby's), globalLink to
	// the global directory (a region's router's); nil when it has none.
	dirLink, globalLink *proxy.Proxy
	cl                  *cluster.Client // the suite's own, with the router's token
	down                atomic.Bool     // killed and not yet started again (read by the clients' goroutines)
}

// Node is one fenec-node process of the deployment.
type Node struct {
	*cluster.Node
	ID      string
	Region  string
	port    string
	links   map[string]*proxy.Proxy // by who reaches it: a router's name, "peers", or (eu's nodes) the far node's name
	clock   string                  // its lease clock's file
	synced  string                  // its synced lengths' directory
	admin   *cluster.Client         // the suite's own, straight to the node
	version int64                   // the clock setting last written
	down    bool
	paused  bool
}

// peersLink is the key of the link every node's copies use to reach it.
const peersLink = "peers"

// Start starts the deployment, its nodes leased, and places its tenants
// with their copies caught up.
func Start(tb testing.TB, h *History, shape Shape, lease time.Duration) *Topo {
	tb.Helper()
	if shape.Nodes == 0 {
		shape.Nodes = 3
	}
	if shape.Sync == "" {
		shape.Sync = "always"
	}
	if shape.Tenants == 0 {
		shape.Tenants = 4
	}
	c := cluster.New(tb)
	t := &Topo{tb: tb, C: c, h: h, shape: shape, lease: lease, dir: filepath.Join(c.Dir(), "nemesis"),
		peers: dnsstub.New(tb), byID: map[string]string{}, stuck: map[string]bool{}}
	if err := os.MkdirAll(t.dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	t.startRouters()
	for i := range shape.Nodes {
		t.startNode(region+strconv.Itoa(i+1), region)
	}
	if shape.Far != "" {
		t.farDNS = dnsstub.New(tb)
		t.startNode(shape.Far+"1", shape.Far)
	}
	t.recordNodes()
	t.WaitLeased(2 * time.Minute)
	t.placeTenants()
	return t
}

// routerArgs are every router's flags.
func (t *Topo) routerArgs() []string {
	secs := strconv.FormatFloat(t.lease.Seconds(), 'f', -1, 64)
	return []string{"--auto-failover", secs, "--replicas", "--upstream-timeout", "5", "--insecure"}
}

// startRouters starts the routers: the global tier's leader and standby,
// and, with Regions, eu's.
func (t *Topo) startRouters() {
	g := t.startRouter("g1", "global", false, nil)
	t.startRouter("g2", "global", true, g)
	if t.shape.Regions {
		e := t.startRouter("e1", region, false, nil)
		t.startRouter("e2", region, true, e)
	}
	if t.shape.Far != "" {
		t.startRouter("n1", "global", true, g)
	}
}

// startRouter starts one router; a standby uses leader's directory
// through a proxy of its own.
func (t *Topo) startRouter(name, tier string, standby bool, leader *Router) *Router {
	r := &Router{Tier: tier, Standby: standby, ip: "127.0.0." + strconv.Itoa(10+len(t.Routers)), dns: dnsstub.New(t.tb)}
	args := append(t.routerArgs(), "--resolver", r.dns.Addr())
	var o cluster.RouterOptions
	if standby {
		r.dirLink = proxy.New(t.tb, hostPort(leader.EtcdURL()))
		o.Directory = "http://" + r.dirLink.Addr()
		args = append(args, "--standby")
	}
	if name == "n1" {
		r.Near = t.shape.Far
		args = append(args, "--near", r.Near)
		t.far(r.dirLink)
	}
	if tier != "global" {
		r.globalLink = proxy.New(t.tb, hostPort(t.Routers[0].EtcdURL()))
		args = append(args, "--region", tier, "--global", "http://"+r.globalLink.Addr())
	}
	o.Args = args
	r.Router = t.C.StartRouter(name, o)
	r.cl = r.Client()
	t.Routers = append(t.Routers, r)
	return r
}

// startNode starts a node of reg under --lease, its clock and synced
// lengths the suite's, with a proxy for each router and one for its
// peers; the far node also gets a proxy of its own to each of eu's.
func (t *Topo) startNode(name, reg string) *Node {
	n := &Node{Region: reg, links: map[string]*proxy.Proxy{},
		clock: filepath.Join(t.dir, name+".clock"), synced: filepath.Join(t.dir, name+".synced")}
	if err := os.MkdirAll(n.synced, 0o755); err != nil {
		t.tb.Fatal(err)
	}
	resolver := t.peers
	if reg != region {
		resolver = t.farDNS
	}
	args := []string{"--lease", "--sync", t.shape.Sync, "--replication-token", replToken, "--resolver", resolver.Addr()}
	args = append(args, t.shape.NodeArgs...)
	env := []string{nemesis.ClockEnv + "=" + n.clock, nemesis.SyncedEnv + "=" + n.synced}
	n.Node = t.C.StartNode(name, cluster.NodeOptions{Args: args, Env: env})
	_, port, err := net.SplitHostPort(n.Addr())
	if err != nil {
		t.tb.Fatal(err)
	}
	n.port = port
	n.admin = n.Admin()
	host := name + ".fenec.test"
	for _, r := range t.Routers {
		n.links[r.Name] = proxy.NewOn(t.tb, r.ip+":"+port, n.Direct())
		r.dns.Set(host, netip.MustParseAddr(r.ip))
		if (r.Near != "") != (reg != region) {
			t.far(n.links[r.Name])
		}
	}
	n.links[peersLink] = proxy.NewOn(t.tb, "127.0.0.2:"+port, n.Direct())
	t.peers.Set(host, netip.MustParseAddr("127.0.0.2"))
	if reg != region {
		t.far(n.links[peersLink])
		t.farDNS.Set(host, netip.MustParseAddr("127.0.0.2"))
		for _, m := range t.Nodes {
			m.links[name] = proxy.NewOn(t.tb, "127.0.0.3:"+m.port, m.Direct())
			t.farDNS.Set(m.Name+".fenec.test", netip.MustParseAddr("127.0.0.3"))
			t.far(m.links[name])
		}
	}
	var id struct {
		ID string `json:"id"`
	}
	res := n.admin.Do("GET", "/_admin/node", nil)
	if res.Status != 200 || json.Unmarshal(res.Body, &id) != nil || id.ID == "" {
		t.tb.Fatalf("%s's id: %s", name, res)
	}
	n.ID = id.ID
	t.byID[id.ID] = name
	t.Nodes = append(t.Nodes, n)
	return n
}

// far delays p by farDelay and keeps it among the links between the
// regions.
func (t *Topo) far(p *proxy.Proxy) {
	p.SetDelay(farDelay)
	t.farLinks = append(t.farLinks, p)
}

// URL is the address node n is recorded at.
func (n *Node) URL() string { return "http://" + n.Name + ".fenec.test:" + n.port }

// recordNodes records every node at the global tier in eu. No node is
// named another's standby (a standby takes no move): --replicas places
// each tenant's copy.
func (t *Topo) recordNodes() {
	g := t.Routers[0].cl
	for _, n := range t.Nodes {
		res := g.Do("PUT", "/_shard/nodes/"+n.Name, map[string]any{"addr": n.URL(), "token": cluster.AdminToken, "region": n.Region})
		if res.Status != 201 {
			t.tb.Fatalf("record %s: %s", n.Name, res)
		}
	}
}

// Leader is the router taking changes for eu now: the leading router of
// the side that leases it.
func (t *Topo) Leader() *Router {
	if t.shape.Regions && t.regionLeases() {
		return t.Routers[2]
	}
	return t.Routers[0]
}

// regionLeases reads, at any router that answers, whether eu leases its
// own nodes.
func (t *Topo) regionLeases() bool {
	for _, r := range t.Routers {
		if r.down.Load() {
			continue
		}
		res := r.cl.Do("GET", "/_shard/regions", nil)
		if res.Status != 200 {
			continue
		}
		var regs []struct {
			Name, Leaser string
		}
		if json.Unmarshal(res.Body, &regs) != nil {
			continue
		}
		for _, reg := range regs {
			if reg.Name == region {
				return reg.Leaser == "region"
			}
		}
	}
	return false
}

// NodeName is the name of the node whose id is id ("?id" if none).
func (t *Topo) NodeName(id string) string {
	if n, ok := t.byID[id]; ok {
		return n
	}
	if id == "" {
		return ""
	}
	return "?" + id
}

// Node is the node called name.
func (t *Topo) Node(name string) *Node {
	for _, n := range t.Nodes {
		if n.Name == name {
			return n
		}
	}
	t.tb.Fatalf("no node %s", name)
	return nil
}

// Router is the router called name.
func (t *Topo) Router(name string) *Router {
	for _, r := range t.Routers {
		if r.Name == name {
			return r
		}
	}
	t.tb.Fatalf("no router %s", name)
	return nil
}

// leases is a router's GET /_shard/leases.
type leases struct {
	Leasing bool `json:"leasing"`
	Nodes   []struct {
		Node   string `json:"node"`
		Ran    bool   `json:"ran"`
		LeftMS int64  `json:"left_ms"`
	} `json:"nodes"`
}

// WaitLeased waits until the leader runs a lease on every node up.
func (t *Topo) WaitLeased(within time.Duration) {
	t.tb.Helper()
	cluster.Eventually(t.tb, within, func() error {
		var l leases
		res := t.Leader().cl.Do("GET", "/_shard/leases", nil)
		if res.Status != 200 || json.Unmarshal(res.Body, &l) != nil {
			return fmt.Errorf("leases: %s", res)
		}
		running := map[string]bool{}
		for _, n := range l.Nodes {
			running[n.Node] = n.Ran && n.LeftMS > 0
		}
		for _, n := range t.Nodes {
			if !n.down && !running[n.Name] {
				return fmt.Errorf("%s not leased yet: %s", n.Name, res.Body)
			}
		}
		return nil
	})
}

// Placement is a tenant's row of GET /_shard/tenants.
type Placement struct {
	Name       string   `json:"name"`
	Node       string   `json:"node"`
	State      string   `json:"state"`
	Replica    string   `json:"replica"`
	Behind     uint64   `json:"replica_behind"` // the seq the copy was recorded behind at
	ReadCopies []string `json:"read_copies"`
	Survive    string   `json:"survive"`
}

// Placements reads the tenants from the first router that answers,
// the leader first.
func (t *Topo) Placements(ctx context.Context) (map[string]Placement, error) {
	order := append([]*Router{t.Leader()}, t.Routers...)
	var last error
	for _, r := range order {
		if r.down.Load() {
			continue
		}
		res := r.cl.DoCtx(ctx, "GET", "/_shard/tenants", nil)
		var rows []Placement
		if res.Status != 200 || json.Unmarshal(res.Body, &rows) != nil {
			last = fmt.Errorf("tenants at %s: %s", r.Name, res)
			continue
		}
		out := map[string]Placement{}
		for _, p := range rows {
			out[p.Name] = p
		}
		return out, nil
	}
	return nil, last
}

// placeTenants places the tenants in turn on the nodes, makes their
// collections and rows, and waits until each copy holds them.
func (t *Topo) placeTenants() {
	g := t.Leader().cl
	home := t.HomeNodes()
	for i := range t.shape.Tenants {
		name := "t" + strconv.Itoa(i)
		n := home[i%len(home)]
		if res := g.Do("PUT", "/_shard/tenants/"+name, map[string]any{"node": n.Name}); res.Status != 201 {
			t.tb.Fatalf("place %s: %s", name, res)
		}
		for _, q := range []string{
			"create collection reg (k text @unique, v int)",
			"create collection log (l text @hash, e int)",
			"create collection cnt (k text @unique, v int)",
			"put reg {k: 'r', v: 0}",
			"put cnt {k: 'c', v: 0}",
		} {
			g.MustQuery(name, q)
		}
		if t.shape.Ballast > 0 {
			t.ballast(g, name)
		}
		t.tenants = append(t.tenants, name)
		if t.shape.Far != "" {
			t.placeFar(g, i, name)
		}
	}
	cluster.Eventually(t.tb, 2*time.Minute, func() error {
		ps, err := t.Placements(context.Background())
		if err != nil {
			return err
		}
		for _, name := range t.tenants {
			p := ps[name]
			if p.Replica == "" {
				return fmt.Errorf("%s has no copy yet: %+v", name, p)
			}
			if err := t.caughtUp(name, p.Node, p.Replica); err != nil {
				return err
			}
		}
		return nil
	})
}

// HomeNodes are eu's nodes.
func (t *Topo) HomeNodes() []*Node {
	var out []*Node
	for _, n := range t.Nodes {
		if n.Region == region {
			out = append(out, n)
		}
	}
	return out
}

// FarNode is the far region's node (nil without Shape.Far).
func (t *Topo) FarNode() *Node {
	for _, n := range t.Nodes {
		if n.Region != region {
			return n
		}
	}
	return nil
}

// NearRouter is the router near the far region's readers (nil without
// Shape.Far).
func (t *Topo) NearRouter() *Router {
	for _, r := range t.Routers {
		if r.Near != "" {
			return r
		}
	}
	return nil
}

// placeFar sets the i-th tenant, name, to survive its region (every
// third) or gives it a read copy on the far node (the others), and
// records its read copies in the history.
func (t *Topo) placeFar(g *cluster.Client, i int, name string) {
	far := t.FarNode().Name
	if i%3 == 2 {
		if res := g.Do("PUT", "/_shard/tenants/"+name+"/survive", map[string]any{"survive": "region"}); res.Status != 200 {
			t.tb.Fatalf("%s to survive its region: %s", name, res)
		}
		return
	}
	if res := g.Do("PUT", "/_shard/tenants/"+name+"/read-copies", map[string]any{"nodes": []string{far}}); res.Status != 200 {
		t.tb.Fatalf("a read copy of %s on %s: %s", name, far, res)
	}
	t.h.mu.Lock()
	t.h.ReadCopies[name] = []string{far}
	t.h.mu.Unlock()
}

// ballast writes Ballast bytes of rows into a collection of their own.
func (t *Topo) ballast(g *cluster.Client, tenant string) {
	g.MustQuery(tenant, "create collection ballast (b text)")
	row := strings.Repeat("x", 1000)
	for left := t.shape.Ballast; left > 0; left -= 100 * len(row) {
		rows := make([]map[string]any, 100)
		for i := range rows {
			rows[i] = map[string]any{"b": row}
		}
		if res := g.Do("POST", "/t/"+tenant+"/ballast", rows); res.Status != 201 {
			t.tb.Fatalf("ballast of %s: %s", tenant, res)
		}
	}
}

// replication is a node's replication status of a tenant.
type replication struct {
	Role    string `json:"role"`
	Seq     uint64 `json:"seq"`
	History uint64 `json:"history"`
}

func (t *Topo) replication(n *Node, tenant string) (replication, error) {
	var st replication
	res := n.admin.Do("GET", "/_admin/tenants/"+tenant+"/replication", nil)
	if res.Status != 200 {
		return st, fmt.Errorf("%s on %s: %s", tenant, n.Name, res)
	}
	return st, json.Unmarshal(res.Body, &st)
}

// caughtUp says whether tenant's copy on replica holds what its primary
// holds.
func (t *Topo) caughtUp(tenant, primary, replica string) error {
	p, err := t.replication(t.Node(primary), tenant)
	if err != nil {
		return err
	}
	c, err := t.replication(t.Node(replica), tenant)
	if err != nil {
		return err
	}
	if c.Role != "replica" || c.Seq != p.Seq || c.History != p.History {
		return fmt.Errorf("copy of %s on %s: %+v, primary on %s %+v", tenant, replica, c, primary, p)
	}
	return nil
}

// Tenants are the tenants' names.
func (t *Topo) Tenants() []string { return slices.Clone(t.tenants) }

// hostPort is the host:port of an http URL.
func hostPort(url string) string {
	return strings.TrimPrefix(strings.TrimPrefix(url, "http://"), "https://")
}

// Settle waits, after the heal, until the deployment is whole again: the
// leader leases every node, and (with Regions) eu's handoff has ended
// with every node bound to the directory its record names. One that does
// not settle within is an anomaly.
func (t *Topo) Settle(within time.Duration) {
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		if last = t.settled(); last == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.anomaly("settle", "deployment", fmt.Sprintf("not whole %v after the heal: %v", within, last), "")
}

func (t *Topo) settled() error {
	var l leases
	res := t.Leader().cl.Do("GET", "/_shard/leases", nil)
	if res.Status != 200 || json.Unmarshal(res.Body, &l) != nil {
		return fmt.Errorf("leases at %s: %s", t.Leader().Name, res)
	}
	running := map[string]bool{}
	for _, n := range l.Nodes {
		running[n.Node] = n.Ran && n.LeftMS > 0
	}
	for _, n := range t.Nodes {
		if !running[n.Name] {
			return fmt.Errorf("%s leases no %s: %s", t.Leader().Name, n.Name, res.Body)
		}
	}
	if t.shape.Regions {
		return t.regionSettled()
	}
	return nil
}

// moveStep is where tenant's move from one node to another stands, as
// the directory and the two nodes' tenant lists show it just before a
// kill: "not begun" (placed on from, not moving), "copying" (moving, the
// target holding no file yet), "installed" (moving, the target holding
// it), "flipped" (placed on to, the source still holding its file),
// "done" (the source's file deleted), or "rolled back".
func (t *Topo) moveStep(tenant, from, to string) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ps, err := t.Placements(ctx)
	if err != nil {
		return "unknown"
	}
	p := ps[tenant]
	holds := func(node string) bool {
		res := t.Node(node).admin.Do("GET", "/_admin/tenants", nil)
		var names []string
		return res.Status == 200 && json.Unmarshal(res.Body, &names) == nil && slices.Contains(names, tenant)
	}
	switch {
	case p.Node == from && p.State == "active":
		return "not begun"
	case p.Node == from && holds(to):
		return "installed"
	case p.Node == from:
		return "copying"
	case p.Node == to && holds(from):
		return "flipped"
	case p.Node == to:
		return "done"
	}
	return "rolled back"
}
