// Command fenec-shard is fenec's router: it forwards each tenant's requests
// to the node holding it and, when it leads, places, moves and deletes
// tenants through /_shard/.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/fenec-go/fenec/internal/logx"
	"github.com/fenec-go/fenec/internal/profiling"
	"github.com/fenec-go/fenec/internal/startup"
	"github.com/fenec-go/fenec/region"
)

func main() { startup.Main(run) }

// options is everything the command line sets.
type options struct {
	router  region.Config
	log     logx.Config
	version bool
	pprof   string // loopback address of the runtime profiles ("": none)
}

// flagSet binds every flag of fenec-shard to o.
func flagSet(o *options, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("fenec-shard", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.router.AddFlags(fs)
	o.log.AddFlags(fs)
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	fs.StringVar(&o.pprof, "pprof", "", "serve Go's runtime profiles (/debug/pprof/) on loopback `ADDR` (none: not served)")
	return fs
}

// etcdLevel is the embedded member's level for the router's: a step
// quieter (etcd's info is its start-up and every election), warn at least.
func etcdLevel(l slog.Level) string {
	switch {
	case l <= slog.LevelDebug:
		return "info"
	case l <= slog.LevelWarn:
		return "warn"
	}
	return "error"
}

// run parses args, serves until ctx ends, and returns the exit code: 0
// after a clean stop, 2 for bad flags or configuration, 1 otherwise.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := options{router: region.DefaultConfig(), log: logx.Default()}
	fs := flagSet(&o, stderr)
	if code, done := startup.Parse(fs, args, &o.version, stdout, stderr); done {
		return code
	}
	o.router.Logger = o.log.Logger(stderr)
	o.router.Etcd.LogLevel = etcdLevel(o.log.Level)
	testHooks(&o)
	cfg := o.router
	hup, stopHup := startup.Reload()
	defer stopHup()
	cfg.Reload = hup
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(stderr, "fenec-shard:", err)
		return 2
	}
	if o.pprof != "" {
		ps, err := profiling.Start(o.pprof, cfg.Logger)
		if err != nil {
			fmt.Fprintln(stderr, "fenec-shard:", err)
			return 2
		}
		defer ps.Close()
	}
	if err := region.Run(ctx, cfg); err != nil {
		fmt.Fprintln(stderr, "fenec-shard:", err)
		return 1
	}
	return 0
}
