package cluster

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/fenec-go/fenec/tests/dnsstub"
	"github.com/fenec-go/fenec/tests/proxy"
)

// ReplToken is the replication token of a Regions deployment's nodes.
const ReplToken = "e2e-repl-token"

// Regions is a two-tier deployment: the global tier (a leading router on
// the global directory, and a standby on it) and regions, each with a
// leading router linked to the global directory and a standby on the
// region's directory, and nodes of its own under --lease --sync always.
//
// Every node is recorded by name ("<node>.fenec.test:<port>"), and each
// side looks names up at a DNS server of its own: the region's routers and
// nodes reach a node through its usual proxy on 127.0.0.1, the global
// tier through a second proxy of the node's on 127.0.0.2, same port. And
// a region's routers reach the global directory through a proxy of their
// own. So the global tier can be cut off from one region — its routers'
// link to the global directory and the global tier's connections to the
// region's nodes — while the region goes on, and the link can be slowed
// to a wide-area round trip.
type Regions struct {
	tb     testing.TB
	C      *Cluster
	Global *Router // the global tier's leading router (its etcd is the global directory)
	// GlobalStandby is a standby router on the global directory.
	GlobalStandby *Router
	lease         string
	globalDNS     *dnsstub.Server
	Region        map[string]*Region
}

// Region is one region of a Regions deployment.
type Region struct {
	Name    string
	Leader  *Router // --region NAME --global (the link proxy)
	Standby *Router // the same, --standby on Leader's directory
	Witness *Router // with RegionsOptions.HA: the directory's third member, a standby too
	Nodes   []*Node
	dns     *dnsstub.Server
	link    *proxy.Proxy            // the region's routers → the global directory
	global  map[string]*proxy.Proxy // the global tier → each node
	ports   map[string]string       // each node's proxy port
}

// RegionsOptions shapes a Regions deployment.
type RegionsOptions struct {
	// Lease is every router's --auto-failover, in seconds ("1").
	Lease string
	// Regions names each region and how many nodes it has (two at
	// least: each node's tenants have their copy on the next).
	Regions map[string]int
	// RouterArgs are extra flags of every router.
	RouterArgs []string
	// HA gives each region's directory three members, one in each of its
	// routers (the leader, its standby and a third, Witness, a standby
	// too), so it outlives its leader: the standby can be promoted.
	// Without, the standby uses the leader's member.
	HA bool
}

// StartRegions starts the deployment: the global tier, each region's
// routers and nodes, the nodes recorded at the global tier in their
// region, each the standby of the one before it (the last of the first),
// and leased by the global tier.
func (c *Cluster) StartRegions(o RegionsOptions) *Regions {
	c.tb.Helper()
	rs := &Regions{tb: c.tb, C: c, lease: o.Lease, globalDNS: dnsstub.New(c.tb), Region: map[string]*Region{}}
	// --insecure: nodes are recorded by name at http:// (names the
	// test's DNS servers give loopback addresses, which a router cannot
	// know), which a router takes only so.
	routerArgs := append([]string{"--auto-failover", o.Lease, "--upstream-timeout", "5", "--insecure"}, o.RouterArgs...)
	rs.Global = c.StartRouter("global", RouterOptions{Args: append(append([]string{}, routerArgs...), "--resolver", rs.globalDNS.Addr())})
	rs.GlobalStandby = c.StartRouter("global-standby", RouterOptions{Directory: rs.Global.EtcdURL(),
		Args: append(append([]string{}, routerArgs...), "--standby", "--resolver", rs.globalDNS.Addr())})
	for name, nodes := range o.Regions {
		rs.Region[name] = rs.startRegion(name, nodes, routerArgs, o.HA)
	}
	return rs
}

// startRegion starts region name's DNS server, link, routers and nodes.
func (rs *Regions) startRegion(name string, nodes int, routerArgs []string, ha bool) *Region {
	c := rs.C
	r := &Region{Name: name, dns: dnsstub.New(c.tb), global: map[string]*proxy.Proxy{}, ports: map[string]string{}}
	r.link = proxy.New(c.tb, hostPort(rs.Global.EtcdURL()))
	args := append(append([]string{}, routerArgs...), "--region", name, "--global", "http://"+r.link.Addr(), "--resolver", r.dns.Addr())
	standbyArgs := append(append([]string{}, args...), "--standby")
	if ha {
		members := Members(c.tb, name, name+"-standby", name+"-witness")
		r.Leader = c.StartRouter(name, RouterOptions{Args: args, Member: members[name], NoWait: true})
		r.Standby = c.StartRouter(name+"-standby", RouterOptions{Args: standbyArgs, Member: members[name+"-standby"], NoWait: true})
		r.Witness = c.StartRouter(name+"-witness", RouterOptions{Args: standbyArgs, Member: members[name+"-witness"], NoWait: true})
		for _, rt := range []*Router{r.Leader, r.Standby, r.Witness} {
			rt.WaitHealthy()
		}
	} else {
		r.Leader = c.StartRouter(name, RouterOptions{Args: args})
		r.Standby = c.StartRouter(name+"-standby", RouterOptions{Directory: r.Leader.EtcdURL(), Args: standbyArgs})
	}
	for i := range nodes {
		rs.startNode(r, name+strconv.Itoa(i+1))
	}
	for _, n := range r.Nodes {
		rs.recordNode(r, n)
	}
	for i, n := range r.Nodes {
		standby := r.Nodes[(i+1)%len(r.Nodes)]
		res := rs.Global.Client().Do("PUT", "/_shard/nodes/"+n.Name, map[string]any{"standby": standby.Name})
		if res.Status != http.StatusCreated {
			c.tb.Fatalf("name %s %s's standby: %s", standby.Name, n.Name, res)
		}
	}
	return r
}

