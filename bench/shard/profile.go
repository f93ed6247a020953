package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fenec-go/fenec/bench/internal/benchkit"
)

// What a request costs the process that serves or proxies it, counted by
// the kernel (perf stat on the process's tracepoints, while wrk runs and
// nothing else is sent to it) and divided by the requests wrk completed;
// for the router also the Go heap's allocations (runtime.MemStats.Mallocs
// before and after, from its --pprof listener) and a CPU profile.

// perfEvents are counted per process; the names are the kernel's
// tracepoints, the columns sum some of them.
var perfEvents = []string{
	"raw_syscalls:sys_enter",
	"syscalls:sys_enter_read", "syscalls:sys_enter_readv", "syscalls:sys_enter_recvfrom",
	"syscalls:sys_enter_write", "syscalls:sys_enter_writev", "syscalls:sys_enter_sendto",
	"syscalls:sys_enter_epoll_wait", "syscalls:sys_enter_epoll_pwait",
	"syscalls:sys_enter_futex", "syscalls:sys_enter_nanosleep",
	"context-switches",
	"task-clock", // ms of CPU the process ran
}

// costTable prints system calls, context switches and (router) allocations
// per request for reads at 1 and 16 connections and writes at 16, for the
// node, the router and nginx with one worker; and writes the router's CPU
// profile under profileOut.
func costTable(ctx context.Context, w io.Writer, cfg config, d *deployedRig) error {
	perf, err := exec.LookPath("perf")
	if err != nil {
		fmt.Fprintln(w, "system calls per request: not measured (perf not installed: Debian's linux-perf)")
		perf = ""
	}
	fmt.Fprintf(w, "Per request, reads (GET %s) and writes (POST, a new key each), counted by the kernel on the serving process alone while wrk ran %s (load average %s);\n", readPath, cfg.dur, benchkit.LoadAvg())
	fmt.Fprintln(w, "cpu = µs of CPU the process ran (user and system), read = read+readv, recv = recvfrom (the router's look at a pooled connection is one), write = write+writev+sendto, switches = context switches")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "request\tconns\tprocess\tcpu µs\tsyscalls\tread\trecv\twrite\tepoll\tfutex\tswitches\tallocs\t")
	for _, l := range []wrkLoad{{"read", 1}, {"read", 16}, {"write", 16}} {
		for _, t := range d.targets {
			if strings.HasPrefix(t.name, "nginx auto") {
				continue
			}
			var before uint64
			if t.name == "fenec-shard" {
				if before, err = mallocs(d.pprof); err != nil {
					return err
				}
			}
			counts, res, err := d.countWhile(ctx, perf, t, l, cfg.dur)
			if err != nil {
				return err
			}
			allocs := "-"
			if t.name == "fenec-shard" {
				after, err := mallocs(d.pprof)
				if err != nil {
					return err
				}
				allocs = fmt.Sprintf("%.1f", float64(after-before)/float64(res.Requests))
			}
			per := func(names ...string) string {
				if counts == nil {
					return "?"
				}
				var n float64
				for _, name := range names {
					n += counts[name]
				}
				return fmt.Sprintf("%.2f", n/float64(res.Requests))
			}
			cpu := "?"
			if counts != nil {
				cpu = fmt.Sprintf("%.1f", counts["task-clock"]*1000/float64(res.Requests))
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", l.kind, l.conns, t.name, cpu,
				per("raw_syscalls:sys_enter"),
				per("syscalls:sys_enter_read", "syscalls:sys_enter_readv"),
				per("syscalls:sys_enter_recvfrom"),
				per("syscalls:sys_enter_write", "syscalls:sys_enter_writev", "syscalls:sys_enter_sendto"),
				per("syscalls:sys_enter_epoll_wait", "syscalls:sys_enter_epoll_pwait"),
				per("syscalls:sys_enter_futex"),
				per("context-switches"), allocs)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if cfg.profileOut != "" {
		return d.cpuProfile(ctx, cfg)
	}
	return nil
}

// countWhile counts perfEvents on t's processes while wrk sends load to it.
// With perf "" it only runs wrk.
func (d *deployedRig) countWhile(ctx context.Context, perf string, t wtarget, l wrkLoad, dur time.Duration) (map[string]float64, wrkResult, error) {
	if perf == "" {
		r, err := d.runWrk(ctx, t, l, dur)
		return nil, r, err
	}
	out := filepath.Join(d.dir, "perf-stat.csv")
	pids := make([]string, len(t.pids))
	for i, p := range t.pids {
		pids[i] = strconv.Itoa(p)
	}
	cmd := exec.CommandContext(ctx, perf, "stat", "-x", ",", "-o", out, "-e", strings.Join(perfEvents, ","), "-p", strings.Join(pids, ","))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, wrkResult{}, err
	}
	time.Sleep(300 * time.Millisecond) // attached before the load starts
	r, werr := d.runWrk(ctx, t, l, dur)
	_ = cmd.Process.Signal(os.Interrupt)
	perr := cmd.Wait()
	if werr != nil {
		return nil, r, werr
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, r, fmt.Errorf("perf stat: %v %v %s", err, perr, stderr.String())
	}
	counts := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ",")
		if len(f) < 3 || strings.HasPrefix(line, "#") {
			continue
		}
		if n, err := strconv.ParseFloat(f[0], 64); err == nil {
			counts[f[2]] = n
		}
	}
	if len(counts) == 0 {
		return nil, r, fmt.Errorf("perf stat counted nothing: %s", b)
	}
	return counts, r, nil
}

