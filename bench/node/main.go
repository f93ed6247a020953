// Command node measures what serving a tenant over HTTP costs: requests
// per second and latency percentiles of a keyed read and a small write,
// through a fenec node on loopback (keep-alive) and against the engine
// called in-process, with 1 and 16 clients, side by side in one run.
//
//	go run ./bench/node [-d 2s] [-docs 10000] [-o bench/node.txt]
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fenec-go/fenec/bench/internal/benchkit"
	"github.com/fenec-go/fenec/engine"
	"github.com/fenec-go/fenec/wire"
)

// result is one measured run.
type result struct {
	ops      int
	elapsed  time.Duration
	p50, p99 time.Duration
}

func (r result) perSec() float64 { return float64(r.ops) / r.elapsed.Seconds() }

// opFunc runs one operation for client c.
type opFunc func(ctx context.Context, c int, rng *rand.Rand) error

func main() {
	dur := flag.Duration("d", time.Second, "time each measurement runs")
	rounds := flag.Int("rounds", 3, "measurements of each side, taken in turns; the median is reported")
	docs := flag.Int("docs", 10000, "documents in the collection")
	out := flag.String("o", "bench/node.txt", "file the table is written to")
	flag.Parse()
	if err := run(*dur, *rounds, *docs, *out); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(dur time.Duration, rounds, docs int, out string) error {
	dir, err := os.MkdirTemp("", "fenec-bench-node-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	// In-process: the engine alone, same sync policy as the node's default.
	db, err := engine.Create(filepath.Join(dir, "inproc.fenec"), engine.Options{Sync: engine.SyncEvery, SyncEvery: 100 * time.Millisecond})
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := populate(ctx, func(q string, p []any) error {
		_, _, err := db.Exec(ctx, engine.Statement{Query: q, Params: p})
		return err
	}, docs); err != nil {
		return err
	}

	// Over HTTP: a node serving its own tenant with the same data.
	const adminToken = "bench-admin"
	srv, err := benchkit.StartNode(filepath.Join(dir, "node"), adminToken, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		return err
	}
	defer srv.Close()
	base := "http://" + srv.Addr()
	tr := &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	if err := (&wire.AdminClient{Base: base, Token: adminToken, HTTP: client}).Create(context.Background(), "bench"); err != nil {
		return err
	}
	if err := populate(ctx, func(q string, p []any) error {
		_, err := post(ctx, client, base+"/t/bench/query", q, p)
		return err
	}, docs); err != nil {
		return err
	}

	const (
		readQ  = "get c where id = $1"
		writeQ = "put c {name: $1, n: $2}"
	)
	type scenario struct {
		name  string
		query string
		args  func(rng *rand.Rand) []any
	}
	scenarios := []scenario{
		{"keyed read", readQ, func(rng *rand.Rand) []any { return []any{rng.IntN(docs) + 1} }},
		{"small write", writeQ, func(rng *rand.Rand) []any { return []any{"w", rng.IntN(1000)} }},
	}
	var table bytes.Buffer
	fmt.Fprintf(&table, "fenec node over HTTP vs the engine in-process (%s, %d CPUs, %d docs, sync every 100 ms)\n",
		runtime.GOOS+"/"+runtime.GOARCH, runtime.NumCPU(), docs)
	fmt.Fprintf(&table, "each cell: the median of %d runs of %s, engine and HTTP taken in turns\n", rounds, dur)
	fmt.Fprintf(&table, "client and node share the machine; %s\n\n", benchkit.Machine())
	fmt.Fprintf(&table, "%-12s %7s | %12s %9s %9s | %12s %9s %9s | %9s %9s\n",
		"op", "clients", "engine op/s", "p50", "p99", "http op/s", "p50", "p99", "op/s ratio", "p50 ratio")
	for _, sc := range scenarios {
		for _, clients := range []int{1, 16} {
			var ins, hps []measured
			for range rounds {
				ins = append(ins, measure(ctx, clients, dur, func(ctx context.Context, _ int, rng *rand.Rand) error {
					_, _, err := db.Exec(ctx, engine.Statement{Query: sc.query, Params: sc.args(rng)})
					return err
				}))
				hps = append(hps, measure(ctx, clients, dur, func(ctx context.Context, _ int, rng *rand.Rand) error {
					_, err := post(ctx, client, base+"/t/bench/query", sc.query, sc.args(rng))
					return err
				}))
			}
			in, hp := median(ins), median(hps)
			if in.err != nil || hp.err != nil {
				return fmt.Errorf("%s: %v %v", sc.name, in.err, hp.err)
			}
			fmt.Fprintf(&table, "%-12s %7d | %12.0f %9s %9s | %12.0f %9s %9s | %9.2fx %8.1fx\n",
				sc.name, clients, in.perSec(), us(in.p50), us(in.p99), hp.perSec(), us(hp.p50), us(hp.p99),
				in.perSec()/hp.perSec(), float64(hp.p50)/float64(max(in.p50, 1)))
		}
	}
	fmt.Fprintf(&table, "\nop/s ratio = engine op/s / http op/s; p50 ratio = http p50 / engine p50.\n")
	return benchkit.Emit(out, table.Bytes())
}

func us(d time.Duration) string { return fmt.Sprintf("%.1fµs", float64(d)/float64(time.Microsecond)) }

// median is the run with the median op/s (or the first error).
func median(ms []measured) measured {
	for _, m := range ms {
		if m.err != nil {
			return m
		}
	}
	slices.SortFunc(ms, func(a, b measured) int {
		switch {
		case a.perSec() < b.perSec():
			return -1
		case a.perSec() > b.perSec():
			return 1
		}
		return 0
	})
	return ms[len(ms)/2]
}

// measured is a run's result or its first error.
type measured struct {
	result
	err error
}

// measure runs op from clients goroutines for dur after a short warm-up.
func measure(ctx context.Context, clients int, dur time.Duration, op opFunc) measured {
	warm := min(dur/10, 200*time.Millisecond)
	lat := make([][]time.Duration, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(warm + dur)
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			for {
				t0 := time.Now()
				if t0.After(stop) {
					return
				}
				if err := op(ctx, c, rng); err != nil {
					errs[c] = err
					return
				}
				if t0.Sub(start) >= warm {
					lat[c] = append(lat[c], time.Since(t0))
				}
			}
		})
	}
	wg.Wait()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	for _, err := range errs {
		if err != nil {
			return measured{err: err}
		}
	}
	slices.Sort(all)
	if len(all) == 0 {
		return measured{err: fmt.Errorf("no operations measured")}
	}
	return measured{result: result{
		ops: len(all), elapsed: dur,
		p50: all[len(all)/2], p99: all[len(all)*99/100],
	}}
}

// populate makes collection c with docs documents.
func populate(ctx context.Context, exec func(string, []any) error, docs int) error {
	if err := exec("create collection c (name text, n int)", nil); err != nil {
		return fmt.Errorf("create collection: %w", err)
	}
	for i := 0; i < docs; i += 1000 {
		batch := make([]any, 0, 1000)
		for j := i; j < min(i+1000, docs); j++ {
			batch = append(batch, map[string]any{"name": fmt.Sprintf("doc%d", j), "n": j})
		}
		if err := exec("put c $1", []any{batch}); err != nil {
			return fmt.Errorf("populate: %w", err)
		}
	}
	return nil
}

// post runs one statement through /query and wants 200.
func post(ctx context.Context, client *http.Client, url, query string, params []any) ([]byte, error) {
	if params == nil {
		params = []any{}
	}
	body, err := json.Marshal(map[string]any{"query": query, "params": params})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %d %s", strings.Fields(query)[0], res.StatusCode, b)
	}
	return b, nil
}
