// Command quota measures what quotas cost, side by side in one run:
//
//   - over HTTP, as deployed: fenec-node a process of its own (built from
//     this checkout), this program its one keep-alive client on loopback:
//     keyed reads (GET /t/<t>/kv?k=eq.N) and writes (POST
//     /t/<t>/kv) to a tenant with no quota and to one with every quota
//     (bytes, rows, streams, requests, rows and bytes a second, all set
//     far above what the run reaches, so that every check runs and none
//     refuses), in turns of -turn requests, the order swapped each turn;
//   - in process, one put through the node's own quota hook: no hook, no
//     quota, held to bytes and rows, and a bytes-a-second bucket besides
//     (node.BenchmarkQuotaPut, which interleaves them itself), -rounds
//     runs.
//
// It prints a table and writes it to -out.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fenec-go/fenec/bench/internal/benchkit"
)

const adminToken = "bench-admin-token"

type config struct {
	requests, turn, rounds int
	puts                   int
	out                    string
}

func main() {
	var cfg config
	flag.IntVar(&cfg.requests, "n", 20000, "measured HTTP requests per tenant and kind")
	flag.IntVar(&cfg.turn, "turn", 100, "requests a tenant takes before the other's turn")
	flag.IntVar(&cfg.rounds, "rounds", 5, "runs of the in-process benchmark")
	flag.IntVar(&cfg.puts, "puts", 50000, "puts per variant in one in-process run")
	flag.StringVar(&cfg.out, "out", "bench/quota.txt", "file the table is written to")
	flag.Parse()
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "quota bench:", err)
		os.Exit(1)
	}
}

// every is a quota with every field set, far above what the run reaches.
const every = `{"bytes": 1099511627776, "rows": 1000000000, "streams": 1000, "requests": 1000, "rows_per_s": 1e12, "bytes_per_s": 1e15}`

func run(cfg config) error {
	dir, err := os.MkdirTemp("", "fenec-quota-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	nodeBin, _, err := benchkit.BuildBinaries(context.Background(), filepath.Join(dir, "bin"))
	if err != nil {
		return err
	}
	n, addr, err := benchkit.StartNodeProc(nodeBin, filepath.Join(dir, "node"), "fenec-node", adminToken)
	if err != nil {
		return err
	}
	defer n.Stop()
	base := "http://" + addr
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
	defer c.CloseIdleConnections()
	for _, t := range []string{"free", "held"} {
		if err := setupTenant(c, base, t); err != nil {
			return err
		}
	}
	if err := call(c, "PUT", base+"/_admin/tenants/held/quota", every, 200); err != nil {
		return err
	}

	var out bytes.Buffer
	fmt.Fprintf(&out, "fenec quota bench, %s, %s, %d cores, load average %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), benchkit.CPUName(), runtime.NumCPU(), benchkit.LoadAvg())
	fmt.Fprintf(&out, "Over HTTP, as deployed: fenec-node a process of its own, this program its one keep-alive client on loopback, %d requests per tenant and kind in turns of %d (order swapped each turn);\n", cfg.requests, cfg.turn)
	fmt.Fprintf(&out, "\"every quota\" is %s\n\n", every)
	if err := httpTable(&out, cfg, c, base); err != nil {
		return err
	}
	fmt.Fprintln(&out)
	if err := putTable(&out, cfg); err != nil {
		return err
	}
	os.Stdout.Write(out.Bytes())
	if cfg.out != "" {
		return os.WriteFile(cfg.out, out.Bytes(), 0o644)
	}
	return nil
}

// setupTenant makes tenant t with a collection kv of keys 1..1000.
func setupTenant(c *http.Client, base, t string) error {
	if err := call(c, "PUT", base+"/_admin/tenants/"+t, "", 201); err != nil {
		return err
	}
	if err := call(c, "POST", base+"/t/"+t+"/query", `{"query":"create collection kv (k int @unique, v text)"}`, 200); err != nil {
		return err
	}
	var rows []string
	for i := 1; i <= 1000; i++ {
		rows = append(rows, fmt.Sprintf(`{"k":%d,"v":"value %d"}`, i, i))
	}
	return call(c, "POST", base+"/t/"+t+"/kv", "["+strings.Join(rows, ",")+"]", 201)
}

func call(c *http.Client, method, url, body string, want int) error {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, url, res.StatusCode, bytes.TrimSpace(b))
	}
	return nil
}

