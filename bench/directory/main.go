// Command directory measures a directory of many tenants (records only: no
// node holds a file for them) in an embedded etcd member, at 10 tenants and
// again at -tenants, in one run:
//
//   - placements a second: tenant records placed one at a time as the
//     leading router places them (each conditioned on its node's record),
//     and many at once (the bulk load of the rest);
//   - a router's start over the directory: fenec-shard started as its own
//     process (a standby over the member), until its /_health says its
//     copy is ready, and its resident memory then; and the Go heap one
//     copy (global.Watcher, what the router forwards from) holds;
//   - the lookup a forwarded request makes (Watcher.Lookup), 10 tenants
//     against many, in turns;
//   - one change reaching a standby router's copy (a Watcher over the same
//     member: from the write's start until the copy shows it);
//   - a region's leading router linked to the member (in process, its own
//     embedded member): its start until its directory holds the region
//     (every tenant here), then one change from the global write until a
//     watcher of the region's directory shows it (the link applies it from
//     the global directory's watch);
//   - a full sync of the region (global.Mirror.Sync, which reads both
//     directories whole: what a link falls back to when a watch is lost),
//     and one change synced that way, beside.
//
// It prints a table and writes it to -out. Run it from the repository's
// root (it builds fenec-shard).
package main

import (
	"bytes"
	"context"
	"errors"
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
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/fenec-go/fenec/bench/internal/benchkit"
	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/region"
)

type config struct {
	tenants, changes, seqPlace, parallel int
	linkChanges                          int
	out                                  string
	wrk                                  string // "none": no routed reads
	routedRounds                         int
}

func main() {
	var cfg config
	flag.IntVar(&cfg.tenants, "tenants", 100_000, "tenants in the big directory")
	flag.IntVar(&cfg.changes, "changes", 200, "changes timed to a standby's copy, per size")
	flag.IntVar(&cfg.seqPlace, "seq", 1000, "placements timed one at a time, per size")
	flag.IntVar(&cfg.parallel, "parallel", 32, "placements at once for the bulk load")
	flag.IntVar(&cfg.linkChanges, "link-changes", 100, "changes timed to a region's copy, per size")
	flag.StringVar(&cfg.out, "out", "bench/directory.txt", "file the table is written to")
	flag.StringVar(&cfg.wrk, "wrk", "wrk", "wrk binary for the routed reads (none: skip them)")
	flag.IntVar(&cfg.routedRounds, "routed-rounds", 3, "rounds of the routed reads, both routers once a round")
	flag.Parse()
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "directory bench:", err)
		os.Exit(1)
	}
}

const nodes = 16

// size is what was measured at one directory size.
type size struct {
	tenants       int
	seqRate       float64 // placements a second, one at a time
	startMS       float64 // router process: exec until its copy is ready
	rssMB         float64 // its resident memory then
	heapMB        float64 // Go heap of one copy (in this process)
	change        []time.Duration
	mirrorFirst   time.Duration // the first sync: every record written
	mirrorOne     []time.Duration
	linkStart     time.Duration   // a region's router: start until its directory holds the region
	linkOne       []time.Duration // one change: the global write until the region's copy shows it
	lookupNS      float64         // 4096 names asked in turn (of 10 tenants: the 10)
	lookupFewNS   float64         // the 10 tenants' names asked of the big copy
	lookupEveryNS float64         // every tenant of the big copy asked in turn
	bulkRate      float64         // placements a second, cfg.parallel at once
	bulkPlacement int
	dbMB          float64 // the member's database file
}