// mallocs is the router's runtime.MemStats.Mallocs, read off its heap
// profile's text form.
func mallocs(pprofAddr string) (uint64, error) {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := c.Get("http://" + pprofAddr + "/debug/pprof/heap?debug=1")
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, err
	}
	_, rest, ok := bytes.Cut(b, []byte("# Mallocs = "))
	if !ok {
		return 0, errors.New("heap profile without Mallocs")
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	return strconv.ParseUint(string(bytes.TrimSpace(line)), 10, 64)
}

// cpuProfile takes the router's CPU profile while wrk sends reads at 16
// connections and writes its top functions, flat and cumulative, to
// cfg.profileOut, with the raw profile beside it in the temp dir only.
func (d *deployedRig) cpuProfile(ctx context.Context, cfg config) error {
	var router wtarget
	for _, t := range d.targets {
		if t.name == "fenec-shard" {
			router = t
		}
	}
	secs := max(2, int(cfg.dur/time.Second))
	allocsBefore, err := fetch(fmt.Sprintf("http://%s/debug/pprof/allocs", d.pprof), 30*time.Second)
	if err != nil {
		return fmt.Errorf("allocs profile: %w", err)
	}
	type got struct {
		b   []byte
		err error
	}
	ch := make(chan got, 1)
	go func() {
		c := &http.Client{Timeout: time.Duration(secs+30) * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		res, err := c.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", d.pprof, secs))
		if err != nil {
			ch <- got{err: err}
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		ch <- got{b, err}
	}()
	r, err := d.runWrk(ctx, router, wrkLoad{"read", 16}, time.Duration(secs+1)*time.Second)
	g := <-ch
	if err != nil {
		return err
	}
	if g.err != nil {
		return fmt.Errorf("cpu profile: %w", g.err)
	}
	allocsAfter, err := fetch(fmt.Sprintf("http://%s/debug/pprof/allocs", d.pprof), 30*time.Second)
	if err != nil {
		return fmt.Errorf("allocs profile: %w", err)
	}
	raw := filepath.Join(d.dir, "router.pprof")
	base, after := filepath.Join(d.dir, "allocs-before.pprof"), filepath.Join(d.dir, "allocs-after.pprof")
	for f, b := range map[string][]byte{raw: g.b, base: allocsBefore, after: allocsAfter} {
		if err := os.WriteFile(f, b, 0o644); err != nil {
			return err
		}
	}
	var out bytes.Buffer
	fmt.Fprintf(&out, "fenec-shard CPU profile, %s, as deployed (its own process), reads GET %s through it at 16 connections by wrk: %.0f req/s over the %d s profiled; load average %s\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), readPath, r.RPS, secs, benchkit.LoadAvg())
	for _, mode := range []string{"-top", "-top -cum", "-top -sample_index=alloc_objects -diff_base " + base} {
		file := raw
		if strings.Contains(mode, "alloc") {
			file = after
			fmt.Fprintf(&out, "Objects allocated during the run (the allocation profile's difference across it; sampled, so scaled estimates; %d requests):\n", r.Requests)
		}
		args := append([]string{"tool", "pprof"}, strings.Fields(mode)...)
		args = append(args, "-nodecount=40", d.shardBin, file)
		cmd := exec.CommandContext(ctx, benchkit.GoBin(), args...)
		b, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("go tool pprof: %w\n%s", err, b)
		}
		fmt.Fprintf(&out, "$ go tool pprof %s -nodecount=40\n%s\n", strings.Replace(mode, base, "<before>", 1), b)
	}
	return os.WriteFile(cfg.profileOut, out.Bytes(), 0o644)
}

// fetch GETs url whole.
func fetch(url string, timeout time.Duration) ([]byte, error) {
	c := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		return nil, fmt.Errorf("GET %s: %d", url, res.StatusCode)
	}
	return io.ReadAll(res.Body)
}
