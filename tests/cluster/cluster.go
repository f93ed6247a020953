package cluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/tests/proxy"
	"github.com/fenec-go/fenec/wire"
)

// Default tokens of a test cluster.
const (
	RouterToken = "e2e-router-token"
	AdminToken  = "e2e-admin-token"
)

// ReadyWait bounds how long a started process may take to answer its
// health check: a bound on a hang, not a measure of speed.
const ReadyWait = 60 * time.Second

// Cluster is one test's processes: routers and nodes on loopback, all
// stopped at cleanup.
type Cluster struct {
	tb  testing.TB
	dir string // logs and data of every process
	tls *PKI   // nil: plain HTTP everywhere (UseTLS)
}

// New makes an empty cluster whose files live in a temp dir of tb.
func New(tb testing.TB) *Cluster {
	tb.Helper()
	return &Cluster{tb: tb, dir: tb.TempDir()}
}

// Dir is the cluster's directory (logs, data).
func (c *Cluster) Dir() string { return c.dir }

// Node is a fenec-node process behind a cuttable proxy. Routers reach it
// through the proxy (Addr); tests may also reach it directly (Direct).
type Node struct {
	*Proc
	Name    string
	DataDir string
	port    int
	proxy   *proxy.Proxy
	c       *Cluster
}

// NodeOptions adjusts a node.
type NodeOptions struct {
	// Args are extra flags (e.g. "--sync", "always").
	Args []string
	// NoFile, if set, is the node's descriptor limit, soft and hard (run
	// under prlimit(1), which sets it and execs the node: the process is
	// the node's own).
	NoFile int
	// Env is added to the node's environment ("KEY=value" each), at
	// every start.
	Env []string
}

// StartNode starts fenec-node NAME with --admin-token AdminToken on a free
// port, behind a proxy, and waits for its health check.
func (c *Cluster) StartNode(name string, o NodeOptions) *Node {
	c.tb.Helper()
	port := FreePorts(c.tb, 1)[0]
	n := &Node{Name: name, DataDir: c.dir + "/" + name, port: port, c: c}
	n.proxy = proxy.New(c.tb, n.Direct())
	args := append([]string{
		"--dir", n.DataDir,
		"--http", n.Direct(),
	}, c.tokenArgs("admin-token", AdminToken)...)
	args = append(args, c.nodeTLSArgs(name)...)
	args = append(args, o.Args...)
	bin := Bins().Node
	if o.NoFile > 0 {
		args = append([]string{fmt.Sprintf("--nofile=%d:%d", o.NoFile, o.NoFile), "--", bin}, args...)
		bin = "prlimit"
	}
	n.Proc = StartProcEnv(c.tb, c.dir, name, bin, o.Env, args...)
	c.waitHealthy(n.Proc, n.DirectURL()+"/_health")
	return n
}

// Direct is the node's own host:port, bypassing its proxy.
func (n *Node) Direct() string { return "127.0.0.1:" + strconv.Itoa(n.port) }

// Addr is the proxy's host:port: the address routers are given.
func (n *Node) Addr() string { return n.proxy.Addr() }

// URL is the node's URL through its proxy.
func (n *Node) URL() string { return n.c.scheme() + n.Addr() }

// DirectURL is the node's own URL, bypassing its proxy.
func (n *Node) DirectURL() string { return n.c.scheme() + n.Direct() }

// Cut stops every byte between the node and everyone going through its
// proxy, closing nothing.
func (n *Node) Cut() { n.proxy.Cut() }

// Heal ends a Cut.
func (n *Node) Heal() { n.proxy.Heal() }

// SetDelay delays every byte to and from the node through its proxy by d
// (0: none): a node across a wide-area link.
func (n *Node) SetDelay(d time.Duration) { n.proxy.SetDelay(d) }

// ResetConns closes every connection through the proxy with a reset.
func (n *Node) ResetConns() { n.proxy.Reset() }

// Restart starts the node again on the same port and data and waits for it.
func (n *Node) Restart() {
	n.tb.Helper()
	n.Proc.Restart()
	n.c.waitHealthy(n.Proc, n.DirectURL()+"/_health")
}

// Admin is a client of the node's /_admin/ (directly, not via the proxy).
func (n *Node) Admin() *Client { return n.c.NewClient(n.DirectURL(), AdminToken) }

