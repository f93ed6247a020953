// Command shard measures what the router costs, in three tables written to
// -out:
//
//   - as deployed: fenec-node, fenec-shard and nginx (one worker, and one
//     per core) each a process of its own, driven by wrk at 1 and 16
//     connections, keyed reads and writes, several rounds with the targets
//     in turns; latencies added over going straight to the node, and
//     throughput (deployed.go);
//   - what a request costs each of those processes: system calls, context
//     switches, and the router's allocations, counted by the kernel, with
//     the router's CPU profile written to -profile-out (profile.go);
//   - in process: node, router and a net/http client in this process, one
//     keep-alive client, nginx a child process (the earlier shape, kept
//     for comparison with older figures);
//
// then the time to move a tenant of 100 000 vectors of 128 dimensions with
// an HNSW index between two nodes, and its first `near` on the target: as
// deployed (two fenec-node processes and a fenec-shard process; three
// moves, the first onto a node that never held the tenant,
// movedeployed.go), then with both nodes and the router in this process
// (with the move's CPU profile). Run it from the repository's root (it
// builds the binaries).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/fenec-go/fenec/bench/internal/benchkit"
	"github.com/fenec-go/fenec/node"
	"github.com/fenec-go/fenec/region"
)

const adminToken = "bench-admin-token"

type config struct {
	warmup, requests int
	moveDocs, dims   int
	out              string
	nginx            string
	tls              bool
	only             map[string]bool // parts run (nil: all)
	moveImage        string          // the moved tenant's image, kept between runs
	logFile          string          // the in-process nodes' and router's log
	moveProfileOut   string          // the CPU profile of this process over the move
	moveFaultsOut    string          // where a fresh node's page faults during a move are taken

	wrk           string        // wrk binary ("none": no deployed tables)
	rounds        int           // rounds of the deployed table
	dur           time.Duration // one wrk run
	profileOut    string        // the router's CPU profile, as text
	routerProcs   []int         // more routers, each with this GOMAXPROCS
	compareRouter string        // a fenec-shard binary of another build, measured beside this one's
}

func main() {
	var cfg config
	flag.IntVar(&cfg.warmup, "warmup", 500, "requests of warm-up per target and kind")
	flag.IntVar(&cfg.requests, "n", 5000, "measured requests per target and kind")
	flag.IntVar(&cfg.moveDocs, "move-docs", 100_000, "vectors in the moved tenant (0: no move)")
	flag.IntVar(&cfg.dims, "dims", 128, "dimensions of the moved tenant's vectors")
	flag.StringVar(&cfg.out, "out", "bench/shard.txt", "file the table is written to")
	flag.StringVar(&cfg.nginx, "nginx", "nginx", "nginx binary (none: skip nginx)")
	flag.BoolVar(&cfg.tls, "tls", true, "also measure every link under TLS (deployed), and a fresh connection's handshake (in process)")
	flag.StringVar(&cfg.wrk, "wrk", "wrk", "wrk binary (none: skip the deployed tables)")
	flag.IntVar(&cfg.rounds, "rounds", 5, "rounds of the deployed table, every target once a round")
	flag.DurationVar(&cfg.dur, "dur", 3*time.Second, "one wrk run (whole seconds)")
	flag.StringVar(&cfg.profileOut, "profile-out", "bench/shard-profile.txt", "file the router's CPU profile is written to (empty: none)")
	flag.StringVar(&cfg.moveFaultsOut, "move-faults-out", "bench/shard-move-faults.txt", "file perf's report of where a fresh node's page faults are taken as it takes the moved tenant, as deployed, is written to (empty, or perf missing: none)")
	flag.StringVar(&cfg.moveProfileOut, "move-profile-out", "bench/shard-move-profile.txt", "file the CPU profile of the move (both nodes and the router, in this process) is written to (empty: none)")
	flag.StringVar(&cfg.logFile, "log", "", "file the in-process nodes and router log to (default: none)")
	flag.StringVar(&cfg.moveImage, "move-image", "", "file the moved tenant's image is kept in: read from it when it exists (no loading), else written once loaded (empty: a file of this run's, so the tenant is loaded once for both moves)")
	flag.Func("only", "comma-separated parts to run: deployed, inprocess, move (default: all)", func(v string) error {
		cfg.only = map[string]bool{}
		for _, f := range strings.Split(v, ",") {
			switch f = strings.TrimSpace(f); f {
			case "deployed", "inprocess", "move":
				cfg.only[f] = true
			default:
				return fmt.Errorf("part %q: deployed, inprocess or move", f)
			}
		}
		return nil
	})
	flag.StringVar(&cfg.compareRouter, "compare-router", "", "a fenec-shard binary of another build (say, the commit before a change), run as one more (standby) router and measured in the same turns")
	flag.Func("router-procs", "comma-separated GOMAXPROCS values: one more (standby) router each, run with it", func(v string) error {
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return fmt.Errorf("GOMAXPROCS %q", f)
			}
			cfg.routerProcs = append(cfg.routerProcs, n)
		}
		return nil
	})
	flag.Parse()
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "shard bench:", err)
		os.Exit(1)
	}
}

