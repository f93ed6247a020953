// Command lease measures automatic failover under leases: a router
// leasing two --lease nodes (--sync always, n2 the standby of n1), ten
// tenants on n1 written through the router by keyed writers and straight
// to n1 by clients of its own, and n1 cut off from the router (a proxy in
// front of it stops passing bytes; its own clients still reach it). For
// each lease length and run it reports the time from the cut until n1
// refused its own clients' writes for every tenant, and until every
// tenant took a write through the router again on its copy; the requests
// the router cut out, by outcome; acknowledged writes lost (through the
// router; and n1's own clients', which n1 answers only once its copy
// holds them or the directory records the copy behind); and
// moments with two primaries (a write n1 acknowledged to its own client
// that began after the copy had acknowledged one). It prints a table and
// writes it to -out.
//
// Nodes and router each run as a process of their own (fenec-node,
// fenec-shard), built once at the start; the proxy is this process's.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fenec-go/fenec/bench/internal/benchkit"
)

const (
	adminToken = "bench-admin-token"
	replToken  = "bench-replication-token"
)

type config struct {
	leases  []time.Duration
	runs    int
	tenants int
	out     string
	// the binaries every run starts, built once
	nodeBin, shardBin string
}

func main() {
	var cfg config
	leases := flag.String("leases", "1,5", "lease lengths in seconds, comma-separated")
	flag.IntVar(&cfg.runs, "runs", 3, "runs per lease length")
	flag.IntVar(&cfg.tenants, "tenants", 10, "tenants on the node cut off")
	flag.StringVar(&cfg.out, "out", "bench/lease.txt", "file the table is written to")
	flag.Parse()
	for _, s := range strings.Split(*leases, ",") {
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || f <= 0 {
			fmt.Fprintf(os.Stderr, "lease bench: bad lease %q\n", s)
			os.Exit(2)
		}
		cfg.leases = append(cfg.leases, time.Duration(f*float64(time.Second)))
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "lease bench:", err)
		os.Exit(1)
	}
}