// AdminAPI is the node's admin API's typed client (directly, not via the
// proxy), its connections closed at cleanup.
func (n *Node) AdminAPI() *wire.AdminClient {
	hc := &http.Client{Transport: n.c.transport(4)}
	n.tb.Cleanup(hc.CloseIdleConnections)
	return &wire.AdminClient{Base: n.DirectURL(), Token: AdminToken, HTTP: hc}
}

// Router is a fenec-shard process with its own embedded etcd member.
type Router struct {
	*Proc
	Name    string
	DataDir string
	port    int
	etcdURL string // the embedded member's client URL ("" with Directory)
	c       *Cluster
}

// RouterOptions adjusts a router.
type RouterOptions struct {
	// Args are extra flags (e.g. "--upstream-timeout", "5").
	Args []string
	// Directory, if set, is another router's EtcdURL: this router embeds
	// no member and uses that one's directory (--directory).
	Directory string
	// Member, if set, is this router's member of an etcd cluster of
	// several routers' embedded members (MemberPorts), instead of a
	// cluster of its own.
	Member *Member
	// NoSecrets starts the router without the cluster's Secrets: as
	// `fenec-shard --etcd-dir` runs, making its own in its data dir.
	NoSecrets bool
	// NoWait returns at once, the health check not waited for (a member
	// of a cluster not yet founded answers only once the others start):
	// call WaitHealthy.
	NoWait bool
	// Env is added to the router's environment ("KEY=value" each), at
	// every start.
	Env []string
	// Tags, if set, runs a fenec-shard built with these build tags
	// (ShardTagged) rather than the one Main built: "nemesis" for the
	// tests' hooks.
	Tags string
}

// Member is one router's place in an etcd cluster of embedded members.
type Member struct {
	Listen, Client, Peer int    // the router's, its member's client and peer ports
	InitialCluster       string // every founding member, name=peerURL,...
}

// Members picks ports for an etcd cluster of the named routers' embedded
// members, founded together.
func Members(tb testing.TB, names ...string) map[string]*Member {
	tb.Helper()
	ports := FreePorts(tb, 3*len(names))
	out := map[string]*Member{}
	var initial []string
	for i, name := range names {
		m := &Member{Listen: ports[3*i], Client: ports[3*i+1], Peer: ports[3*i+2]}
		out[name] = m
		initial = append(initial, name+"=http://127.0.0.1:"+strconv.Itoa(m.Peer))
	}
	for _, m := range out {
		m.InitialCluster = strings.Join(initial, ",")
	}
	return out
}

// StartRouter starts fenec-shard NAME with --token RouterToken and an
// embedded etcd member in a temp dir, on free ports, and waits for its
// health check.
func (c *Cluster) StartRouter(name string, o RouterOptions) *Router {
	c.tb.Helper()
	for attempt := 1; ; attempt++ {
		r := c.startRouter(name, o)
		if o.NoWait {
			return r
		}
		if o.Member == nil && attempt < bindRetries && c.exitedOnBind(r.Proc, r.URL()+"/_health") {
			c.tb.Logf("router %s: a port it was given was taken before it bound it; starting it again on others", name)
			_ = os.RemoveAll(r.DataDir)
			continue
		}
		r.WaitHealthy()
		return r
	}
}

// bindRetries bounds the starts of a router on fresh ports when one it was
// given was taken before it bound it: FreePorts lets its ports go, and
// any outgoing connection on the machine may take one meanwhile.
const bindRetries = 3

// exitedOnBind waits, at most ReadyWait, for p to answer 200 at url or to
// exit, and reports whether it exited because an address was in use.
func (c *Cluster) exitedOnBind(p *Proc, url string) bool {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: c.transport(1)}
	defer hc.CloseIdleConnections()
	for deadline := time.Now().Add(ReadyWait); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case <-p.Exited():
			log := p.Log()
			if i := strings.LastIndex(log, "=== start"); i >= 0 {
				log = log[i:] // this start's lines, not an earlier one's
			}
			return strings.Contains(log, "address already in use")
		default:
		}
		if res, err := hc.Get(url); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return false
			}
		}
	}
	return false
}

