// Command neighbour measures what one tenant's heavy statements take from
// another tenant on the same node: the light tenant's keyed reads (one
// keep-alive client, one request at a time) alone, and beside the heavy
// tenant's clients, each sending a heavy statement again and again and
// hanging up on it after -patience (as a client or a router that gives up
// does):
//
//   - in: get ... where body in $1, $1 a list of 300 000 values, over
//     -rows rows of 1 KB with no index (a walk of the list a row before
//     the list was hashed: 52 s a statement);
//   - pattern: get ... where body ~ "p{1,900}z", which every row's 1 KB
//     runs for 900 steps a byte: seconds of scan whatever is done to it.
//
// Each row of the table is a fresh fenec-node process (built from this
// checkout, and with -base REV from that revision too, side by side) over
// the same tenant files: the light tenant's p50 and p99, how many of the
// heavy statements were answered within their client's patience, and the
// node's CPU seconds during the run and in the -after that follows
// once the heavy clients stopped — a statement whose client left that
// runs on shows there.
//
// It prints a table and writes it to -out. The machine is shared: the
// figures are noisy, read them side by side.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/fenec-go/fenec/bench/internal/benchkit"
)

const adminToken = "bench-admin-token"

type config struct {
	rows      int
	inValues  int
	heavy     int
	dur       time.Duration
	after     time.Duration
	patience  time.Duration
	base      string
	stmtTime  time.Duration
	out       string
	scenarios string
}

func main() {
	var cfg config
	flag.IntVar(&cfg.rows, "rows", 20000, "rows of 1 KB in the heavy tenant")
	flag.IntVar(&cfg.inValues, "in-values", 300000, "values in the heavy in's list")
	flag.IntVar(&cfg.heavy, "heavy", 4, "heavy clients, each one statement at a time")
	flag.DurationVar(&cfg.dur, "d", 20*time.Second, "how long each row is measured")
	flag.DurationVar(&cfg.after, "after", 5*time.Second, "how long the node's CPU is watched after the heavy clients stop")
	flag.DurationVar(&cfg.patience, "patience", time.Second, "how long a heavy client waits for its answer before it hangs up")
	flag.StringVar(&cfg.base, "base", "", "also measure fenec-node built from this git revision (e.g. the commit before the bounds)")
	flag.DurationVar(&cfg.stmtTime, "max-statement-time", 0, "--max-statement-time for this checkout's node (0: its default)")
	flag.StringVar(&cfg.scenarios, "only", "alone,in,pattern", "which rows: alone, in, pattern")
	flag.StringVar(&cfg.out, "out", "bench/neighbour.txt", "file the table is written to")
	flag.Parse()
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "neighbour bench:", err)
		os.Exit(1)
	}
}

// build is one fenec-node binary the bench measures.
type build struct {
	name string
	bin  string
	args []string // flags only this build knows
}

