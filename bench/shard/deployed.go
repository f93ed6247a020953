package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fenec-go/fenec/bench/internal/benchkit"
)

// The deployed shape: fenec-node, fenec-shard and nginx each a process of
// its own, as built by `go build`, driven by wrk. Every compared target
// runs in turns within each round, the order rotated round to round, so a
// noisy moment falls on all of them alike.

// readPath is the keyed read measured: one row by its unique key.
const readPath = "/t/acme/kv?k=eq.1"

// wrkScripts: reads are wrk's fixed request (no Lua per request); writes
// insert a row with a key no other run used (base from the bench, then a
// range per wrk thread). Both print one line of figures when done.
// wrkDone is the done() every script ends with.
const wrkDone = benchkit.WrkDone

const wrkWrite = `
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
local base, n = 0, 0
function init(args)
  base = tonumber(args[1]) + (tid or 0) * 10000000
end
function request()
  n = n + 1
  return wrk.format(nil, nil, nil, '{"k":' .. string.format("%d", base + n) .. ',"v":"w"}')
end
` + wrkDone

// wtarget is one way to the node, with the processes that serve it.
type wtarget struct {
	name string
	base string
	pids []int // the serving processes (nginx: master and workers)
	ref  int   // the target its "+" columns are against: the node, plain or over TLS
}

// deployedRig is the running processes of the deployed shape.
type deployedRig struct {
	dir       string
	shardBin  string
	pprof     string // the router's profile listener
	router    *benchkit.Proc
	procs     []*benchkit.Proc
	targets   []wtarget
	nginxNote string
	tlsNote   string // what the TLS targets are ("" without them)
	wrk       string
	runs      int // wrk runs so far: each write run takes keys of its own
}

func (d *deployedRig) close() {
	for _, p := range slices.Backward(d.procs) {
		p.Stop()
	}
}

