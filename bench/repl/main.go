// Command repl measures what a copy costs and what it buys, as deployed:
// each node and the router a process of its own (fenec-node, fenec-shard
// over its embedded etcd, built from this checkout by go build), this
// program their client over loopback HTTP:
//
//   - write acknowledgement time under --sync always, one keep-alive
//     client: a tenant with one copy (answered once the copy acknowledged
//     the write durable in its own file) against a tenant with none, on the
//     same node and disk, in alternating turns;
//   - reads under --sync always, with a copy and without, alone and with
//     a writer beside them (a read shows no write before the copy holds it,
//     so with a copy it may wait for the copy's ack);
//   - replica lag: from a write sent until the copy's file holds it
//     durably under --sync always (the copy's replication status polled
//     over HTTP, so a poll's round trip is in it; one poll alone is timed
//     beside), and, in turns with it on a second pair of nodes under
//     --sync off, until the copy has applied it: a read of the copy sent
//     beside the write with Fenec-After (the write's seq) is held by the
//     copy and woken as it applies the write, so the figure holds no poll
//     period, only that read's answer (one alone is timed beside);
//   - a failover by hand of a lost node's tenants (20, and 1 000, by
//     default) through fenec-shard, the node killed (SIGKILL, as a
//     machine lost): the whole POST /_shard/nodes/<n>/failover, how it
//     grew with the tenants, and for up to 20 tenants the time from the
//     failover's start until a write through the router succeeds.
//
// It prints a table and writes it to -out.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/fenec-go/fenec/bench/internal/benchkit"
	"github.com/fenec-go/fenec/region"
	"github.com/fenec-go/fenec/wire"
)

const (
	adminToken  = "bench-admin-token"
	replToken   = "bench-repl-token"
	routerToken = "bench-router-token"
)

type config struct {
	warmup, writes, lagWrites int
	tenants                   []int
	out                       string
	failoverOnly              bool
}

func main() {
	var cfg config
	flag.IntVar(&cfg.warmup, "warmup", 200, "writes of warm-up per tenant")
	flag.IntVar(&cfg.writes, "n", 2000, "measured writes per tenant (with a copy, without)")
	flag.IntVar(&cfg.lagWrites, "lag", 500, "writes whose replica lag is measured")
	flag.Func("tenants", "comma-separated counts of tenants failed over by hand, one failover each (default 20,1000)", func(v string) error {
		cfg.tenants = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return fmt.Errorf("tenant count %q", f)
			}
			cfg.tenants = append(cfg.tenants, n)
		}
		return nil
	})
	flag.StringVar(&cfg.out, "out", "bench/repl.txt", "file the table is written to")
	flag.BoolVar(&cfg.failoverOnly, "failover-only", false, "measure the failovers by hand alone (the table printed, no file written unless -out is given)")
	flag.Parse()
	if cfg.failoverOnly && !flagSet("out") {
		cfg.out = ""
	}
	if cfg.tenants == nil {
		cfg.tenants = []int{20, 1000}
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "repl bench:", err)
		os.Exit(1)
	}
}

// flagSet says whether the flag named was given.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func run(cfg config) error {
	dir, err := os.MkdirTemp("", "fenec-repl-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bins := filepath.Join(dir, "bin")
	var p procs
	if p.node, p.shard, err = benchkit.BuildBinaries(context.Background(), bins); err != nil {
		return err
	}
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	defer c.CloseIdleConnections()

	var out bytes.Buffer
	fmt.Fprintf(&out, "fenec replication bench, %s, %s\n", time.Now().UTC().Format(time.DateOnly), benchkit.Machine())
	fmt.Fprintf(&out, "as deployed: each node and the router a process of its own (fenec-node, fenec-shard over its embedded etcd),\n")
	fmt.Fprintf(&out, "this program their client over loopback HTTP; files under %s\n\n", os.TempDir())
	if !cfg.failoverOnly {
		if err := ackAndLag(&out, c, cfg, p, filepath.Join(dir, "ack")); err != nil {
			return err
		}
	}
	var fos []failoverFigures
	for _, n := range cfg.tenants {
		f, err := failover(c, n, p, filepath.Join(dir, fmt.Sprintf("failover-%d", n)))
		if err != nil {
			return err
		}
		fos = append(fos, f)
	}
	if err := failoverTable(&out, fos); err != nil {
		return err
	}
	return benchkit.Emit(cfg.out, out.Bytes())
}

