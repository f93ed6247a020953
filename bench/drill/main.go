// Command drill is `make drill`: the seed's drill on the three-region
// compose deployment (deploy/compose.yaml, images built by deploy/build.sh). A lease
// of 2 s and an upstream timeout of 4 s on the routers; keyed writers on
// every tenant, through its region's routers; then one node of region eu
// cut off the network (docker network disconnect) and killed. It prints, and
// writes to -out, per run: when the dead node's tenants' writers wrote again
// after the kill, when the global tier's directory showed them failed over,
// acknowledged writes lost (every acknowledged key is read back), requests
// the routers cut by outcome, and the longest pause of the region's other
// tenants against the longest before the cut.
//
// Cases:
//
//   - cut: the node is disconnected and killed; the routers and nodes look
//     names up at Docker's resolver.
//   - resolver: the routers and nodes look names up at the drill's
//     resolver, which never answers a name Docker does not know, and the
//     node is disconnected and removed: its name hangs rather than fails.
//   - region: the global tier stopped and each region leasing its own
//     nodes (a forced handoff to eu's and to us's own router), then the
//     cut. Should a router refuse the handoff, the case reports the
//     refusal and measures nothing.
//   - lost: region eu lost whole (lost.go), with the wide-area delay
//     between the regions (wan.go): tenants on eu's nodes, half set to
//     survive their region with their copy in us, written through us's
//     routers and the global tier's router in us (g2); every container of
//     eu and g1 killed at once, g2 promoted; when each region tenant wrote
//     again, and what the zone tenants' writers were answered.
//   - partitioned: region eu cut off from the others but alive
//     (partition.go), g1 on its side, with the wide-area delay: the lost
//     case's tenants, each written from both sides; g2 promoted; then
//     healed, and every write acknowledged on either side read back.
//   - rehome: tenants moved between eu and us under writers from both
//     (rehome.go), with the wide-area delay: moved out and back cleanly,
//     then moved with g1, the leading router, killed part-way (g2
//     promoted), then moved with the source node cut off part-way; after
//     each move one node takes the tenant's writes, and every write
//     acknowledged is read back at the end. It fails the drill, -check or
//     not, on a lost acknowledged write, a second primary or a move that
//     never settled.
//
// With -wan-hold it runs no case: it puts the wide-area delay on a compose
// project already up (deploy/wan.sh), prints what it measures and holds it
// until interrupted.
//
// Every case's writes are appends to a list a tenant, which its writers
// read as they go (linear.go): after each run porcupine checks each
// tenant's history (-check-timeout a tenant), and a history not
// linearizable — two primaries taking writes at once among what it shows
// — fails the drill, -check or not, its visualization written beside -out.
//
// It is a benchmark, not a test: beyond that it asserts only that no
// acknowledged write was lost and that the dead node's writers wrote again
// (-check, what CI's short form runs).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// knownCases are the cases -cases may name.
var knownCases = []string{"cut", "resolver", "region", "lost", "partitioned", "rehome"}

type config struct {
	cases    []string
	runs     int
	tenants  int           // per node
	after    time.Duration // writers run on this long after the kill
	out      string
	project  string
	check    bool
	keep     bool
	wan      time.Duration // one way's delay between regions (0: none)
	wanCases []string      // the cases run with it
	wanMode  string        // netem, proxy or auto
	wanHold  bool          // put the link on a running project and hold it
	seed     uint64        // the rehome case's random source (its kill and cut delays)

	checkTimeout time.Duration // porcupine's bound on one tenant's history
	visDir       string        // where a history not linearizable is drawn (-out's directory)
}