func run(cfg config) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "fenec-directory-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	shardBin, err := buildShard(ctx, dir)
	if err != nil {
		return err
	}
	member, err := startMember(ctx, filepath.Join(dir, "etcd"))
	if err != nil {
		return err
	}
	defer member.close()
	d, s := member.d, member.store
	load0 := benchkit.LoadAvg()
	small, big := &size{tenants: 10}, &size{tenants: cfg.tenants}
	// 10 tenants, measured; then cfg.seqPlace placed one at a time (the
	// rate of a directory that small), the bulk at once, and the last
	// cfg.seqPlace one at a time again (the rate at the big size).
	if _, err = placeSeq(ctx, s, 0, small.tenants); err != nil {
		return err
	}
	if err := measureSize(ctx, cfg, small, s, d, member.urls, shardBin, dir); err != nil {
		return err
	}
	bulk := cfg.tenants - small.tenants - 2*cfg.seqPlace
	if bulk < 0 {
		return fmt.Errorf("-tenants %d is fewer than 10 + 2 × -seq", cfg.tenants)
	}
	if small.seqRate, err = placeSeq(ctx, s, small.tenants, cfg.seqPlace); err != nil {
		return err
	}
	start := time.Now()
	if err := placeParallel(ctx, s, small.tenants+cfg.seqPlace, bulk, cfg.parallel); err != nil {
		return err
	}
	big.bulkRate, big.bulkPlacement = float64(bulk)/time.Since(start).Seconds(), bulk
	if big.seqRate, err = placeSeq(ctx, s, small.tenants+cfg.seqPlace+bulk, cfg.seqPlace); err != nil {
		return err
	}
	if err := measureSize(ctx, cfg, big, s, d, member.urls, shardBin, dir); err != nil {
		return err
	}
	if err := lookups(ctx, d, small, big); err != nil {
		return err
	}
	var rr *routedResult
	if cfg.wrk != "none" {
		r, err := routed(ctx, cfg.wrk, cfg.routedRounds, s, member.urls, dir)
		if err != nil {
			return fmt.Errorf("routed reads: %w", err)
		}
		rr = &r
	}

	var out bytes.Buffer
	fmt.Fprintf(&out, "fenec directory bench, %s, %s, %d cores; load average %s at the start, %s at the end\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), benchkit.CPUName(), runtime.NumCPU(), load0, benchkit.LoadAvg())
	fmt.Fprintf(&out, "one embedded etcd member (this process), %d nodes in region eu, tenant records only (no node holds a file)", nodes)
	if rr != nil {
		fmt.Fprintf(&out, "; for the reads as deployed, a second member holding the small directory, and in both a tenant on a real node")
	}
	fmt.Fprintf(&out, "\n\n")
	tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\t%d tenants\t%d tenants\t\n", small.tenants, big.tenants)
	fmt.Fprintf(tw, "placements a second, %d one at a time as the leader places (records only), from 10 / up to the last\t%.0f\t%.0f\t\n", cfg.seqPlace, small.seqRate, big.seqRate)
	fmt.Fprintf(tw, "placements a second, %d at once (the bulk load of %d)\t\t%.0f\t\n", cfg.parallel, big.bulkPlacement, big.bulkRate)
	fmt.Fprintf(tw, "router start (fenec-shard --standby --directory, its own process), exec until its copy is ready, ms\t%.0f\t%.0f\t\n", small.startMS, big.startMS)
	fmt.Fprintf(tw, "  its resident memory then, MB\t%.1f\t%.1f\t\n", small.rssMB, big.rssMB)
	fmt.Fprintf(tw, "Go heap one copy holds (global.Watcher, in process), MB\t%.2f\t%.1f\t\n", small.heapMB, big.heapMB)
	fmt.Fprintf(tw, "etcd's database file (history not yet compacted included), MB\t%.1f\t%.1f\t\n", small.dbMB, big.dbMB)
	fmt.Fprintf(tw, "lookup per forwarded request (Watcher.Lookup, in turns; 4096 names asked, spread over the tenants), ns\t%.0f\t%.0f\t\n", small.lookupNS, big.lookupNS)
	fmt.Fprintf(tw, "  the same 10 tenants asked of the big copy (its size alone), ns\t\t%.0f\t\n", big.lookupFewNS)
	fmt.Fprintf(tw, "  every tenant asked in turn (cache-cold: bench/lookup-profile.txt), ns\t\t%.0f\t\n", big.lookupEveryNS)
	if rr != nil {
		fmt.Fprintf(tw, "a keyed read as deployed (GET %s: fenec-node and two fenec-shard standbys, each a process, one over each directory; wrk, 16 connections, %d rounds of 3 s in turns), reads a second\t%.0f\t%.0f\t\n",
			routedRead, rr.rounds, rr.small.RPS, rr.big.RPS)
		fmt.Fprintf(tw, "  p50 µs\t%.0f\t%.0f\t\n", rr.small.P50, rr.big.P50)
		fmt.Fprintf(tw, "  p99 µs\t%.0f\t%.0f\t\n", rr.small.P99, rr.big.P99)
		fmt.Fprintf(tw, "  the big directory's router over the small's (median of the rounds' ratios): reads a second, p50\t\t%.2f×, %.2f×\t\n", rr.ratioRPS, rr.ratioP50)
	}
	fmt.Fprintf(tw, "one change until a standby's copy shows it, p50 µs (%d changes)\t%.0f\t%.0f\t\n", cfg.changes, us(pct(small.change, 50)), us(pct(big.change, 50)))
	fmt.Fprintf(tw, "  p99 µs\t%.0f\t%.0f\t\n", us(pct(small.change, 99)), us(pct(big.change, 99)))
	fmt.Fprintf(tw, "region's link (fenec-shard --region eu --global, in process): start until its directory holds the region, ms\t%.0f\t%.0f\t\n", ms(small.linkStart), ms(big.linkStart))
	fmt.Fprintf(tw, "  one change: the global write until the region's copy shows it (from the watch), p50 ms (%d changes)\t%.2f\t%.2f\t\n", cfg.linkChanges, ms(pct(small.linkOne, 50)), ms(pct(big.linkOne, 50)))
	fmt.Fprintf(tw, "  p99 ms\t%.2f\t%.2f\t\n", ms(pct(small.linkOne, 99)), ms(pct(big.linkOne, 99)))
	fmt.Fprintf(tw, "a full sync, as a lost watch falls back to: first (every record written), ms\t%.1f\t%.0f\t\n", ms(small.mirrorFirst), ms(big.mirrorFirst))
	fmt.Fprintf(tw, "  then one change, one full sync (global.Mirror.Sync re-reads both directories whole), p50 ms\t%.2f\t%.0f\t\n", ms(pct(small.mirrorOne, 50)), ms(pct(big.mirrorOne, 50)))
	if err := tw.Flush(); err != nil {
		return err
	}
	os.Stdout.Write(out.Bytes())
	if cfg.out != "" {
		return os.WriteFile(cfg.out, out.Bytes(), 0o644)
	}
	return nil
}