// httpTable times reads and writes to both tenants in turns.
func httpTable(w io.Writer, cfg config, c *http.Client, base string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "request\ttenant\tp50 µs\tp90 µs\tp99 µs\tmean µs\tp50 ×none\tmean ×none\t")
	tenants := []string{"free", "held"}
	label := map[string]string{"free": "no quota", "held": "every quota"}
	for _, kind := range []string{"read", "write"} {
		lat := make([][]time.Duration, len(tenants))
		key := 1_000_000
		for done := -cfg.turn * 4; done < cfg.requests; done += cfg.turn { // the first turns warm up
			for k := range tenants {
				ti := (k + done/cfg.turn) % len(tenants)
				if done < 0 {
					ti = k
				}
				for range cfg.turn {
					key++
					d, err := once(c, base, tenants[ti], kind, key)
					if err != nil {
						return err
					}
					if done >= 0 {
						lat[ti] = append(lat[ti], d)
					}
				}
			}
		}
		none := stats(lat[0])
		for ti, t := range tenants {
			s := stats(lat[ti])
			fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%.1f\t%.1f\t%.3f\t%.3f\t\n", kind, label[t], s.p50, s.p90, s.p99, s.mean, s.p50/none.p50, s.mean/none.mean)
		}
	}
	return tw.Flush()
}

// once sends one read (key k mod 1000) or one write (a new key k).
func once(c *http.Client, base, tenant, kind string, k int) (time.Duration, error) {
	var req *http.Request
	want := 200
	if kind == "read" {
		req, _ = http.NewRequest("GET", fmt.Sprintf("%s/t/%s/kv?k=eq.%d", base, tenant, k%1000+1), nil)
	} else {
		req, _ = http.NewRequest("POST", base+"/t/"+tenant+"/kv", strings.NewReader(fmt.Sprintf(`{"k":%d,"v":"w"}`, k)))
		req.Header.Set("Content-Type", "application/json")
		want = 201
	}
	start := time.Now()
	res, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	if res.StatusCode != want {
		return 0, fmt.Errorf("%s %s: %d", kind, tenant, res.StatusCode)
	}
	return d, nil
}

type summary struct{ p50, p90, p99, mean float64 }

func stats(d []time.Duration) summary {
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(q float64) float64 { return us(s[min(len(s)-1, int(q*float64(len(s))))]) }
	var sum time.Duration
	for _, x := range s {
		sum += x
	}
	return summary{at(0.5), at(0.9), at(0.99), us(sum) / float64(len(s))}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// putTable runs node.BenchmarkQuotaPut cfg.rounds times and prints each
// variant's median over the runs, with the runs' range.
func putTable(w io.Writer, cfg config) error {
	goBin := os.Getenv("GO")
	if goBin == "" {
		goBin = "go"
	}
	cmd := exec.Command(goBin, "test", "-run", "^$", "-bench", "^BenchmarkQuotaPut$",
		"-benchtime", fmt.Sprintf("%dx", cfg.puts), "-count", strconv.Itoa(cfg.rounds), "./node")
	outb, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go test -bench (run from the repository's root): %w\n%s", err, outb)
	}
	metric := regexp.MustCompile(`([0-9.]+) ns/put-([a-z_]+)`)
	got := map[string][]float64{}
	for _, line := range strings.Split(string(outb), "\n") {
		if !strings.HasPrefix(line, "BenchmarkQuotaPut") {
			continue
		}
		for _, m := range metric.FindAllStringSubmatch(line, -1) {
			v, _ := strconv.ParseFloat(m[1], 64)
			got[m[2]] = append(got[m[2]], v)
		}
	}
	if len(got["none"]) == 0 {
		return fmt.Errorf("no figures in the benchmark's output:\n%s", outb)
	}
	fmt.Fprintf(w, "In process: one put of one document into a tenant's file (--sync off) through the node's own quota hook; the four files take\n")
	fmt.Fprintf(w, "their puts in turns of 32 within each run (node.BenchmarkQuotaPut, %d puts each), the median turn of each; %d runs: median [lowest, highest]; load average %s\n\n", cfg.puts, cfg.rounds, benchkit.LoadAvg())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "put\tns\tlowest\thighest\t×no quota\t")
	rows := []struct{ key, name string }{
		{"nohook", "no quota hook at all (the floor)"},
		{"none", "the node's hook, no quota"},
		{"bytes_rows", "held to bytes and rows"},
		{"bytes_rows_bps", "bytes, rows and a bytes-a-second bucket"},
	}
	none := benchkit.Median(got["none"])
	for _, r := range rows {
		v := got[r.key]
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.3f\t\n", r.name, benchkit.Median(v), slices.Min(v), slices.Max(v), benchkit.Median(v)/none)
	}
	return tw.Flush()
}