func run(cfg config) error {
	nodeBin, shardBin, remove, err := benchkit.BuildTemp("lease-bench")
	if err != nil {
		return err
	}
	defer remove()
	cfg.nodeBin, cfg.shardBin = nodeBin, shardBin
	var out bytes.Buffer
	fmt.Fprintf(&out, "fenec lease bench, %s, %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), benchkit.Machine())
	fmt.Fprintf(&out, "router leasing two --lease nodes (--sync always, n2 n1's standby), %d tenants on n1, each written through the router by a keyed writer and straight to n1 by a client of its own; n1 cut off from the router at 0\n", cfg.tenants)
	fmt.Fprintln(&out, "router and nodes each a process of their own (fenec-shard with its embedded etcd member, fenec-node), on loopback; the cut is a proxy's, in front of n1, in the bench's process")
	fmt.Fprintln(&out, "n1 lease lapsed: n1 (asked directly) held no lease, so its write gate refused every write; n1 refused own: every tenant's own client had a 503 from n1 (a write waiting for its copy ends when the lease lapses)")
	fmt.Fprintln(&out, "resumed: every tenant took a write through the router again (on n2); own 500 unknown: n1's own writes that landed under the lease and were answered after it lapsed")
	fmt.Fprintln(&out)
	tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "lease\trun\tn1 lease lapsed ms\tn1 refused own ms\tresumed ms\town 500 unknown\tcut: to new primary\tcut: 502\tacked lost (router)\tacked lost (n1's own, after cut)\t(before cut)\ttwo primaries\t")
	for _, l := range cfg.leases {
		for i := range cfg.runs {
			r, err := oneRun(cfg, l)
			if err != nil {
				return fmt.Errorf("lease %v run %d: %w", l, i+1, err)
			}
			fmt.Fprintf(tw, "%gs\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", l.Seconds(), i+1,
				r.lapsed.Milliseconds(), r.stopped.Milliseconds(), r.resumed.Milliseconds(), r.own500, r.cutResent, r.cut502,
				r.lostRouter, r.lostOwn, r.lostOwnBefore, r.twoPrimaries)
			fmt.Fprintf(os.Stderr, "lease %v run %d done\n", l, i+1)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(&out)
	fmt.Fprintln(&out, "cut: requests the router had out to n1 that it ended at the failover: sent on to the new primary, or answered 502 (a write that may have run)")
	fmt.Fprintln(&out, "acked lost (n1's own, after cut): writes n1 acknowledged to its own clients after the cut, under its lease, that its copy never received (the replication stream was cut too): n1 holds each until its copy has it or the router records the copy behind, neither of which can happen here, so it answers them 500 unknown once its lease lapses")
	fmt.Fprintln(&out, "(before cut): the same for writes begun before the cut")
	return benchkit.Emit(cfg.out, out.Bytes())
}

// result is one run's measurements.
type result struct {
	lapsed              time.Duration
	stopped, resumed    time.Duration
	own500              int
	cutResent, cut502   int
	lostRouter, lostOwn int
	lostOwnBefore       int
	twoPrimaries        int
}

// cluster is one run's node and router processes and the proxy.
type cluster struct {
	dir    string
	n1, n2 *benchkit.Proc
	n1Addr string // n1's own address, not the proxy's
	n2Addr string
	proxy  *proxy
	rt     *benchkit.Proc
	url    string
	c      *http.Client
}

func (cl *cluster) close() {
	if cl.rt != nil {
		cl.rt.Stop()
	}
	if cl.proxy != nil {
		cl.proxy.close()
	}
	for _, n := range []*benchkit.Proc{cl.n1, cl.n2} {
		if n != nil {
			n.Stop()
		}
	}
	cl.c.CloseIdleConnections()
	os.RemoveAll(cl.dir)
}

func startCluster(cfg config, l time.Duration) (*cluster, error) {
	dir, err := os.MkdirTemp("", "fenec-lease-bench-")
	if err != nil {
		return nil, err
	}
	cl := &cluster{dir: dir, c: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	if cl.n1, cl.n1Addr, err = startNode(cfg, filepath.Join(dir, "n1")); err != nil {
		return cl, err
	}
	if cl.n2, cl.n2Addr, err = startNode(cfg, filepath.Join(dir, "n2")); err != nil {
		return cl, err
	}
	if cl.proxy, err = newProxy(cl.n1Addr); err != nil {
		return cl, err
	}
	rp, err := benchkit.StartRouterProc(cfg.shardBin, filepath.Join(dir, "shard"), "bench-lease",
		"--auto-failover", strconv.FormatFloat(l.Seconds(), 'g', -1, 64))
	if err != nil {
		return cl, err
	}
	cl.rt, cl.url = rp.P, rp.URL
	for name, addr := range map[string]string{"n1": cl.proxy.addr(), "n2": cl.n2Addr} {
		body := fmt.Sprintf(`{"addr":"http://%s","token":%q,"region":"bench"}`, addr, adminToken)
		if _, err := cl.call("PUT", "/_shard/nodes/"+name, body, 201); err != nil {
			return cl, err
		}
	}
	if _, err := cl.call("PUT", "/_shard/nodes/n1", `{"standby":"n2"}`, 201); err != nil {
		return cl, err
	}
	if err := cl.waitLeased("n1", "n2"); err != nil {
		return cl, err
	}
	for i := range cfg.tenants {
		t := tenantName(i)
		if _, err := cl.call("PUT", "/_shard/tenants/"+t, `{"node":"n1"}`, 201); err != nil {
			return cl, err
		}
		if _, err := cl.call("POST", "/t/"+t+"/query", `{"query":"create collection c (n int, who text)"}`, 200); err != nil {
			return cl, err
		}
	}
	return cl, nil
}

func tenantName(i int) string { return "t" + strconv.Itoa(i) }

// startNode starts a --lease, --sync always node process over dir and
// returns it with its address.
func startNode(cfg config, dir string) (*benchkit.Proc, string, error) {
	return benchkit.StartNodeProc(cfg.nodeBin, dir, "fenec-node "+filepath.Base(dir), adminToken,
		"--replication-token", replToken, "--lease", "--sync", "always")
}

// call sends one request to the router and wants the status.
func (cl *cluster) call(method, path, body string, want int) ([]byte, error) {
	return benchkit.Call(cl.c, method, cl.url+path, "", body, want)
}

// waitLeased waits until every named node runs a lease from the router.
func (cl *cluster) waitLeased(nodes ...string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		b, err := cl.call("GET", "/_shard/leases", "", 200)
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
		ok := 0
		for _, n := range a.Nodes {
			if slices.Contains(nodes, n.Node) && n.Ran && n.LeftMS > 0 {
				ok++
			}
		}
		if ok == len(nodes) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("nodes %v not leased", nodes)
}

// cutCounts reads fenec_router_cut_requests_total by outcome.
func (cl *cluster) cutCounts() (map[string]int, error) {
	b, err := cl.call("GET", "/_metrics", "", 200)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, `fenec_router_cut_requests_total{outcome="`)
		if !ok {
			continue
		}
		label, val, ok := strings.Cut(rest, `"} `)
		if !ok {
			continue
		}
		f, _ := strconv.ParseFloat(val, 64)
		out[label] = int(f)
	}
	return out, sc.Err()
}

// placedOn says where the router places tenant t.
func (cl *cluster) placedOn(t string) string {
	b, err := cl.call("GET", "/_shard/tenants", "", 200)
	if err != nil {
		return ""
	}
	var rows []struct{ Name, Node string }
	_ = json.Unmarshal(b, &rows)
	for _, r := range rows {
		if r.Name == t {
			return r.Node
		}
	}
	return ""
}