// ackAndLag measures write acknowledgement with and without a copy, and
// the copy's lag.
func ackAndLag(w io.Writer, c *http.Client, cfg config, bins procs, dir string) error {
	p, pu, err := bins.startNode(filepath.Join(dir, "primary"), "always")
	if err != nil {
		return err
	}
	defer p.Stop()
	cp, cu, err := bins.startNode(filepath.Join(dir, "copy"), "100")
	if err != nil {
		return err
	}
	defer cp.Stop()
	for _, t := range []string{"solo", "pair"} {
		if err := mkTenant(c, pu, t); err != nil {
			return err
		}
	}
	ctx := context.Background()
	if err := admin(c, cu).Create(ctx, "pair"); err != nil {
		return err
	}
	if _, err := admin(c, cu).Follow(ctx, "pair", wire.Follow{From: pu}); err != nil {
		return err
	}
	if err := waitCaughtUp(c, pu, cu, "pair"); err != nil {
		return err
	}

	write := func(base, t string, i int) (time.Duration, error) {
		start := time.Now()
		err := call(c, "POST", base+"/t/"+t+"/c", fmt.Sprintf(`{"n":%d}`, i), 201, "", nil)
		return time.Since(start), err
	}
	for i := range cfg.warmup {
		for _, t := range []string{"solo", "pair"} {
			if _, err := write(pu, t, i); err != nil {
				return err
			}
		}
	}
	lat := map[string][]time.Duration{}
	for done := 0; done < cfg.writes; {
		step := min(200, cfg.writes-done)
		for _, t := range []string{"solo", "pair"} {
			for i := range step {
				d, err := write(pu, t, cfg.warmup+done+i)
				if err != nil {
					return err
				}
				lat[t] = append(lat[t], d)
			}
		}
		done += step
	}

	// Lag, in turns with a second pair of nodes under --sync off: a write
	// sent, the copy's status polled until it holds it — durable in its
	// file under --sync always, applied under --sync off (nothing there is
	// ever durable by fsync).
	op, opu, err := bins.startNode(filepath.Join(dir, "off-primary"), "off")
	if err != nil {
		return err
	}
	defer op.Stop()
	ocp, ocu, err := bins.startNode(filepath.Join(dir, "off-copy"), "off")
	if err != nil {
		return err
	}
	defer ocp.Stop()
	if err := mkTenant(c, opu, "pair"); err != nil {
		return err
	}
	if err := call(c, "PUT", ocu+"/_admin/tenants/pair", "", 201, adminToken, nil); err != nil {
		return err
	}
	if err := call(c, "POST", ocu+"/_admin/tenants/pair/follow", `{"from":"`+opu+`"}`, 200, adminToken, nil); err != nil {
		return err
	}
	if err := waitCaughtUp(c, opu, ocu, "pair"); err != nil {
		return err
	}
	for i := range cfg.warmup {
		if _, err := write(opu, "pair", i); err != nil {
			return err
		}
	}
	var lag, answered, lagOff, answeredOff, behindOff []time.Duration
	for i := range cfg.lagWrites {
		l, a, err := lagOnce(c, write, pu, cu, -i, false)
		if err != nil {
			return err
		}
		lag, answered = append(lag, l), append(answered, a)
		if l, a, err = lagOnce(c, write, opu, ocu, -i, true); err != nil {
			return err
		}
		lagOff, answeredOff = append(lagOff, l), append(answeredOff, a)
		behindOff = append(behindOff, l-a)
	}

	// Reads: a read shows no write before the copy holds it, so a read
	// beside a steady writer may wait for the copy's ack.
	reads := map[string][]time.Duration{}
	for _, t := range []string{"solo", "pair"} {
		idle, err := timedReads(c, pu, t, cfg.writes, false)
		if err != nil {
			return err
		}
		busy, err := timedReads(c, pu, t, cfg.writes, true)
		if err != nil {
			return err
		}
		reads[t+" idle"], reads[t+" busy"] = idle, busy
	}

	// What the lag figures hold beyond the copy's own work: a status
	// poll (the durable figure includes up to one, and up to 100 µs
	// between two), and a held read's answer (the applied figure ends with
	// one, here of a write the copy already holds).
	var polls, reads0 []time.Duration
	held, err := status(c, ocu, "pair")
	if err != nil {
		return err
	}
	for range cfg.lagWrites {
		start := time.Now()
		if _, err := status(c, cu, "pair"); err != nil {
			return err
		}
		polls = append(polls, time.Since(start))
		start = time.Now()
		if err := heldRead(c, ocu, held.Seq); err != nil {
			return err
		}
		reads0 = append(reads0, time.Since(start))
	}

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "write acknowledged, --sync always (REST insert, %d each)\tp50 µs\tp99 µs\t\n", cfg.writes)
	solo, pair := lat["solo"], lat["pair"]
	fmt.Fprintf(tw, "no copy\t%s\t%s\t\n", us(pct(solo, 50)), us(pct(solo, 99)))
	fmt.Fprintf(tw, "one copy, acknowledged durable\t%s\t%s\t\n", us(pct(pair, 50)), us(pct(pair, 99)))
	fmt.Fprintf(tw, "ratio one copy / none\t%.2f\t%.2f\t\n",
		float64(pct(pair, 50))/float64(pct(solo, 50)), float64(pct(pair, 99))/float64(pct(solo, 99)))
	fmt.Fprintf(tw, "replica lag: sent until in the copy's file, its status polled (%d writes)\t%s\t%s\t\n", cfg.lagWrites, us(pct(lag, 50)), us(pct(lag, 99)))
	fmt.Fprintf(tw, "  the same writes, answered (the poller beside them)\t%s\t%s\t\n", us(pct(answered, 50)), us(pct(answered, 99)))
	fmt.Fprintf(tw, "  one poll of the copy's status alone (the lag above includes up to one)\t%s\t%s\t\n", us(pct(polls, 50)), us(pct(polls, 99)))
	fmt.Fprintf(tw, "replica lag, --sync off on both: sent until a read on the copy held for it (Fenec-After) answers (%d writes, in turns with the above)\t%s\t%s\t\n", cfg.lagWrites, us(pct(lagOff, 50)), us(pct(lagOff, 99)))
	fmt.Fprintf(tw, "  the same writes, answered (the held read beside them)\t%s\t%s\t\n", us(pct(answeredOff, 50)), us(pct(answeredOff, 99)))
	fmt.Fprintf(tw, "  the copy's answer after the primary's, write by write (each write's lag less its own answer)\t%s\t%s\t\n", us(pct(behindOff, 50)), us(pct(behindOff, 99)))
	fmt.Fprintf(tw, "  one such read alone, of a write the copy holds (the lag above ends with its answer)\t%s\t%s\t\n", us(pct(reads0, 50)), us(pct(reads0, 99)))
	fmt.Fprintln(tw, "\t\t\t")
	fmt.Fprintf(tw, "read by id, --sync always (%d each)\tp50 µs\tp99 µs\t\n", cfg.writes)
	for _, row := range []struct{ key, what string }{
		{"solo idle", "no copy, nothing else running"},
		{"pair idle", "one copy, nothing else running"},
		{"solo busy", "no copy, one writer beside"},
		{"pair busy", "one copy, one writer beside (a read waits for the copy's ack)"},
	} {
		d := reads[row.key]
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", row.what, us(pct(d, 50)), us(pct(d, 99)))
	}
	fmt.Fprintf(tw, "ratio one copy / none, writer beside\t%.2f\t%.2f\t\n",
		float64(pct(reads["pair busy"], 50))/float64(pct(reads["solo busy"], 50)),
		float64(pct(reads["pair busy"], 99))/float64(pct(reads["solo busy"], 99)))
	fmt.Fprintln(tw, "\t\t\t")
	return tw.Flush()
}

