// Package startup is how fenec's two servers, fenec-node and fenec-shard,
// begin: the end of their context on SIGTERM or SIGINT, their flags
// parsed with -version and stray arguments answered the same way, SIGHUP
// as the signal to read the TLS files again. It is not a flag library and
// holds nothing of either server's configuration.
package startup

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/fenec-go/fenec/internal/version"
)

// Main runs a server's run until it returns, its context ended by SIGTERM
// or SIGINT, and exits with the code it returned.
func Main(run func(ctx context.Context, args []string, stdout, stderr io.Writer) int) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Parse parses args into fs, which binds -version to showVersion. done
// says there is nothing to run, and code is the exit code: 0 for help
// asked, or the version asked (printed to stdout); 2 for a bad flag (fs
// said which) or arguments left over.
func Parse(fs *flag.FlagSet, args []string, showVersion *bool, stdout, stderr io.Writer) (code int, done bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, true
		}
		return 2, true
	}
	if *showVersion {
		fmt.Fprintln(stdout, version.String(fs.Name()))
		return 0, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected arguments: %v\n", fs.Name(), fs.Args())
		return 2, true
	}
	return 0, false
}

// Reload returns a channel that receives SIGHUP, the signal to read the
// TLS files again, until stop is called.
func Reload() (hup <-chan os.Signal, stop func()) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGHUP)
	return c, func() { signal.Stop(c) }
}