func run(cfg config) error {
	// An interrupt stops the run through its deferred clean-up: every
	// process it started is stopped and its files removed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "fenec-shard-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	logTo := io.Discard
	if cfg.logFile != "" {
		f, err := os.Create(cfg.logFile)
		if err != nil {
			return err
		}
		defer f.Close()
		logTo = f
	}
	log := slog.New(slog.NewTextHandler(logTo, nil))

	var out bytes.Buffer
	fmt.Fprintf(&out, "fenec shard bench, %s, %s, %d cores\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), benchkit.Machine(), runtime.NumCPU())
	if cfg.wrk != "none" && cfg.runs("deployed") {
		if err := deployed(ctx, &out, cfg, filepath.Join(dir, "deployed")); err != nil {
			return err
		}
		fmt.Fprintln(&out)
	}

	if cfg.moveImage == "" {
		// The tenant is loaded once, for the first move, and its image
		// restored for the second.
		cfg.moveImage = filepath.Join(dir, "mv.img")
	}
	if cfg.moveDocs > 0 && cfg.runs("move") {
		if err := moveDeployed(ctx, &out, cfg, filepath.Join(dir, "move")); err != nil {
			return err
		}
		fmt.Fprintln(&out)
	}

	n1, err := startNode(filepath.Join(dir, "n1"), log)
	if err != nil {
		return err
	}
	defer n1.Close()
	n2, err := startNode(filepath.Join(dir, "n2"), log)
	if err != nil {
		return err
	}
	defer n2.Close()
	rt, err := startRouter(filepath.Join(dir, "shard"), log)
	if err != nil {
		return err
	}
	defer rt.Close()
	router := "http://" + rt.Addr()
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	for name, n := range map[string]*node.Server{"n1": n1, "n2": n2} {
		if err := call(c, "PUT", router+"/_shard/nodes/"+name, fmt.Sprintf(`{"addr":"http://%s","token":%q,"region":"bench"}`, n.Addr(), adminToken), 201); err != nil {
			return err
		}
	}
	if err := setupTenant(c, router); err != nil {
		return err
	}

	if cfg.runs("inprocess") {
		if err := inProcess(&out, cfg, dir, log, n1, router); err != nil {
			return err
		}
	}
	if cfg.moveDocs > 0 && cfg.runs("move") {
		fmt.Fprintln(&out)
		rig := moveRig{router: router, source: "http://" + n1.Addr(), cpu: processCPU, shape: "in this process", profile: true}
		if _, err := moveBench(&out, cfg, c, rig); err != nil {
			return err
		}
		if err := moveParts(&out, c, n2URL(router, c)); err != nil {
			return err
		}
	}
	c.CloseIdleConnections()
	return benchkit.Emit(cfg.out, out.Bytes())
}

// runs reports whether part is to be run (-only).
func (cfg config) runs(part string) bool { return cfg.only == nil || cfg.only[part] }

// inProcess prints the in-process table (and, with -tls, a fresh
// connection's cost).
func inProcess(out *bytes.Buffer, cfg config, dir string, log *slog.Logger, n1 *node.Server, router string) error {
	targets := []target{
		{name: "node", base: "http://" + n1.Addr()},
		{name: "fenec-shard", base: router},
	}
	var nginxNote string
	if ng, err := startNginx(cfg.nginx, filepath.Join(dir, "nginx"), n1.Addr()); err != nil {
		nginxNote = "nginx: not measured: " + err.Error()
		fmt.Fprintln(os.Stderr, nginxNote)
	} else {
		defer ng.stop()
		targets = append(targets, target{name: "nginx", base: ng.base})
		nginxNote = "nginx: " + ng.version + ", one worker, upstream keepalive 16, HTTP/1.1 to the node"
	}

	fmt.Fprintf(out, "In process: node, router and client (net/http) in one process, GOMAXPROCS %d, nginx a child process;\n", runtime.GOMAXPROCS(0))
	fmt.Fprintf(out, "one keep-alive client per target; %d requests after %d of warm-up, per target and kind, in turns of 500; load average %s\n", cfg.requests, cfg.warmup, benchkit.LoadAvg())
	fmt.Fprintln(out, nginxNote)
	fmt.Fprintln(out)
	if _, err := latencyTable(out, cfg, targets); err != nil {
		return err
	}
	if cfg.tls {
		fmt.Fprintln(out)
		if err := freshBench(out, cfg, dir, log, n1); err != nil {
			return err
		}
	}
	return nil
}

func startNode(dir string, log *slog.Logger) (*node.Server, error) {
	return benchkit.StartNode(dir, adminToken, log, nil)
}

func startRouter(dir string, log *slog.Logger) (*region.Router, error) {
	return benchkit.StartRouter(dir, log, nil)
}

// call sends one request and wants the status.
func call(c *http.Client, method, url, body string, want int) error {
	_, err := benchkit.Call(c, method, url, "", body, want)
	return err
}

func callBody(c *http.Client, method, url, body string, want int) ([]byte, error) {
	return benchkit.Call(c, method, url, "", body, want)
}

// setupTenant places tenant "b" on n1 with a small collection.
func setupTenant(c *http.Client, router string) error {
	if err := call(c, "PUT", router+"/_shard/tenants/b", `{"node":"n1"}`, 201); err != nil {
		return err
	}
	if err := call(c, "POST", router+"/t/b/query", `{"query":"create collection c (name text, n int @sorted)"}`, 200); err != nil {
		return err
	}
	var rows []string
	for i := range 1000 {
		rows = append(rows, fmt.Sprintf(`{"name":"row %d","n":%d}`, i, i))
	}
	return call(c, "POST", router+"/t/b/c", "["+strings.Join(rows, ",")+"]", 201)
}

// target is one way to the node.
type target struct {
	name string
	base string
	c    *http.Client
}

// kind is one request shape measured.
type kind struct {
	name   string
	method string
	path   string
	body   func(i int) string
	want   int
}

var kinds = []kind{
	{"read (get by id)", "POST", "/t/b/query", func(i int) string {
		return fmt.Sprintf(`{"query":"get c where id = $1","params":[%d]}`, i%1000+1)
	}, 200},
	{"write (REST insert)", "POST", "/t/b/c", func(i int) string {
		return fmt.Sprintf(`{"name":"w","n":%d}`, i)
	}, 201},
}

// latencyTable measures every kind on every target, in turns of 500 so
// that a noisy moment falls on all of them, and prints percentiles and
// ratios to the node.
func latencyTable(w io.Writer, cfg config, targets []target) ([][]time.Duration, error) {
	for i := range targets {
		if targets[i].c == nil {
			targets[i].c = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
		}
		defer targets[i].c.CloseIdleConnections()
	}
	p50s := make([][]time.Duration, len(kinds))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "request\tvia\tp50 µs\tp95 µs\tp99 µs\tp50 ×node\tp99 ×node\t")
	for ki, k := range kinds {
		lat := make([][]time.Duration, len(targets))
		for ti, t := range targets {
			if _, err := measure(t, k, 0, cfg.warmup); err != nil {
				return nil, err
			}
			lat[ti] = make([]time.Duration, 0, cfg.requests)
			_ = ti
		}
		for done := 0; done < cfg.requests; {
			step := min(500, cfg.requests-done)
			for ti, t := range targets {
				d, err := measure(t, k, cfg.warmup+done, step)
				if err != nil {
					return nil, err
				}
				lat[ti] = append(lat[ti], d...)
			}
			done += step
		}
		base := percentiles(lat[0])
		for ti, t := range targets {
			p := percentiles(lat[ti])
			p50s[ki] = append(p50s[ki], p[0])
			fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%.1f\t%.2f\t%.2f\t\n", k.name, t.name,
				us(p[0]), us(p[1]), us(p[2]), float64(p[0])/float64(base[0]), float64(p[2])/float64(base[2]))
		}
	}
	return p50s, tw.Flush()
}