// timedReads times n reads of tenant t (a REST read by id), with a
// writer inserting into t beside them when busy.
func timedReads(c *http.Client, base, t string, n int, busy bool) ([]time.Duration, error) {
	stop := make(chan struct{})
	var (
		wg   sync.WaitGroup
		werr error
	)
	if busy {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := call(c, "POST", base+"/t/"+t+"/c", fmt.Sprintf(`{"n":%d}`, -1_000_000-i), 201, "", nil); err != nil {
					werr = err
					return
				}
			}
		})
	}
	ds := make([]time.Duration, 0, n)
	var rerr error
	for range n {
		start := time.Now()
		if rerr = call(c, "GET", base+"/t/"+t+"/c?id=eq.1", "", 200, "", nil); rerr != nil {
			break
		}
		ds = append(ds, time.Since(start))
	}
	close(stop)
	wg.Wait()
	return ds, errors.Join(rerr, werr)
}

// failoverFigures is one failover by hand.
type failoverFigures struct {
	tenants    int
	total      time.Duration   // the whole POST
	firstWrite []time.Duration // from its start until a sampled tenant's write succeeds
	load       string
}

// failoverSample bounds the tenants whose first write after the failover
// is timed: a writer for each of a thousand tenants would load the very
// failover it times.
const failoverSample = 20

