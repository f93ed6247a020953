// Command geo measures what a reader in region us gets for a tenant homed
// in region eu, a wide-area link away, through a router near it
// (fenec-shard --near us) with the tenant's read copy on us1:
//
//	(a) a keyed read stating nothing: it goes to the primary, eu1;
//	(b) the same read with Fenec-Max-Staleness: 1000: the copy answers;
//	(c) read-your-writes: a client in us writes through the router (to
//	    eu1), then reads with Fenec-After and Fenec-History of its write;
//	(d) the staleness the copy states (Fenec-Staleness-Ms) to reads with
//	    Fenec-Max-Staleness (-bound, 1000) while a writer beside eu1
//	    writes at a steady rate, every answer held to it: it
//	    must hold every write acknowledged more than that long before the
//	    read was sent;
//	(e) a read with a bound below the round trip to eu1 (the delay): no
//	    copy can prove it, so it is declined and goes to the primary —
//	    what that costs against (a);
//	(f) what surviving a region costs a write: a writer beside eu1
//	    (through g) writes in turns to z0, which survives its zone (its
//	    voting copy on eu2), and r0, which survives its region (its
//	    voting copy on us1, across the link), both on eu1 under --sync
//	    always: r0's writes against z0's, and r0's p50 less z0's against
//	    the round trip between the regions (twice -delay).
//
// Beside (b), the same read sent straight to us1 and through nginx, a
// plain reverse proxy in front of us1: (b) is held to the first, and the
// second says what a hop through any proxy costs on this machine.
//
// Routers and nodes are processes of their own (fenec-shard, fenec-node,
// built from this checkout), on loopback; the wide-area link (wanLink,
// -delay each way) and the name servers that route each side's lookups
// through it are the bench's, and so are its clients. It prints a table
// and writes it to -out.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/fenec-go/fenec/bench/internal/benchkit"
)

type config struct {
	delay       time.Duration
	reads       int
	rw          int
	tight       int
	cost        int
	steady      time.Duration
	rate        int
	bound       int64
	gap         time.Duration
	pairs       int
	pairClients int
	pairBound   int64
	out         string
	nginx       string // the nginx binary set in front of us1 beside (b), "none": none
	// the binaries the run starts, built once
	nodeBin, shardBin string
}

func main() {
	var cfg config
	small := flag.Bool("small", false, "the smallest run, to see that the bench runs (bench-smoke): -reads 20 -rw 10 -steady 2s -tight 5 -cost 10, each unless given")
	flag.DurationVar(&cfg.delay, "delay", 25*time.Millisecond, "added each way between us and eu (50 ms round trip)")
	flag.IntVar(&cfg.reads, "reads", 300, "reads of (a) and of (b), in turns of a tenth (after a tenth of each to warm up)")
	flag.IntVar(&cfg.tight, "tight", 30, "reads of (e), with a bound of the delay (below the round trip: no copy can prove it)")
	flag.IntVar(&cfg.rw, "rw", 150, "writes each read back in (c) (after a tenth to warm up)")
	flag.IntVar(&cfg.cost, "cost", 200, "writes to each of (f)'s tenants, in turns (after a tenth of each to warm up)")
	flag.DurationVar(&cfg.steady, "steady", 20*time.Second, "how long (d) writes and reads")
	flag.IntVar(&cfg.rate, "rate", 50, "(d)'s writes a second")
	flag.Int64Var(&cfg.bound, "bound", 1000, "(d)'s Fenec-Max-Staleness (ms)")
	flag.DurationVar(&cfg.gap, "gap", 5*time.Millisecond, "(d)'s reader's pause between reads")
	flag.IntVar(&cfg.pairs, "pairs", 10000, "(g)'s write-then-read pairs, eu1 killed after half of them")
	flag.IntVar(&cfg.pairClients, "pair-clients", 16, "(g)'s clients, each writing and reading its own row")
	flag.Int64Var(&cfg.pairBound, "pair-bound", 500, "(g)'s Fenec-Max-Staleness (ms)")
	flag.StringVar(&cfg.out, "out", "bench/geo.txt", "file the table is written to")
	flag.StringVar(&cfg.nginx, "nginx", "nginx", "nginx binary run as a plain reverse proxy in front of us1, (b)'s read through it beside (b) (\"none\": not run)")
	flag.Parse()
	if *small { // what is not given: -small -rw 50 keeps that -rw
		given := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { given[f.Name] = true })
		if !given["reads"] {
			cfg.reads = 20
		}
		if !given["rw"] {
			cfg.rw = 10
		}
		if !given["steady"] {
			cfg.steady = 2 * time.Second
		}
		if !given["tight"] {
			cfg.tight = 5
		}
		if !given["cost"] {
			cfg.cost = 10
		}
		if !given["pairs"] {
			cfg.pairs = 200
		}
		if !given["pair-clients"] {
			cfg.pairClients = 4
		}
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "geo bench:", err)
		os.Exit(1)
	}
}

func run(cfg config) error {
	if cfg.reads < 1 || cfg.rw < 1 || cfg.tight < 1 || cfg.cost < 1 || cfg.rate < 1 || cfg.pairs < 2 || cfg.pairClients < 1 || cfg.pairBound < 1 || cfg.steady <= 0 || cfg.delay <= time.Millisecond {
		return fmt.Errorf("-reads, -rw, -tight, -cost, -rate, -pair-clients, -pair-bound and -steady must be positive, -pairs at least 2, -delay more than 1ms")
	}
	nodeBin, shardBin, remove, err := benchkit.BuildTemp("geo-bench")
	if err != nil {
		return err
	}
	defer remove()
	cfg.nodeBin, cfg.shardBin = nodeBin, shardBin
	began := time.Now()
	loadBefore := benchkit.LoadAvg()

	d, err := startDeployment(cfg)
	defer d.close()
	if err != nil {
		return fmt.Errorf("deployment: %w", err)
	}
	var r results
	if r.far, r.near, r.direct, r.proxied, err = nearFar(d, cfg.reads); err != nil {
		return fmt.Errorf("(a) and (b): %w", err)
	}
	if r.tight, err = tight(d, cfg.tight, cfg.delay.Milliseconds()); err != nil {
		return fmt.Errorf("(e): %w", err)
	}
	next := int64(1)
	if r.ryw, next, err = readYourWrites(d, cfg.rw, next); err != nil {
		return fmt.Errorf("(c): %w", err)
	}
	if r.steady, err = steady(d, cfg.steady, cfg.rate, cfg.bound, cfg.gap, next); err != nil {
		return fmt.Errorf("(d): %w", err)
	}
	if r.zone, r.region, err = survivalCost(d, cfg.cost); err != nil {
		return fmt.Errorf("(f): %w", err)
	}
	if err := benchkit.WaitFor(10*time.Second, d.survivorsPlaced); err != nil {
		return fmt.Errorf("(f)'s tenants after its writes: %w", err)
	}
	if r.pairs, err = pairsRun(d, cfg.pairs, cfg.pairClients, cfg.pairBound); err != nil {
		return fmt.Errorf("(g): %w", err)
	}
	r.began, r.loadBefore, r.loadAfter, r.commit = began, loadBefore, benchkit.LoadAvg(), benchkit.Commit()
	table := report(cfg, r)
	if err := benchkit.Emit(cfg.out, table); err != nil {
		return err
	}
	if n := r.ryw.wrong + r.steady.wrong + r.pairs.after.wrong + r.pairs.bounded.wrong; n > 0 {
		return fmt.Errorf("%d answers missed a write they said they held", n)
	}
	return nil
}