// startDeployed builds the binaries and starts a node, a router over an
// embedded etcd member and nginx (one worker, and auto) in front of the
// node, places tenant acme on the node and fills its collection kv.
func startDeployed(ctx context.Context, cfg config, dir string) (_ *deployedRig, err error) {
	wrkBin, err := exec.LookPath(cfg.wrk)
	if err != nil {
		return nil, errNoWrk
	}
	d := &deployedRig{dir: dir, wrk: wrkBin}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	nodeBin, shardBin, err := benchkit.BuildBinaries(ctx, filepath.Join(dir, "bin"))
	if err != nil {
		return nil, err
	}
	d.shardBin = shardBin
	n, nodeAddr, err := benchkit.StartNodeProc(nodeBin, filepath.Join(dir, "node"), "fenec-node", adminToken)
	if err != nil {
		return nil, err
	}
	d.procs = append(d.procs, n)
	if d.pprof, err = benchkit.FreeAddr(); err != nil {
		return nil, err
	}
	rp, err := benchkit.StartRouterProc(shardBin, dir, "bench", "--pprof", d.pprof)
	if err != nil {
		return nil, err
	}
	r, etcdClient := rp.P, rp.Etcd
	d.procs = append(d.procs, r)
	d.router = r
	if err := fillDeployed(rp.URL, nodeAddr); err != nil {
		return nil, err
	}
	d.targets = []wtarget{
		{name: "node", base: "http://" + nodeAddr, pids: []int{n.PID()}},
		{name: "fenec-shard", base: rp.URL, pids: []int{r.PID()}},
	}
	// More routers over the same directory (standbys: they forward as the
	// leader does), each run with a GOMAXPROCS of its own.
	for _, procs := range cfg.routerProcs {
		addr, err := benchkit.FreeAddr()
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("fenec-shard P=%d", procs)
		p, err := benchkit.StartProc(name, []string{fmt.Sprintf("GOMAXPROCS=%d", procs)}, shardBin, append([]string{"--listen", addr, "--id", fmt.Sprintf("bench-p%d", procs), "--standby", "--directory", etcdClient}, rp.Secrets...)...)
		if err != nil {
			return nil, err
		}
		d.procs = append(d.procs, p)
		if err := p.WaitHTTP("http://" + addr + "/_health"); err != nil {
			return nil, err
		}
		d.targets = append(d.targets, wtarget{name: name, base: "http://" + addr, pids: []int{p.PID()}})
	}
	// A router of another build (an earlier commit's, to weigh a change
	// in the same turns), a standby over the same directory.
	if cfg.compareRouter != "" {
		addr, err := benchkit.FreeAddr()
		if err != nil {
			return nil, err
		}
		// A build from before directories were closed knows no password
		// and cannot read this one.
		p, err := benchkit.StartProc("fenec-shard (compared build)", nil, cfg.compareRouter, append([]string{"--listen", addr, "--id", "bench-compared", "--standby", "--directory", etcdClient}, rp.Secrets...)...)
		if err != nil {
			return nil, err
		}
		d.procs = append(d.procs, p)
		if err := p.WaitHTTP("http://" + addr + "/_health"); err != nil {
			return nil, err
		}
		d.targets = append(d.targets, wtarget{name: "fenec-shard compared", base: "http://" + addr, pids: []int{p.PID()}})
	}
	d.nginxNote = "nginx: " + benchkit.NginxVersion(cfg.nginx) + " as a plain reverse proxy: upstream keepalive 32, HTTP/1.1 to the node, proxy_buffering off, access log off"
	for _, w := range []string{"1", "auto"} {
		if cfg.nginx == "none" {
			d.nginxNote = "nginx: not measured (-nginx none)"
			break
		}
		p, base, err := benchkit.StartNginx(cfg.nginx, filepath.Join(dir, "nginx-"+w), nodeAddr, w)
		if err != nil {
			return nil, err
		}
		d.procs = append(d.procs, p)
		name := "nginx 1 worker"
		if w == "auto" {
			name = fmt.Sprintf("nginx auto (%d)", len(childPIDs(p.PID())))
		}
		d.targets = append(d.targets, wtarget{name: name, base: base, pids: append([]int{p.PID()}, childPIDs(p.PID())...)})
	}
	if cfg.tls {
		if err := d.startTLS(nodeBin, shardBin, cfg.nginx); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// fillDeployed registers the node with the router, places acme there and
// fills its collection kv with keys 1..1000.
func fillDeployed(router, nodeAddr string) error {
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	return fillDeployedWith(c, router, "http://"+nodeAddr)
}

// fillDeployedWith is fillDeployed through c, the node at nodeURL.
func fillDeployedWith(c *http.Client, router, nodeURL string) error {
	if err := call(c, "PUT", router+"/_shard/nodes/n1", fmt.Sprintf(`{"addr":%q,"token":%q,"region":"bench"}`, nodeURL, adminToken), 201); err != nil {
		return err
	}
	if err := call(c, "PUT", router+"/_shard/tenants/acme", `{"node":"n1"}`, 201); err != nil {
		return err
	}
	if err := call(c, "POST", router+"/t/acme/query", `{"query":"create collection kv (k int @unique, v text)"}`, 200); err != nil {
		return err
	}
	var rows []string
	for i := 1; i <= 1000; i++ {
		rows = append(rows, fmt.Sprintf(`{"k":%d,"v":"value %d"}`, i, i))
	}
	return call(c, "POST", router+"/t/acme/kv", "["+strings.Join(rows, ",")+"]", 201)
}

// wrkResult is one wrk run's figures.
type wrkResult = benchkit.WrkResult

// wrkLoad is one load shape: a kind of request at a number of connections.
type wrkLoad struct {
	kind  string // "read" or "write"
	conns int
}

func (l wrkLoad) String() string {
	if l.kind == "read" {
		return fmt.Sprintf("read  GET %s", readPath)
	}
	return "write POST /t/acme/kv (new key)"
}

// runWrk runs wrk against t for dur and parses the figures its script
// prints; any failed request fails the run.
func (d *deployedRig) runWrk(ctx context.Context, t wtarget, l wrkLoad, dur time.Duration) (wrkResult, error) {
	d.runs++
	script := filepath.Join(d.dir, "read.lua")
	url := t.base + readPath
	if l.kind == "write" {
		script = filepath.Join(d.dir, "write.lua")
		url = t.base + "/t/acme/kv"
	}
	return benchkit.RunWrk(ctx, d.wrk, script, url, t.name, l.conns, dur, strconv.Itoa(d.runs*100_000_000))
}

// deployedTable measures every load on every target, rounds × targets in
// turns, and prints medians over the rounds: latencies, what each adds
// over the node (per round, then the median), throughput.
func deployedTable(ctx context.Context, w io.Writer, cfg config, d *deployedRig) error {
	if err := os.WriteFile(filepath.Join(d.dir, "read.lua"), []byte(wrkDone), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(d.dir, "write.lua"), []byte(wrkWrite), 0o644); err != nil {
		return err
	}
	loads := []wrkLoad{{"read", 1}, {"read", 16}, {"write", 1}, {"write", 16}}
	res := make([][][]wrkResult, len(loads)) // load, target, round
	for li, l := range loads {
		res[li] = make([][]wrkResult, len(d.targets))
		for _, t := range d.targets { // warm-up: connections, caches, the JIT of the Lua
			if _, err := d.runWrk(ctx, t, l, time.Second); err != nil {
				return err
			}
		}
	}
	load0 := benchkit.LoadAvg()
	for round := range cfg.rounds {
		for li, l := range loads {
			for k := range d.targets {
				ti := (k + round) % len(d.targets)
				r, err := d.runWrk(ctx, d.targets[ti], l, cfg.dur)
				if err != nil {
					return err
				}
				res[li][ti] = append(res[li][ti], r)
			}
		}
		fmt.Fprintf(os.Stderr, "shard bench: deployed round %d of %d done, load %s\n", round+1, cfg.rounds, benchkit.LoadAvg())
	}
	load1 := benchkit.LoadAvg()
	fmt.Fprintf(w, "Deployed: fenec-node, fenec-shard (embedded etcd) and nginx each a process of its own, built by go build;\n")
	fmt.Fprintf(w, "wrk %s, one thread, keep-alive; %d rounds of %s per target and load, targets in turns (order rotated each round);\n", wrkVersion(d.wrk), cfg.rounds, cfg.dur)
	fmt.Fprintf(w, "medians over the rounds; \"+\" is the median of each round's difference to the node; load average %s at the start, %s at the end\n", load0, load1)
	fmt.Fprintln(w, d.nginxNote)
	if d.tlsNote != "" {
		fmt.Fprintln(w, d.tlsNote)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "request\tconns\tvia\tp50 µs\tp99 µs\t+p50 µs\t+p99 µs\treq/s\treq/s ×node\t")
	plus := func(li, ti int) float64 {
		node, rs := res[li][d.targets[ti].ref], res[li][ti]
		var dp50 []float64
		for i, r := range rs {
			dp50 = append(dp50, r.P50-node[i].P50)
		}
		return benchkit.Median(dp50)
	}
	for li, l := range loads {
		for ti, t := range d.targets {
			node := res[li][t.ref]
			rs := res[li][ti]
			var dp50, dp99, ratio []float64
			for i, r := range rs {
				dp50 = append(dp50, r.P50-node[i].P50)
				dp99 = append(dp99, r.P99-node[i].P99)
				ratio = append(ratio, r.RPS/node[i].RPS)
			}
			plus50, plus99 := fmt.Sprintf("%+.0f", benchkit.Median(dp50)), fmt.Sprintf("%+.0f", benchkit.Median(dp99))
			if ti == t.ref {
				plus50, plus99 = "", ""
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%.0f\t%.0f\t%s\t%s\t%.0f\t%.2f\t\n", l, l.conns, t.name,
				benchkit.Median(field(rs, func(r wrkResult) float64 { return r.P50 })),
				benchkit.Median(field(rs, func(r wrkResult) float64 { return r.P99 })),
				plus50, plus99,
				benchkit.Median(field(rs, func(r wrkResult) float64 { return r.RPS })), benchkit.Median(ratio))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := tailTable(w, d, loads, res); err != nil {
		return err
	}
	tlsCompare(w, d, loads, plus)
	return nil
}

// tailPairs are the targets whose tails are set side by side, round by
// round: the router and the nginx it is compared with.
var tailPairs = [][2]string{{"fenec-shard", "nginx 1 worker"}, {"fenec-shard TLS", "nginx TLS 1 worker"}}

// tailTable says, for each load, whether the router's p99 is above
// nginx's: the ratio of the two p99s in each round (the two ran within
// seconds of each other, so a round's ratio is what the machine's noise
// leaves least of), how many rounds had the router's above, and the
// ratios' spread. A tail the router adds shows as above in every round;
// one run's p99, or a median, says nothing of that alone. With n rounds,
// the chance that noise alone puts one side above in all of them is
// 2^(1-n), under a tenth from 5 rounds on.
func tailTable(w io.Writer, d *deployedRig, loads []wrkLoad, res [][][]wrkResult) error {
	index := map[string]int{}
	for i, t := range d.targets {
		index[t.name] = i
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "The tail, round by round: the router's p99 over nginx's in each round (both ran within seconds of each other)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "request\tconns\trouter\tagainst\trounds above\tmin ×\tmedian ×\tmax ×\tsays\t")
	for li, l := range loads {
		for _, pair := range tailPairs {
			a, aok := index[pair[0]]
			b, bok := index[pair[1]]
			if !aok || !bok {
				continue
			}
			var ratios []float64
			above := 0
			for i := range min(len(res[li][a]), len(res[li][b])) {
				ra, rb := res[li][a][i].P99, res[li][b][i].P99
				if rb <= 0 {
					continue
				}
				ratios = append(ratios, ra/rb)
				if ra > rb {
					above++
				}
			}
			if len(ratios) == 0 {
				continue
			}
			says := "no order: noise"
			switch {
			case len(ratios) >= 5 && above == len(ratios):
				says = "router above"
			case len(ratios) >= 5 && above == 0:
				says = "router below"
			case len(ratios) < 5:
				says = "too few rounds"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d of %d\t%.2f\t%.2f\t%.2f\t%s\t\n", l, l.conns, pair[0], pair[1], above, len(ratios),
				slices.Min(ratios), benchkit.Median(ratios), slices.Max(ratios), says)
		}
	}
	return tw.Flush()
}

func field(rs []wrkResult, f func(wrkResult) float64) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	return out
}

func wrkVersion(bin string) string {
	out, _ := exec.Command(bin, "-v").CombinedOutput()
	line, _, _ := strings.Cut(string(out), "\n")
	if f := strings.Fields(line); len(f) >= 2 {
		return f[1]
	}
	return "?"
}

// deployed starts the deployed shape in dir, prints its two tables to w,
// and stops every process it started.
func deployed(ctx context.Context, w io.Writer, cfg config, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	d, err := startDeployed(ctx, cfg, dir)
	if err != nil {
		return err
	}
	defer d.close()
	if err := deployedTable(ctx, w, cfg, d); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return costTable(ctx, w, cfg, d)
}
