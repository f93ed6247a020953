// Command drill is `make drill`: the seed's drill on the two-region compose
// deployment (deploy/compose.yaml, images built by deploy/build.sh). A lease
// of 2 s and an upstream timeout of 4 s on the routers; keyed writers on
// every tenant, through both regions' routers; then one node of region eu
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
//
// It is a benchmark, not a test: it asserts only that no acknowledged write
// was lost and that the dead node's writers wrote again (-check, what CI's
// short form runs).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

type config struct {
	cases   []string
	runs    int
	tenants int           // per node
	after   time.Duration // writers run on this long after the kill
	out     string
	project string
	check   bool
	keep    bool
}

func main() {
	var cfg config
	cases := flag.String("cases", "cut,resolver,region", "the cases to run, comma-separated: cut, resolver, region")
	flag.IntVar(&cfg.runs, "runs", 3, "runs of each case")
	flag.IntVar(&cfg.tenants, "tenants", 3, "tenants placed on each node")
	flag.DurationVar(&cfg.after, "after", 10*time.Second, "how long the writers go on after the kill")
	flag.StringVar(&cfg.out, "out", "bench/drill.txt", "file the table is written to (empty: none)")
	flag.StringVar(&cfg.project, "project", "fenecdrill", "the compose project's name (its containers, network, volumes)")
	flag.BoolVar(&cfg.check, "check", false, "exit 1 if an acknowledged write was lost or a dead node's writer never wrote again")
	flag.BoolVar(&cfg.keep, "keep", false, "leave the last run's deployment up (for a look)")
	flag.Parse()
	cfg.cases = strings.Split(*cases, ",")

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
	var results []result
	var failed []string
	for _, c := range cfg.cases {
		for i := range cfg.runs {
			d := &deployment{project: cfg.project, file: filepath.Join(root, "deploy", "compose.yaml"), tokens: tokens, tls: certs}
			res, err := runCase(ctx, cfg, d, c, i+1, cfg.keep && i == cfg.runs-1 && c == cfg.cases[len(cfg.cases)-1])
			if err != nil {
				return fmt.Errorf("case %s run %d: %w", c, i+1, err)
			}
			results = append(results, res)
			fmt.Fprintln(os.Stderr, res.line())
			failed = append(failed, res.problems()...)
			if res.notRun != "" {
				break // the next runs would be refused as this one was
			}
		}
	}
	table := report(cfg, results)
	fmt.Print(table)
	if cfg.out != "" {
		if err := os.WriteFile(filepath.Join(root, cfg.out), []byte(table), 0o644); err != nil {
			return err
		}
	}
	if cfg.check && len(failed) > 0 {
		return errors.New(strings.Join(failed, "; "))
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