func run(cfg config) error {
	dir, err := os.MkdirTemp("", "fenec-neighbour-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	nodeBin, _, err := benchkit.BuildBinaries(context.Background(), filepath.Join(dir, "bin"))
	if err != nil {
		return err
	}
	builds := []build{{name: "this checkout", bin: nodeBin}}
	if cfg.stmtTime > 0 {
		builds[0].args = []string{"--max-statement-time", strconv.FormatFloat(cfg.stmtTime.Seconds(), 'f', -1, 64)}
	}
	if cfg.base != "" {
		bin, err := buildRevision(cfg.base, filepath.Join(dir, "base"))
		if err != nil {
			return err
		}
		builds = append([]build{{name: cfg.base, bin: bin}}, builds...)
	}
	data := filepath.Join(dir, "data")
	if err := load(nodeBin, data, cfg); err != nil {
		return err
	}
	body := heavyBodies(cfg)
	var out bytes.Buffer
	fmt.Fprintf(&out, "fenec neighbour bench, %s, %s, %d cores, load average %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"),
		benchkit.CPUName(), runtime.NumCPU(), benchkit.LoadAvg())
	fmt.Fprintf(&out, "The light tenant: keyed reads of 1 000 rows, one keep-alive client, one at a time, %v a row. The heavy tenant: %d rows of 1 KB,\n", cfg.dur, cfg.rows)
	fmt.Fprintf(&out, "%d clients each sending a heavy statement again and again, hanging up after %v; then %v watched with no client.\n", cfg.heavy, cfg.patience, cfg.after)
	fmt.Fprintf(&out, "in: get c where body in $1, $1 %d values; pattern: get c where body ~ \"p{1,900}z\" count. Each row a fresh node process.\n", cfg.inValues)
	fmt.Fprintf(&out, "The machine is shared and loaded: read the rows side by side, not as figures of their own.\n\n")
	tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "node\theavy\tlight p50 ms\tlight p99 ms\tlight reads\theavy answered\tnode CPU s\tCPU s after\t")
	for _, sc := range strings.Split(cfg.scenarios, ",") {
		for _, b := range builds {
			r, err := measure(b, data, sc, body[sc], cfg)
			if err != nil {
				return fmt.Errorf("%s, %s: %w", b.name, sc, err)
			}
			fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%d\t%d\t%.1f\t%.1f\t\n", b.name, sc, ms(r.p50), ms(r.p99), r.reads, r.heavyAnswered, r.cpu, r.cpuAfter)
			fmt.Fprintf(os.Stderr, "%s, %s: p50 %.2f ms, p99 %.2f ms\n", b.name, sc, ms(r.p50), ms(r.p99))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return benchkit.Emit(cfg.out, out.Bytes())
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// buildRevision builds fenec-node from a git revision of this repository,
// its tree copied out with git archive.
func buildRevision(rev, dir string) (string, error) {
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	archive := exec.Command("git", "archive", rev)
	untar := exec.Command("tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return "", err
	}
	untar.Stdin = pipe
	var errs bytes.Buffer
	archive.Stderr, untar.Stderr = &errs, &errs
	if err := untar.Start(); err != nil {
		return "", err
	}
	if err := archive.Run(); err != nil {
		return "", fmt.Errorf("git archive %s: %w: %s", rev, err, errs.String())
	}
	if err := untar.Wait(); err != nil {
		return "", fmt.Errorf("untar %s: %w: %s", rev, err, errs.String())
	}
	bin := filepath.Join(dir, "fenec-node")
	cmd := exec.Command(benchkit.GoBin(), "build", "-o", bin, "./cmd/fenec-node")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w\n%s", rev, err, out)
	}
	return bin, nil
}

// load makes the two tenants' files under data with a node of this
// checkout, then stops it.
func load(bin, data string, cfg config) error {
	p, addr, err := benchkit.StartNodeProc(bin, data, "fenec-node", adminToken)
	if err != nil {
		return err
	}
	defer p.Stop()
	c := &http.Client{}
	base := "http://" + addr
	steps := []struct{ method, path, body string }{
		{"PUT", "/_admin/tenants/light", ""},
		{"POST", "/t/light/query", `{"query": "create collection kv (k int @hash, v text)"}`},
		{"PUT", "/_admin/tenants/heavy", ""},
		{"POST", "/t/heavy/query", `{"query": "create collection c (body text, n int)"}`},
	}
	for _, s := range steps {
		want := 200
		if s.method == "PUT" {
			want = 201
		}
		if _, err := benchkit.Call(c, s.method, base+s.path, adminToken, s.body, want); err != nil {
			return err
		}
	}
	var kv []string
	for i := 1; i <= 1000; i++ {
		kv = append(kv, fmt.Sprintf(`{"k":%d,"v":"value %d"}`, i, i))
	}
	if _, err := benchkit.Call(c, "POST", base+"/t/light/kv", adminToken, "["+strings.Join(kv, ",")+"]", 201); err != nil {
		return err
	}
	pad := strings.Repeat("p", 1000)
	for i := 0; i < cfg.rows; i += 1000 {
		var rows []string
		for j := i; j < min(cfg.rows, i+1000); j++ {
			rows = append(rows, fmt.Sprintf(`{"body":"%s%d","n":%d}`, pad, j, j))
		}
		if _, err := benchkit.Call(c, "POST", base+"/t/heavy/c", adminToken, "["+strings.Join(rows, ",")+"]", 201); err != nil {
			return err
		}
	}
	return nil
}

// heavyBodies are each scenario's heavy request body.
func heavyBodies(cfg config) map[string][]byte {
	vals := make([]string, 0, cfg.inValues)
	for i := range cfg.inValues {
		vals = append(vals, "v"+strconv.Itoa(i))
	}
	in, _ := json.Marshal(map[string]any{"query": "get c where body in $1 count", "params": []any{vals}})
	pattern, _ := json.Marshal(map[string]any{"query": `get c where body ~ "p{1,900}z" count`})
	return map[string][]byte{"in": in, "pattern": pattern}
}

// result is one row's figures.
type result struct {
	p50, p99      time.Duration
	reads         int
	heavyAnswered int64
	cpu, cpuAfter float64
}

// measure starts a node of b over a copy of data, runs the light reader
// beside the scenario's heavy clients (none for alone), and kills it.
func measure(b build, data, scenario string, heavy []byte, cfg config) (result, error) {
	dir := data + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := exec.Command("cp", "-a", data, dir).Run(); err != nil {
		return result{}, fmt.Errorf("copy the tenant files: %w", err)
	}
	defer os.RemoveAll(dir)
	p, addr, err := benchkit.StartNodeProc(b.bin, dir, "fenec-node", adminToken, b.args...)
	if err != nil {
		return result{}, err
	}
	defer p.Kill()
	base := "http://" + addr
	light := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
	defer light.CloseIdleConnections()
	for i := range 200 { // warm up: the tenant opened, the connection made
		if _, err := lightRead(light, base, i); err != nil {
			return result{}, err
		}
	}
	ctx, stop := context.WithTimeout(context.Background(), cfg.dur)
	defer stop()
	var answered atomic.Int64
	var wg sync.WaitGroup
	if scenario != "alone" {
		for range cfg.heavy {
			wg.Go(func() { heavyClient(ctx, base, heavy, cfg.patience, &answered) })
		}
	}
	cpu0 := cpuSeconds(p.PID())
	var lat []time.Duration
	for i := 0; ctx.Err() == nil; i++ {
		d, err := lightRead(light, base, i)
		if err != nil {
			return result{}, err
		}
		lat = append(lat, d)
	}
	wg.Wait()
	cpu1 := cpuSeconds(p.PID())
	time.Sleep(cfg.after)
	cpu2 := cpuSeconds(p.PID())
	return result{p50: benchkit.Percentile(lat, 0.5), p99: benchkit.Percentile(lat, 0.99), reads: len(lat),
		heavyAnswered: answered.Load(), cpu: cpu1 - cpu0, cpuAfter: cpu2 - cpu1}, nil
}

// lightRead is one keyed read of the light tenant.
func lightRead(c *http.Client, base string, i int) (time.Duration, error) {
	body := fmt.Sprintf(`{"query": "get kv where k = $1", "params": [%d]}`, i%1000+1)
	start := time.Now()
	if _, err := benchkit.Call(c, "POST", base+"/t/light/query", "", body, 200); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// heavyClient sends the heavy statement until ctx ends, each on a
// connection of its own that it hangs up on after patience.
func heavyClient(ctx context.Context, base string, body []byte, patience time.Duration, answered *atomic.Int64) {
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, patience)
		req, _ := http.NewRequestWithContext(rctx, "POST", base+"/t/heavy/query", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		tr := &http.Transport{DisableKeepAlives: true}
		res, err := (&http.Client{Transport: tr}).Do(req)
		if err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			answered.Add(1)
		}
		cancel()
		tr.CloseIdleConnections()
	}
}

// cpuSeconds is a process's user and system CPU time so far, from
// /proc/<pid>/stat (0 where there is none).
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // clock ticks; USER_HZ is 100 on Linux
}
