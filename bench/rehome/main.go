// Command rehome measures the write pause of a tenant moved between
// regions under writes: a tenant of -docs documents of -dims floats each,
// homed on eu1 (region eu), moved to us1 (region us, -delay each way from
// eu) and back, -rounds times, while a client beside the router writes to
// it -rate times a second, each write with its Idempotency-Key and asked
// again after any refusal. Two deployments side by side, identical but
// for the router's --move-image: the old move (the source frozen for the
// copy of its image) and the move by following (the target's copy follows
// the source, which is frozen only for the switch); their moves take
// turns. For each it prints the longest gap between two acknowledged
// writes during a move, how long the move took and how long the router
// says the source refused writes, the refusals the writer met (each asked
// again with its key), and whether every acknowledged write is on the
// tenant's node at the end; then the ratios, old over new.
//
// Nodes and routers are processes of their own (fenec-node, fenec-shard,
// built from this checkout), on loopback; the wide-area link (link, chunks
// delayed side by side) and the name servers that route each side's
// lookups through it are the bench's, and so is the writer. It prints a
// table and writes it to -out.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/fenec-go/fenec/bench/internal/benchkit"
)

type config struct {
	delay  time.Duration
	docs   int
	dims   int
	rate   int
	rounds int
	out    string
	// the binaries the run starts, built once
	nodeBin, shardBin string
}

func main() {
	var cfg config
	small := flag.Bool("small", false, "the smallest run, to see that the bench runs: -docs 2000 -dims 16 -rounds 1, each unless given")
	flag.DurationVar(&cfg.delay, "delay", 25*time.Millisecond, "added each way between eu and us")
	flag.IntVar(&cfg.docs, "docs", 100000, "documents of the tenant moved")
	flag.IntVar(&cfg.dims, "dims", 128, "floats in each document's vector")
	flag.IntVar(&cfg.rate, "rate", 200, "writes a second during the moves")
	flag.IntVar(&cfg.rounds, "rounds", 2, "moves to us1 and back, for each way of moving")
	flag.StringVar(&cfg.out, "out", "bench/rehome.txt", "file the table is written to")
	flag.Parse()
	if *small {
		given := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { given[f.Name] = true })
		if !given["docs"] {
			cfg.docs = 2000
		}
		if !given["dims"] {
			cfg.dims = 16
		}
		if !given["rounds"] {
			cfg.rounds = 1
		}
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "rehome bench:", err)
		os.Exit(1)
	}
}

// modes are the two ways of moving, in the order their moves take turns.
var modes = []string{"image", "follow"}

func run(cfg config) error {
	if cfg.docs < 1 || cfg.dims < 1 || cfg.rate < 1 || cfg.rounds < 1 || cfg.delay <= 0 {
		return fmt.Errorf("-docs, -dims, -rate, -rounds and -delay must be positive")
	}
	nodeBin, shardBin, remove, err := benchkit.BuildTemp("rehome-bench")
	if err != nil {
		return err
	}
	defer remove()
	cfg.nodeBin, cfg.shardBin = nodeBin, shardBin
	began := time.Now()
	loadBefore := benchkit.LoadAvg()

	deps := map[string]*deployment{}
	defer func() {
		for _, d := range deps {
			d.close()
		}
	}()
	for _, mode := range modes {
		d, err := startDeployment(cfg, mode)
		deps[mode] = d
		if err != nil {
			return fmt.Errorf("deployment (%s): %w", mode, err)
		}
		fmt.Fprintf(os.Stderr, "rehome bench: %s deployment loaded (%d bytes)\n", mode, d.bytes)
	}
	for _, mode := range modes {
		deps[mode].startWriter(cfg.rate)
	}
	res := map[string]*results{}
	for _, mode := range modes {
		res[mode] = &results{}
	}
	for round := range cfg.rounds {
		for _, to := range []string{"us1", "eu1"} {
			for _, mode := range modes {
				m, err := deps[mode].move(to)
				if err != nil {
					return fmt.Errorf("round %d, %s move to %s: %w", round+1, mode, to, err)
				}
				res[mode].moves = append(res[mode].moves, m)
				fmt.Fprintf(os.Stderr, "rehome bench: %s to %s: gap %v ending at %d ms (answered at %d), move %d ms, paused %d ms\n",
					mode, to, m.gap, m.gapEnd, m.answer, m.ms, m.pauseMS)
			}
		}
	}
	for _, mode := range modes {
		d := deps[mode]
		d.w.stop()
		r := res[mode]
		r.acked, r.refusals = d.w.summary()
		if r.lost, err = d.lost(); err != nil {
			return fmt.Errorf("%s: read the writes back: %w", mode, err)
		}
		r.bytes = d.bytes
	}
	table := report(cfg, res, began, loadBefore, benchkit.LoadAvg(), benchkit.Commit())
	if err := benchkit.Emit(cfg.out, table); err != nil {
		return err
	}
	for _, mode := range modes {
		if res[mode].lost > 0 {
			return fmt.Errorf("%s: %d acknowledged writes lost", mode, res[mode].lost)
		}
	}
	return nil
}