// seedNodes writes region eu and its nodes (records only).
func seedNodes(ctx context.Context, s *global.Store) error {
	if _, err := s.Txn().PutRegion(0, global.Region{Name: "eu", Leaser: global.LeaserGlobal}).Commit(ctx); err != nil {
		return err
	}
	for i := range nodes {
		if _, err := s.Txn().PutNode(nodeName(i), 0, global.Node{Addr: fmt.Sprintf("http://127.0.0.1:%d", 9000+i), Region: "eu"}).Commit(ctx); err != nil {
			return err
		}
	}
	return nil
}

func nodeName(i int) string   { return fmt.Sprintf("n%02d", i) }
func tenantName(i int) string { return fmt.Sprintf("t%06d", i) }

// placeOne places tenant i on its node as the leader does: the node's
// record read, the tenant placed conditioned on it.
func placeOne(ctx context.Context, s *global.Store, i int) error {
	nd := nodeName(i % nodes)
	n, err := s.GetNode(ctx, nd)
	if err != nil {
		return err
	}
	_, err = s.PlaceTenant(ctx, tenantName(i), global.Tenant{Node: nd, State: global.StateActive, Lineage: uint64(i + 1)}, n.Rev)
	return err
}

// placeSeq places tenants from..from+n-1 one at a time; placements a second.
func placeSeq(ctx context.Context, s *global.Store, from, n int) (float64, error) {
	start := time.Now()
	for i := from; i < from+n; i++ {
		if err := placeOne(ctx, s, i); err != nil {
			return 0, err
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// placeParallel places n tenants from from, par at a time.
func placeParallel(ctx context.Context, s *global.Store, from, n, par int) error {
	var next atomic.Int64
	next.Store(int64(from))
	end := int64(from + n)
	var wg sync.WaitGroup
	errs := make([]error, par)
	for w := range par {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= end || ctx.Err() != nil {
					return
				}
				if err := placeOne(ctx, s, int(i)); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// measureSize measures one directory size: a router process's start and
// memory, one copy's heap, changes reaching a copy, the mirror.
func measureSize(ctx context.Context, cfg config, sz *size, s *global.Store, d global.Directory, urls []string, shardBin, dir string) error {
	var err error
	if st, serr := os.Stat(filepath.Join(dir, "etcd", "member", "snap", "db")); serr == nil {
		sz.dbMB = float64(st.Size()) / 1e6
	}
	if sz.startMS, sz.rssMB, err = routerStart(ctx, shardBin, urls, filepath.Join(dir, fmt.Sprintf("router-%d", sz.tenants))); err != nil {
		return err
	}
	w, heap := watcherHeap(ctx, d)
	defer w.Close()
	sz.heapMB = heap
	if got := w.View().NumTenants(); got != sz.tenants {
		return fmt.Errorf("the copy holds %d tenants, want %d", got, sz.tenants)
	}
	if sz.change, err = changes(ctx, s, w, cfg.changes); err != nil {
		return err
	}
	if sz.linkStart, sz.linkOne, err = link(ctx, s, d, filepath.Join(dir, fmt.Sprintf("region-%d", sz.tenants)), sz.tenants, cfg.linkChanges); err != nil {
		return err
	}
	sz.mirrorFirst, sz.mirrorOne, err = mirror(ctx, s, d, 6) // even: tenant 1 ends as it began
	return err
}

// watcherHeap starts a watcher over d and returns it with the Go heap it
// added once ready (after a collection on either side).
func watcherHeap(ctx context.Context, d global.Directory) (*global.Watcher, float64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w := global.StartWatcher(ctx, d, nil)
	<-w.Ready()
	runtime.GC()
	runtime.ReadMemStats(&after)
	return w, float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / 1e6
}

// changes rewrites one tenant's record n times (its replica set and
// cleared in turn, as a repair does) and times each from the write's start
// until w's view shows it.
func changes(ctx context.Context, s *global.Store, w *global.Watcher, n int) ([]time.Duration, error) {
	name := tenantName(0)
	seen := make(chan string, 1)
	unsub := w.OnTenantChange(func(c global.TenantChange) {
		if c.Name == name && c.New != nil {
			select {
			case seen <- c.New.Replica:
			default:
			}
		}
	})
	defer unsub()
	var out []time.Duration
	for i := range n {
		at, err := s.GetTenant(ctx, name)
		if err != nil {
			return nil, err
		}
		want := ""
		if i%2 == 0 {
			want = nodeName(1)
		}
		start := time.Now()
		if _, err := s.UpdateTenant(ctx, name, at, func(t *global.Tenant) error { t.Replica = want; return nil }); err != nil {
			return nil, err
		}
		for {
			select {
			case got := <-seen:
				if got != want {
					continue
				}
			case <-time.After(30 * time.Second):
				return nil, errors.New("a change never reached the copy")
			}
			break
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}

// mirror copies region eu from d into a region directory (in memory, so
// that the sync's own cost shows) and then times n syncs each after one
// change.
func mirror(ctx context.Context, s *global.Store, d global.Directory, n int) (time.Duration, []time.Duration, error) {
	rd := global.NewMemory()
	defer rd.Close()
	to := global.NewStore(rd)
	mm := global.Mirror{From: d, Region: "eu"}
	start := time.Now()
	if _, err := mm.Sync(ctx, to); err != nil {
		return 0, nil, err
	}
	first := time.Since(start)
	name := tenantName(1)
	var out []time.Duration
	for i := range n {
		at, err := s.GetTenant(ctx, name)
		if err != nil {
			return 0, nil, err
		}
		want := ""
		if i%2 == 0 {
			want = nodeName(2)
		}
		if _, err := s.UpdateTenant(ctx, name, at, func(t *global.Tenant) error { t.Replica = want; return nil }); err != nil {
			return 0, nil, err
		}
		start := time.Now()
		res, err := mm.Sync(ctx, to)
		if err != nil {
			return 0, nil, err
		}
		out = append(out, time.Since(start))
		if res.Put != 1 || res.Deleted != 0 {
			return 0, nil, fmt.Errorf("one change synced as %d put, %d deleted", res.Put, res.Deleted)
		}
	}
	return first, out, nil
}

// link starts region eu's leading router (its own embedded member) linked
// to d, times it until its directory holds the region's tenants (every
// one of the bench's), and then times n changes of one tenant from the
// global write until a watcher of the region's directory shows it.
func link(ctx context.Context, s *global.Store, d global.Directory, dir string, tenants, n int) (time.Duration, []time.Duration, error) {
	cfg := region.DefaultConfig()
	cfg.Listen, cfg.Token, cfg.ID, cfg.Region, cfg.Global = "127.0.0.1:0", "bench-router-token", "eu-1", "eu", d
	cfg.Etcd = global.DefaultEmbedConfig(dir)
	cfg.Etcd.ClientURL, cfg.Etcd.PeerURL = "http://127.0.0.1:0", "http://127.0.0.1:0"
	cfg.Logger = slog.New(slog.DiscardHandler)
	start := time.Now()
	rt, err := region.NewRouter(cfg)
	if err != nil {
		return 0, nil, err
	}
	if err := rt.Start(ctx); err != nil {
		return 0, nil, err
	}
	defer rt.Close()
	rd, err := global.OpenEtcd(ctx, rt.DirectoryURLs(), global.DefaultPrefix)
	if err != nil {
		return 0, nil, err
	}
	defer rd.Close()
	w := global.StartWatcher(ctx, rd, nil)
	defer w.Close()
	for {
		if v := w.View(); v != nil && v.NumTenants() == tenants {
			break
		}
		if time.Since(start) > 5*time.Minute {
			return 0, nil, errors.New("the region's directory never held the region")
		}
		select {
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	first := time.Since(start)
	out, err := changes(ctx, s, w, n)
	return first, out, err
}

// lookups times Watcher.Lookup over the small and the big directory's
// copies in turns: the small directory is a memory one holding the same
// records as the member had at 10 tenants.
func lookups(ctx context.Context, d global.Directory, small, big *size) error {
	wb := global.StartWatcher(ctx, d, nil)
	defer wb.Close()
	<-wb.Ready()
	md := global.NewMemory()
	defer md.Close()
	ms := global.NewStore(md)
	for i := range nodes {
		if _, err := ms.Txn().PutNode(nodeName(i), 0, global.Node{Addr: "http://x", Region: "eu"}).Commit(ctx); err != nil {
			return err
		}
	}
	for i := range small.tenants {
		if _, err := ms.Txn().PutTenant(tenantName(i), 0, global.Tenant{Node: nodeName(i % nodes), State: global.StateActive}).Commit(ctx); err != nil {
			return err
		}
	}
	ws := global.StartWatcher(ctx, md, nil)
	defer ws.Close()
	<-ws.Ready()
	names := func(n int) []string {
		out := make([]string, 4096)
		for i := range out {
			out[i] = tenantName((i * 7919) % n)
		}
		return out
	}
	sn, bn := names(small.tenants), names(big.tenants)
	every := make([]string, big.tenants) // every tenant in turn: the cache-cold case
	for i := range every {
		every[i] = tenantName(int((int64(i) * 7919) % int64(big.tenants)))
	}
	const per = 200_000
	var ts, tb, tbs, tbe []float64
	for range 9 {
		for _, c := range []struct {
			w     *global.Watcher
			names []string
			to    *[]float64
		}{{ws, sn, &ts}, {wb, bn, &tb}, {wb, sn, &tbs}, {wb, every, &tbe}} {
			start := time.Now()
			for i := range per {
				if _, _, ok := c.w.Lookup(c.names[i%len(c.names)]); !ok {
					return errors.New("a tenant not found")
				}
			}
			*c.to = append(*c.to, float64(time.Since(start).Nanoseconds())/per)
		}
	}
	small.lookupNS, big.lookupNS = benchkit.Median(ts), benchkit.Median(tb)
	big.lookupFewNS, big.lookupEveryNS = benchkit.Median(tbs), benchkit.Median(tbe)
	return nil
}

// routerStart starts fenec-shard as a standby over the member and times
// it until its /_health says its copy is ready; its resident memory then.
func routerStart(ctx context.Context, bin string, urls []string, dir string) (float64, float64, error) {
	addr, err := benchkit.FreeAddr()
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, bin, "--listen", addr, "--standby", "--id", "bench-standby", "--directory", strings.Join(urls, ","))
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for {
		res, err := hc.Get("http://" + addr + "/_health")
		if err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if strings.Contains(string(b), `"ready":true`) {
				break
			}
		}
		select {
		case <-exited:
			return 0, 0, fmt.Errorf("fenec-shard exited: %s", logs.String())
		case <-time.After(2 * time.Millisecond):
		}
		if time.Since(start) > 2*time.Minute {
			return 0, 0, fmt.Errorf("fenec-shard's copy never ready: %s", logs.String())
		}
	}
	took := time.Since(start)
	return ms(took), rssMB(cmd.Process.Pid), nil
}

// rssMB is a process's resident memory, from /proc.
func rssMB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb float64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb / 1024
		}
	}
	return 0
}

func buildShard(ctx context.Context, dir string) (string, error) {
	gobin := os.Getenv("GO")
	if gobin == "" {
		gobin = "go"
	}
	bin := filepath.Join(dir, "fenec-shard")
	out, err := exec.CommandContext(ctx, gobin, "build", "-o", bin, "./cmd/fenec-shard").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build (run from the repository's root): %w\n%s", err, out)
	}
	return bin, nil
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