// failover places n tenants on node a (standby b), kills a, and fails it
// over by hand through the router.
func failover(c *http.Client, n int, bins procs, dir string) (failoverFigures, error) {
	a, au, err := bins.startNode(filepath.Join(dir, "a"), "always")
	if err != nil {
		return failoverFigures{}, err
	}
	defer a.Stop() // nothing, once killed
	b, bu, err := bins.startNode(filepath.Join(dir, "b"), "always")
	if err != nil {
		return failoverFigures{}, err
	}
	defer b.Stop()
	rt, err := benchkit.StartRouterProc(bins.shard, dir, "bench-failover", "--token", routerToken)
	if err != nil {
		return failoverFigures{}, err
	}
	defer rt.P.Stop()
	ru := rt.URL
	shard := func(method, path, body string, want int, out any) error {
		return call(c, method, ru+"/_shard/"+path, body, want, routerToken, out)
	}
	for _, n := range []struct{ name, addr, extra string }{
		{"a", au, ""}, {"b", bu, ""}, {"a", au, `,"standby":"b"`},
	} {
		body := fmt.Sprintf(`{"addr":%q,"token":%q,"region":"eu"%s}`, n.addr, adminToken, n.extra)
		if err := shard("PUT", "nodes/"+n.name, body, 201, nil); err != nil {
			return failoverFigures{}, err
		}
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("t%04d", i)
		if err := shard("PUT", "tenants/"+names[i], `{"node":"a"}`, 201, nil); err != nil {
			return failoverFigures{}, err
		}
		if err := call(c, "POST", ru+"/t/"+names[i]+"/query", `{"query":"create collection c (n int)"}`, 200, "", nil); err != nil {
			return failoverFigures{}, err
		}
		if err := call(c, "POST", ru+"/t/"+names[i]+"/c", `[{"n":1},{"n":2},{"n":3}]`, 201, "", nil); err != nil {
			return failoverFigures{}, err
		}
	}
	for _, t := range names {
		if err := waitCaughtUp(c, au, bu, t); err != nil {
			return failoverFigures{}, err
		}
	}
	var sample []string
	for i := range min(n, failoverSample) {
		sample = append(sample, names[i*n/min(n, failoverSample)])
	}

	a.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f := failoverFigures{tenants: n, firstWrite: make([]time.Duration, len(sample)), load: benchkit.LoadAvg()}
	start := time.Now()
	var wg sync.WaitGroup
	for i, t := range sample {
		wg.Go(func() {
			for ctx.Err() == nil {
				if call(c, "POST", ru+"/t/"+t+"/c", `{"n":4}`, 201, "", nil) == nil {
					f.firstWrite[i] = time.Since(start)
					return
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	var res region.FailoverResult
	ferr := shard("POST", "nodes/a/failover", "", 200, &res)
	f.total = time.Since(start)
	if ferr != nil {
		cancel()
	}
	wg.Wait()
	if ferr != nil {
		return f, ferr
	}
	if len(res.Promoted) != len(names) {
		return f, fmt.Errorf("failover promoted %d of %d: %+v", len(res.Promoted), len(names), res.Failed)
	}
	for i, t := range sample {
		if f.firstWrite[i] == 0 {
			return f, fmt.Errorf("tenant %s took no write after the failover", t)
		}
	}
	for _, t := range names {
		want := 3
		if slices.Contains(sample, t) {
			want = 4
		}
		var cnt struct{ Count int }
		if err := call(c, "GET", ru+"/t/"+t+"/c?count", "", 200, "", &cnt); err != nil {
			return f, err
		}
		if cnt.Count != want {
			return f, fmt.Errorf("tenant %s holds %d rows after the failover, want %d", t, cnt.Count, want)
		}
	}
	return f, nil
}

// failoverTable prints every failover, and how its time grew with the
// tenants against the first.
func failoverTable(w io.Writer, fos []failoverFigures) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "failover by hand of node a (copies on its standby b, --sync always)\ttenants\twhole ms\tper tenant ms\t×time\t×tenants\tfirst write p50 ms\tlast ms\tload average\t")
	for _, f := range fos {
		fmt.Fprintf(tw, "POST /_shard/nodes/a/failover\t%d\t%.1f\t%.2f\t%.1f\t%.0f\t%.1f\t%.1f\t%s\t\n", f.tenants, ms(f.total),
			ms(f.total)/float64(f.tenants), float64(f.total)/float64(fos[0].total), float64(f.tenants)/float64(fos[0].tenants),
			ms(pct(f.firstWrite, 50)), ms(slices.Max(f.firstWrite)), f.load)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "first write: from the failover's start until a write through the router succeeds, for up to %d tenants spread over the node's;\n", failoverSample)
	fmt.Fprintln(w, "every tenant then read back through the router with all its rows")
	return nil
}

// lagOnce sends one write to tenant pair on primary pu and times it
// until the copy on cu holds it, returning that lag and the write's own
// answer time. Applied: a read of the copy held by Fenec-After until the
// copy's seq reaches the write, sent beside the write, answers as the
// copy applies it (the copy wakes the held read itself: no poll period is
// in the figure, only that read's answer). Durable: the copy's status is
// polled until its file holds the write durably.
func lagOnce(c *http.Client, write func(base, t string, i int) (time.Duration, error), pu, cu string, i int, applied bool) (lag, answered time.Duration, err error) {
	seq, err := status(c, pu, "pair")
	if err != nil {
		return 0, 0, err
	}
	want := seq.Seq + 1
	start := time.Now()
	type result struct {
		d   time.Duration
		err error
	}
	done := make(chan result, 1)
	go func() { d, err := write(pu, "pair", i); done <- result{d, err} }()
	if applied {
		err = heldRead(c, cu, want)
	} else {
		err = pollDurable(c, cu, want)
	}
	lag = time.Since(start)
	r := <-done
	return lag, r.d, errors.Join(err, r.err)
}

// heldRead reads tenant pair on the copy at cu once its seq reaches want.
func heldRead(c *http.Client, cu string, want uint64) error {
	req, err := http.NewRequest("GET", cu+"/t/pair/c?id=eq.1", nil)
	if err != nil {
		return err
	}
	req.Header.Set(wire.HeaderAfter, strconv.FormatUint(want, 10))
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("read held for seq %d on the copy: status %d", want, res.StatusCode)
	}
	return nil
}

// pollDurable polls the copy's status at cu until its file holds want
// durably.
func pollDurable(c *http.Client, cu string, want uint64) error {
	for {
		st, err := status(c, cu, "pair")
		if err != nil || st.Durable >= want {
			return err
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// procs are the programs the bench runs, built from this checkout.
type procs struct{ node, shard string }

// startNode starts fenec-node over dir with --sync syncMode, serving
// replication feeds; it returns the process and its base URL.
func (b procs) startNode(dir, syncMode string) (*benchkit.Proc, string, error) {
	p, addr, err := benchkit.StartNodeProc(b.node, dir, "fenec-node "+filepath.Base(dir), adminToken,
		"--replication-token", replToken, "--sync", syncMode)
	return p, "http://" + addr, err
}

// admin is the admin API of the node at base.
func admin(c *http.Client, base string) *wire.AdminClient {
	return &wire.AdminClient{Base: base, Token: adminToken, HTTP: c}
}

// mkTenant creates tenant t on a node with a collection c (n int).
func mkTenant(c *http.Client, base, t string) error {
	if err := admin(c, base).Create(context.Background(), t); err != nil {
		return err
	}
	return call(c, "POST", base+"/t/"+t+"/query", `{"query":"create collection c (n int)"}`, 200, "", nil)
}

func status(c *http.Client, base, t string) (wire.Replication, error) {
	return admin(c, base).Replication(context.Background(), t)
}

// waitCaughtUp waits until the copy of t on cp holds what p holds.
func waitCaughtUp(c *http.Client, p, cp, t string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		want, err1 := status(c, p, t)
		got, err2 := status(c, cp, t)
		if err := errors.Join(err1, err2); err == nil && got.Role == "replica" &&
			got.Durable == want.Seq && got.History == want.History {
			return nil
		} else if time.Now().After(deadline) {
			return fmt.Errorf("copy of %s at %+v, primary at %+v (%v)", t, got, want, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// call sends one request, wants the status and decodes a JSON answer into
// out (when not nil).
func call(c *http.Client, method, url, body string, want int, token string, out any) error {
	return benchkit.CallJSON(c, method, url, token, body, want, out)
}

// pct is the p-th percentile of ds.
func pct(ds []time.Duration, p int) time.Duration { return benchkit.Percentile(ds, float64(p)/100) }

func us(d time.Duration) string { return fmt.Sprintf("%d", d.Microseconds()) }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
