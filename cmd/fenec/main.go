// Command fenec is the operator's CLI: `fenec dev` runs a node and a
// router together for trying fenec on one machine; `fenec backup` and
// `fenec restore` copy every tenant's image off a node and back; `fenec
// register` records a node with a router (what a deploy runs at start).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

const usage = `usage:
  fenec dev [--data DIR] [--listen ADDR]
  fenec backup NODE_URL --tenants DIR --token T
  fenec restore NODE_URL --tenants DIR --token T
  fenec register ROUTER_URL --name N --addr URL --admin-token T [--token T] [--region R] [--wait D]
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs one subcommand and returns the exit code: 0 done, 2 a bad
// command line, 1 anything else.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "dev":
		err = runDev(ctx, args[1:], stdout, stderr)
	case "backup":
		err = runBackup(ctx, args[1:], stdout, stderr)
	case "restore":
		err = runRestore(ctx, args[1:], stdout, stderr)
	case "register":
		err = runRegister(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "fenec: unknown command %q\n%s", args[0], usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "fenec %s: %v\n", args[0], err)
		return 2
	default:
		fmt.Fprintf(stderr, "fenec %s: %v\n", args[0], err)
		return 1
	}
}

// parseMixed parses fs from args where flags and positional arguments
// may come in any order ("backup URL --tenants DIR" as well as
// "backup --tenants DIR URL"), and returns the positional ones.
func parseMixed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// nodeURL turns "host:port" or "http://host:port/" into a base URL.
func nodeURL(s string) string {
	s = strings.TrimRight(s, "/")
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	return s
}