// startRouter starts a router on ports picked now (or its member's).
func (c *Cluster) startRouter(name string, o RouterOptions) *Router {
	c.tb.Helper()
	ports := FreePorts(c.tb, 3)
	if o.Member != nil {
		ports = []int{o.Member.Listen, o.Member.Client, o.Member.Peer}
	}
	r := &Router{Name: name, DataDir: c.dir + "/" + name, port: ports[0], c: c}
	args := append([]string{"--listen", r.Addr(), "--id", name}, c.tokenArgs("token", RouterToken)...)
	if o.Directory != "" {
		args = append(args, "--directory", o.Directory)
	} else {
		r.etcdURL = c.scheme() + "127.0.0.1:" + strconv.Itoa(ports[1])
		args = append(args,
			"--etcd-dir", r.DataDir,
			"--etcd-name", name,
			"--etcd-client-url", r.etcdURL,
			"--etcd-peer-url", c.scheme()+"127.0.0.1:"+strconv.Itoa(ports[2]))
		if o.Member != nil {
			args = append(args, "--etcd-initial-cluster", o.Member.InitialCluster)
		}
	}
	args = append(args, c.routerTLSArgs(name)...)
	if !o.NoSecrets {
		args = append(args, c.secretArgs()...)
	}
	args = append(args, o.Args...)
	bin := Bins().Shard
	if o.Tags != "" {
		bin = ShardTagged(c.tb, o.Tags)
	}
	r.Proc = StartProcEnv(c.tb, c.dir, name, bin, o.Env, args...)
	return r
}

// WaitHealthy waits for the router's health check.
func (r *Router) WaitHealthy() {
	r.tb.Helper()
	r.c.waitHealthy(r.Proc, r.URL()+"/_health")
}

// Addr is the router's host:port.
func (r *Router) Addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

// EtcdURL is the client URL of the router's embedded etcd member, for
// other routers' RouterOptions.Directory.
func (r *Router) EtcdURL() string { return r.etcdURL }

// URL is the router's base URL.
func (r *Router) URL() string { return r.c.scheme() + r.Addr() }

// Client is a client of the router holding its token.
func (r *Router) Client() *Client { return r.c.NewClient(r.URL(), RouterToken) }

// Restart starts the router again on the same ports and data and waits
// for it.
func (r *Router) Restart() {
	r.tb.Helper()
	r.Proc.Restart()
	r.c.waitHealthy(r.Proc, r.URL()+"/_health")
}

// Register records n with r (PUT /_shard/nodes/<name>) in region "local",
// giving the node's proxy address.
func (r *Router) Register(n *Node) {
	r.tb.Helper()
	res := r.Client().Do("PUT", "/_shard/nodes/"+n.Name, map[string]any{
		"addr": n.URL(), "token": AdminToken, "region": "local",
	})
	if res.Status != http.StatusCreated {
		r.tb.Fatalf("register node %s: %d %s", n.Name, res.Status, res.Body)
	}
}

// Place creates tenant on node (PUT /_shard/tenants/<t>); the router
// answers once its own view holds the placement.
func (r *Router) Place(tenant string, n *Node) {
	r.tb.Helper()
	res := r.Client().Do("PUT", "/_shard/tenants/"+tenant, map[string]any{"node": n.Name})
	if res.Status != http.StatusCreated {
		r.tb.Fatalf("place tenant %s on %s: %d %s", tenant, n.Name, res.Status, res.Body)
	}
}

// WaitHealthy polls url until it answers 200, failing the test if p exits
// first or ReadyWait passes.
func WaitHealthy(tb testing.TB, p *Proc, url string) {
	tb.Helper()
	waitHealthy(tb, p, url, &http.Client{Timeout: 2 * time.Second})
}

func waitHealthy(tb testing.TB, p *Proc, url string, hc *http.Client) {
	tb.Helper()
	defer hc.CloseIdleConnections()
	Eventually(tb, ReadyWait, func() error {
		select {
		case <-p.Exited():
			return fmt.Errorf("%s: %w: %v", p.Name(), ErrExited, p.exitErr())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		res, err := hc.Do(req)
		if err != nil {
			return fmt.Errorf("%s: %w: %v", p.Name(), ErrNotReady, err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %w: status %d", p.Name(), ErrNotReady, res.StatusCode)
		}
		return nil
	})
}

// FreePorts returns n distinct ports free on 127.0.0.1 right now: each is
// held open until all are picked, then let go for the process to take.
func FreePorts(tb testing.TB, n int) []int {
	tb.Helper()
	lns := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("free port: %v", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}