// Connect has regions a and b reach each other's nodes: each one's
// routers and nodes look the other's nodes up at their usual proxies, as
// a copy of a tenant in the other region (a read copy, a survive-region
// copy) and a region's routers forwarding to it need.
func (rs *Regions) Connect(a, b string) {
	ra, rb := rs.Region[a], rs.Region[b]
	for _, p := range [][2]*Region{{ra, rb}, {rb, ra}} {
		for _, n := range p[1].Nodes {
			p[0].dns.Set(NodeHost(n), netip.MustParseAddr("127.0.0.1"))
		}
	}
}

// startNode starts node name of region r, reached by name through its
// proxies.
func (rs *Regions) startNode(r *Region, name string) *Node {
	c := rs.C
	nodeArgs := []string{"--lease", "--sync", "always", "--replication-token", ReplToken, "--resolver", r.dns.Addr()}
	n := c.StartNode(name, NodeOptions{Args: nodeArgs})
	_, port, err := net.SplitHostPort(n.Addr())
	if err != nil {
		c.tb.Fatal(err)
	}
	r.ports[n.Name] = port
	r.global[n.Name] = proxy.NewOn(c.tb, "127.0.0.2:"+port, n.Direct())
	r.dns.Set(NodeHost(n), netip.MustParseAddr("127.0.0.1"))
	rs.globalDNS.Set(NodeHost(n), netip.MustParseAddr("127.0.0.2"))
	r.Nodes = append(r.Nodes, n)
	return n
}

// recordNode records n in region r at the global tier.
func (rs *Regions) recordNode(r *Region, n *Node) {
	res := rs.Global.Client().Do("PUT", "/_shard/nodes/"+n.Name, map[string]any{
		"addr": r.NodeURL(n), "token": AdminToken, "region": r.Name,
	})
	if res.Status != http.StatusCreated {
		rs.tb.Fatalf("record %s: %s", n.Name, res)
	}
}

// AddNode starts node name in region, records it at the global tier,
// and names it no one's standby (so it can hold a read copy). Call it
// before Connect, so the regions connected reach it too.
func (rs *Regions) AddNode(region, name string) *Node {
	rs.tb.Helper()
	r := rs.Region[region]
	n := rs.startNode(r, name)
	rs.recordNode(r, n)
	return n
}

// NodeHost is the name node n is recorded by.
func NodeHost(n *Node) string { return n.Name + ".fenec.test" }

// NodeURL is the address node n is recorded at.
func (r *Region) NodeURL(n *Node) string { return "http://" + NodeHost(n) + ":" + r.ports[n.Name] }

// Node returns the region's node called name.
func (r *Region) Node(name string) *Node {
	for _, n := range r.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// CutFromGlobal cuts the global tier off from the region: the region's
// routers' link to the global directory, and the global tier's
// connections to the region's nodes. Nothing is closed; both sides go on
// running.
func (r *Region) CutFromGlobal() {
	r.link.Cut()
	for _, p := range r.global {
		p.Cut()
	}
}

// HealFromGlobal ends CutFromGlobal.
func (r *Region) HealFromGlobal() {
	r.link.Heal()
	for _, p := range r.global {
		p.Heal()
	}
}

// CutNode cuts node n off the network: from the region's routers and
// nodes, and from the global tier. Nothing is closed.
func (r *Region) CutNode(n *Node) {
	n.Cut()
	r.global[n.Name].Cut()
}

// HealNode ends CutNode.
func (r *Region) HealNode(n *Node) {
	n.Heal()
	r.global[n.Name].Heal()
}

// CutLink cuts the region's routers' link to the global directory alone
// (the global tier still reaches the region's nodes).
func (r *Region) CutLink() { r.link.Cut() }

// HealLink ends CutLink.
func (r *Region) HealLink() { r.link.Heal() }

// SlowLink adds d each way to the region's routers' link to the global
// directory (a round trip grows by 2d).
func (r *Region) SlowLink(d time.Duration) { r.link.SetDelay(d) }

// hostPort is the host:port of an http URL.
func hostPort(url string) string {
	for _, p := range []string{"http://", "https://"} {
		if len(url) > len(p) && url[:len(p)] == p {
			return url[len(p):]
		}
	}
	return url
}