func main() {
	var cfg config
	cases := flag.String("cases", "cut,resolver,region,lost,partitioned,rehome", "the cases to run, comma-separated: "+strings.Join(knownCases, ", "))
	flag.IntVar(&cfg.runs, "runs", 3, "runs of each case")
	flag.IntVar(&cfg.tenants, "tenants", 3, "tenants placed on each node")
	flag.DurationVar(&cfg.after, "after", 10*time.Second, "how long the writers go on after the kill")
	flag.StringVar(&cfg.out, "out", "bench/drill.txt", "file the table is written to (empty: none)")
	flag.StringVar(&cfg.project, "project", "fenecdrill", "the compose project's name (its containers, network, volumes)")
	flag.BoolVar(&cfg.check, "check", false, "exit 1 if an acknowledged write was lost or a dead node's writer never wrote again")
	flag.BoolVar(&cfg.keep, "keep", false, "leave the last run's deployment up (for a look)")
	flag.DurationVar(&cfg.wan, "wan", 25*time.Millisecond, "the wide-area delay between regions, each way (0: none)")
	flag.Uint64Var(&cfg.seed, "seed", 0, "the seed of the rehome case's kill and cut delays (0: from the clock; the report names it)")
	flag.DurationVar(&cfg.checkTimeout, "check-timeout", time.Minute, "porcupine's bound on one tenant's history: past it the tenant is reported timed out, not linearizable")
	wanCases := flag.String("wan-cases", "lost,partitioned,rehome", "the cases run with the wide-area delay, comma-separated")
	flag.StringVar(&cfg.wanMode, "wan-mode", "auto", "how the delay is put on: netem (tc), proxy (iptables and a delaying proxy in each container's namespace) or auto (netem if the kernel has it)")
	flag.BoolVar(&cfg.wanHold, "wan-hold", false, "put the wide-area delay on the running project -project, measure it and hold it until interrupted; run no case (deploy/wan.sh)")
	flag.Parse()
	if cfg.seed == 0 {
		cfg.seed = uint64(time.Now().UnixNano())
	}
	cfg.cases = strings.Split(*cases, ",")
	for _, c := range cfg.cases {
		if !slices.Contains(knownCases, c) {
			fmt.Fprintf(os.Stderr, "drill: -cases: no case %q (the cases: %s)\n", c, strings.Join(knownCases, ", "))
			os.Exit(2)
		}
	}
	cfg.wanCases = strings.Split(*wanCases, ",")
	switch cfg.wanMode {
	case "netem", "proxy", "auto":
	default:
		fmt.Fprintf(os.Stderr, "drill: -wan-mode %q: netem, proxy or auto\n", cfg.wanMode)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "drill:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	tokens, err := readTokens(filepath.Join(root, "deploy", "tokens"))
	if err != nil {
		return err
	}
	certs, err := loadTLS(root)
	if err != nil {
		return fmt.Errorf("the deployment's certificates (deploy/build.sh makes them): %w", err)
	}
	if cfg.wanHold {
		if cfg.wan <= 0 {
			return errors.New("-wan-hold with no -wan delay")
		}
		d := &deployment{project: cfg.project, file: filepath.Join(root, "deploy", "compose.yaml"), tokens: tokens, tls: certs}
		return holdWAN(ctx, cfg, d, root)
	}
	cfg.visDir = os.TempDir()
	if cfg.out != "" {
		cfg.visDir = filepath.Dir(cfg.out)
		if !filepath.IsAbs(cfg.visDir) {
			cfg.visDir = filepath.Join(root, cfg.visDir)
		}
	}
	var results []result
	var failed, fatal []string
	for _, c := range cfg.cases {
		for i := range cfg.runs {
			d := &deployment{project: cfg.project, file: filepath.Join(root, "deploy", "compose.yaml"), tokens: tokens, tls: certs}
			res, err := runCase(ctx, cfg, d, c, i+1, cfg.keep && i == cfg.runs-1 && c == cfg.cases[len(cfg.cases)-1])
			if err != nil {
				return fmt.Errorf("case %s run %d: %w", c, i+1, err)
			}
			results = append(results, res)
			fmt.Fprintln(os.Stderr, res.line())
			if res.notRun == "" {
				fmt.Fprintf(os.Stderr, "%s #%d: %s\n", res.kase, res.run, res.lin.summary())
			}
			failed = append(failed, res.problems()...)
			if res.rehomeRun != nil {
				fatal = append(fatal, res.problems()...)
			} else {
				fatal = append(fatal, res.lin.problems(res.kase, res.run)...)
			}
			if res.notRun != "" {
				break // the next runs would be refused as this one was
			}
		}
	}
	table := report(cfg, results)
	fmt.Print(table)
	if cfg.out != "" {
		out := cfg.out
		if !filepath.IsAbs(out) {
			out = filepath.Join(root, out)
		}
		if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
			return err
		}
	}
	if cfg.check && len(failed) > 0 {
		return errors.New(strings.Join(failed, "; "))
	}
	if len(fatal) > 0 {
		return errors.New(strings.Join(fatal, "; "))
	}
	return nil
}

// readTokens reads deploy/tokens/ (made by deploy/build.sh).
func readTokens(dir string) (map[string]string, error) {
	out := map[string]string{}
	for _, t := range []string{"router", "admin", "http"} {
		b, err := os.ReadFile(filepath.Join(dir, t))
		if err != nil {
			return nil, fmt.Errorf("%w (run deploy/build.sh first)", err)
		}
		out[t] = strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
	}
	return out, nil
}

// repoRoot is the directory holding go.mod, from here upward.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the fenec repository")
		}
		dir = parent
	}
}
