// Command fenec is the operator's CLI. Talking to a router (FENEC_ROUTER,
// its token from a file or the environment) it lists and changes what the
// directory holds: nodes, tenants, regions, leases, placements, moves,
// failovers, quotas, replicas, the handoff of a region's leasing, a
// read across tenants, and the backup and restore of one tenant. Beside
// those, `fenec dev` runs a node and a router together for trying fenec on
// one machine, `fenec backup`/`restore --tenants DIR` copy every tenant of
// one node, `fenec register` records a node with a router (what a deploy
// runs at start), and `fenec health URL` is a scratch image's health check.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/fenec-go/fenec/internal/tlsx"
	"github.com/fenec-go/fenec/internal/version"
)

// env is what a command reads and writes besides its arguments.
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	// terminal: stderr is a terminal, so progress may be drawn on it.
	terminal bool
	// stdin answers a question (confirm); asked only when interactive:
	// stdin and stderr are both terminals.
	stdin       io.Reader
	interactive bool
	// tls is the --tls-* files, once a command registered them.
	tls *tlsx.Files
}

// runFunc runs a command once its flags are parsed, with its positional
// arguments.
type runFunc func(ctx context.Context, pos []string) error

// command is one subcommand: setup registers its flags on fs and returns
// what runs it with them.
type command struct {
	name    string
	args    string // the usage after "fenec NAME"
	summary string
	setup   func(fs *flag.FlagSet, e *env) runFunc
}

// commands lists every subcommand, in the order the usage shows them.
var commands = []command{
	{"nodes", "[rm NAME]", "list the nodes (or forget one)", setupNodes},
	{"tenants", "[--bytes]", "list the tenants and where they are", setupTenants},
	{"regions", "", "list the regions and who leases each", setupRegions},
	{"leases", "", "each leased node's lease as the leading router sees it", setupLeases},
	{"place", "TENANT [--node N] [--region R]", "create a tenant on a node", setupPlace},
	{"move", "TENANT --to NODE", "move a tenant to another node", setupMove},
	{"survive", "TENANT zone|region [--copy NODE]", "what a tenant must outlive: a node of its region (zone), or its region lost whole (region: its copy in another region)", setupSurvive},
	{"read-copies", "TENANT NODE... | TENANT --regions R1,R2 | TENANT --none", "set a tenant's read copies, on nodes of other regions, or one in each region named (all of them: those not named are dropped)", setupReadCopies},
	{"failover", "NODE [--force]", "promote a node's tenants on their copies", setupFailover},
	{"promote", "", "make the router named by --router (a standby) lead", setupPromote},
	{"quota", "TENANT [--bytes N] [--rows N] ...", "read a tenant's quota, or set it", setupQuota},
	{"replicas", "", "give every tenant without a replica one now", setupReplicas},
	{"handoff", "REGION --to global|region [--force [--even-if-global-answers]]", "hand a region's leasing to the other directory", setupHandoff},
	{"query", "[--tenants a,b] MERGE QUERY", "one read on each tenant, merged", setupQuery},
	{"backup", "TENANT [--file PATH] | NODE_URL --tenants DIR --token T", "one tenant's image through the router, or every tenant of one node", setupBackup},
	{"restore", "TENANT [--file PATH] | NODE_URL --tenants DIR --token T", "put one tenant's image back through the router, or every tenant of one node", setupRestore},
	{"register", "ROUTER_URL --name N --addr URL [--region R] [--wait D]", "record a node with a router", setupRegister},
	{"health", "URL [--ready]", "exit 0 when the server at URL answers its health (or readiness) check", setupHealth},
	{"dev", "[--data DIR] [--listen ADDR]", "a node and a router in this process, for trying fenec", setupDev},
	{"certs", "[--out DIR] [--days N] NAME[=HOST,HOST...] ...", "a CA, a certificate for each name, and the routers' key, for a test or compose cluster", setupCerts},
	{"version", "", "print the version", setupVersion},
}

// lookup finds a command by name.
func lookup(name string) (command, bool) {
	i := slices.IndexFunc(commands, func(c command) bool { return c.name == name })
	if i < 0 {
		return command{}, false
	}
	return commands[i], true
}

// usage is the whole usage text.
func usage() string {
	var b strings.Builder
	b.WriteString("usage: fenec COMMAND [ARGS]\n\n")
	for _, c := range commands {
		line := "fenec " + c.name
		if c.args != "" {
			line += " " + c.args
		}
		fmt.Fprintf(&b, "  %s\n      %s\n", line, c.summary)
	}
	b.WriteString(`
Commands that talk to a router find it at --router or $FENEC_ROUTER, and
read its token from --token-file, $FENEC_ROUTER_TOKEN_FILE or
$FENEC_ROUTER_TOKEN; -o json prints the router's answer as JSON.
"fenec COMMAND -h" lists a command's flags.
`)
	return b.String()
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	e := &env{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, terminal: isTerminal(os.Stderr),
		stdin: os.Stdin, interactive: isTerminal(os.Stdin) && isTerminal(os.Stderr)}
	code := run(ctx, os.Args[1:], e)
	stop()
	os.Exit(code)
}

// run runs one subcommand and returns the exit code: 0 done, 2 a bad
// command line, 1 anything else.
func run(ctx context.Context, args []string, e *env) int {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, usage())
		return 2
	}
	switch args[0] {
	case "help", "-h", "--help":
		fmt.Fprint(e.stdout, usage())
		return 0
	case "--version", "-version":
		fmt.Fprintln(e.stdout, version.String("fenec"))
		return 0
	}
	c, ok := lookup(args[0])
	if !ok {
		fmt.Fprintf(e.stderr, "fenec: unknown command %q\n%s", args[0], usage())
		return 2
	}
	fs := flag.NewFlagSet("fenec "+c.name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fn := c.setup(fs, e)
	pos, err := parseMixed(fs, args[1:])
	if err == nil {
		err = fn(ctx, pos)
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(e.stderr, "fenec %s: %v\n", c.name, err)
		return 2
	default:
		fmt.Fprintf(e.stderr, "fenec %s: %v\n", c.name, err)
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

// wantArgs refuses a command line with other than n positional arguments.
func wantArgs(pos []string, n int, what string) error {
	if len(pos) != n {
		if n == 0 {
			return fmt.Errorf("%w: unexpected arguments %q", errUsage, pos)
		}
		return fmt.Errorf("%w: want %s, got %d arguments", errUsage, what, len(pos))
	}
	return nil
}

// confirm asks question on stderr and reports whether the answer read
// from stdin is yes; with no one to ask (not interactive), it is no.
func (e *env) confirm(question string) bool {
	if !e.interactive || e.stdin == nil {
		return false
	}
	fmt.Fprint(e.stderr, question)
	line, _ := bufio.NewReader(e.stdin).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

// counted is "1 tenant", "2 tenants": n and the noun for it, the plural
// made with an s unless it is given (counted(n, "tenant was", "tenants
// were")).
func counted(n int, one string, many ...string) string {
	if n == 1 {
		return "1 " + one
	}
	if len(many) > 0 {
		return strconv.Itoa(n) + " " + many[0]
	}
	return strconv.Itoa(n) + " " + one + "s"
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// setupVersion is `fenec version`.
func setupVersion(_ *flag.FlagSet, e *env) runFunc {
	return func(_ context.Context, pos []string) error {
		if err := wantArgs(pos, 0, ""); err != nil {
			return err
		}
		fmt.Fprintln(e.stdout, version.String("fenec"))
		return nil
	}
}
