// Command fenec-node serves a directory of tenant files over HTTP.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/fenec-go/fenec/node"
)

func main() {
	cfg := node.DefaultConfig()
	fs := flag.NewFlagSet("fenec-node", flag.ContinueOnError)
	cfg.AddFlags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := node.Run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "fenec-node:", err)
		os.Exit(1)
	}
}