// measure sends n requests of kind k to t one after another and returns
// each one's time.
func measure(t target, k kind, from, n int) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for i := from; i < from+n; i++ {
		req, err := http.NewRequest(k.method, t.base+k.path, strings.NewReader(k.body(i)))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		res, err := t.c.Do(req)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", t.name, k.name, err)
		}
		_, err = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		d := time.Since(start)
		if err != nil {
			return nil, err
		}
		if res.StatusCode != k.want {
			return nil, fmt.Errorf("%s %s: status %d", t.name, k.name, res.StatusCode)
		}
		out = append(out, d)
	}
	return out, nil
}

func percentiles(d []time.Duration) [3]time.Duration {
	return [3]time.Duration{benchkit.Percentile(d, 0.50), benchkit.Percentile(d, 0.95), benchkit.Percentile(d, 0.99)}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// stripScores keeps only the ids of a near answer.
func stripScores(b []byte) []byte {
	var rows []map[string]any
	if json.Unmarshal(b, &rows) != nil {
		return b
	}
	var ids []string
	for _, r := range rows {
		ids = append(ids, fmt.Sprint(r["id"]))
	}
	return []byte(strings.Join(ids, ","))
}

// nginxProc is nginx running in front of the node.
type nginxProc struct {
	cmd     *exec.Cmd
	base    string
	version string
}

// startNginx runs nginx with a plain reverse-proxy configuration to
// upstream (host:port), waiting until it answers.
func startNginx(bin, dir, upstream string) (*nginxProc, error) {
	return runNginx(bin, dir, "http://", fmt.Sprintf(`
	upstream node { server %s; keepalive 16; }
	server {
		listen %%[1]s;
		location / {
			proxy_pass http://node;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_buffering off;
		}
	}`, upstream), &http.Client{})
}

func (n *nginxProc) stop() {
	_ = n.cmd.Process.Signal(os.Interrupt)
	_ = n.cmd.Wait()
}
