// Command fenec-node serves a directory of tenant files over HTTP.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/fenec-go/fenec/internal/logx"
	"github.com/fenec-go/fenec/internal/startup"
	"github.com/fenec-go/fenec/node"
)

func main() { startup.Main(run) }

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
	if code, done := startup.Parse(fs, args, &o.version, stdout, stderr); done {
		return code
	}
	o.node.Logger = o.log.Logger(stderr)
	testHooks(&o)
	hup, stopHup := startup.Reload()
	defer stopHup()
	o.node.Reload = hup
	if err := node.Run(ctx, o.node); err != nil {
		fmt.Fprintln(stderr, "fenec-node:", err)
		return 1
	}
	return 0
}
