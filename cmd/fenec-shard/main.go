// Command fenec-shard is fenec's router: it forwards each tenant's requests
// to the node holding it and, when it leads, places, moves and deletes
// tenants through /_shard/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/fenec-go/fenec/region"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

// run parses args, serves until ctx ends, and returns the exit code: 0
// after a clean stop, 2 for bad flags or configuration, 1 otherwise.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	cfg := region.DefaultConfig()
	fs := flag.NewFlagSet("fenec-shard", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, "fenec-shard: unexpected arguments:", fs.Args())
		return 2
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(stderr, "fenec-shard:", err)
		return 2
	}
	if err := region.Run(ctx, cfg); err != nil {
		fmt.Fprintln(stderr, "fenec-shard:", err)
		return 1
	}
	return 0
}
