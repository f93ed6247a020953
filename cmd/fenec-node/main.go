// Command fenec-node serves a directory of tenant files over HTTP.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/fenec-go/fenec/internal/logx"
	"github.com/fenec-go/fenec/internal/version"
	"github.com/fenec-go/fenec/node"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options is everything the command line sets.
type options struct {
	node    node.Config
	log     logx.Config
	version bool
}

// flagSet binds every flag of fenec-node to o.
func flagSet(o *options, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("fenec-node", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.node.AddFlags(fs)
	o.log.AddFlags(fs)
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	return fs
}

// run parses args, serves until ctx ends, and returns the exit code: 0
// after a clean stop, 2 for bad flags, 1 otherwise.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := options{node: node.DefaultConfig(), log: logx.Default()}
	fs := flagSet(&o, stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if o.version {
		fmt.Fprintln(stdout, version.String("fenec-node"))
		return 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, "fenec-node: unexpected arguments:", fs.Args())
		return 2
	}
	o.node.Logger = o.log.Logger(stderr)
	testHooks(&o)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP) // read the TLS files again
	defer signal.Stop(hup)
	o.node.Reload = hup
	if err := node.Run(ctx, o.node); err != nil {
		fmt.Fprintln(stderr, "fenec-node:", err)
		return 1
	}
	return 0
}
