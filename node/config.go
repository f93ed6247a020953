package node

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fenec-go/fenec/engine"
	"github.com/fenec-go/fenec/internal/connlimit"
	"github.com/fenec-go/fenec/internal/netx"
	"github.com/fenec-go/fenec/internal/tlsx"
	"github.com/fenec-go/fenec/internal/tokenfile"
	"github.com/fenec-go/fenec/lease"
)

// Config configures one node. Build it with DefaultConfig, adjust it (or
// fill it from flags with AddFlags) and check it with Validate.
type Config struct {
	// Dir holds the tenant files, one <tenant>.fenec each.
	Dir string
	// HTTP is the address to listen on (host:port; port 0 picks one).
	HTTP string

	// AdminToken enables /_admin/ and is the bearer token it needs.
	// Empty: /_admin/ answers 404.
	AdminToken string
	// HTTPToken, if set, is the bearer token data requests need.
	HTTPToken string
	// TokenFiles are the files the tokens were read from (--admin-token-
	// file, --http-token-file, --replication-token-file): each is read
	// again on Reload, and its token replaces the one in use.
	TokenFiles TokenFiles
	// Insecure allows a non-loopback HTTP address with no token or no
	// TLS.
	Insecure bool

	// TLS is the node's certificate, key and CA bundle (--tls-cert,
	// --tls-key, --tls-ca). With a certificate the node serves HTTPS and
	// shows it to the primaries it follows; the bundle verifies those
	// primaries and the client certificates the node is shown. The files
	// are read again on Reload and whenever they change.
	TLS tlsx.Files
	// ClientAuth says which calls need a client certificate the bundle
	// verifies (--tls-client-auth): ClientAuthNone, ClientAuthAdmin
	// (/_admin/ and the replication feeds, beside their tokens) or
	// ClientAuthAll (every connection, at the handshake).
	ClientAuth string
	// TLSWatch is how often the TLS files are looked at for a change (0:
	// tlsx.DefaultWatch).
	TLSWatch time.Duration
	// Reload, when it receives, has the node read its TLS files and its
	// token files again (fenec-node sends on SIGHUP).
	Reload <-chan os.Signal

	// Lease: the node writes a tenant only while a router's lease names
	// it (POST /_admin/lease). Without it the node takes no lease and
	// answers grants 409.
	Lease bool
	// ReplicationToken is the bearer token of the per-tenant replication
	// feeds this node serves, and the one it sends to the nodes it
	// follows. Empty: no feeds are served.
	ReplicationToken string
	// ReplicaOf, if set, is a node (http://host:port) every tenant created
	// here follows.
	ReplicaOf string
	// Resolver is the DNS server (host:port) the names of nodes this node
	// follows are looked up at; empty: the system's way. --resolver.
	Resolver string

	// LeaseClock is the clock leases run on; nil means the boot clock
	// (tests pass a manual one).
	LeaseClock lease.Clock

	// Sync is when appended records reach the disk: "always", "off" or a
	// number of milliseconds between fsyncs.
	Sync string

	// ReplicaWait bounds how long a write under --sync always waits for a
	// copy to acknowledge it before the copy is counted lagging, or, under
	// a lease with the copy in step, before the node asks the router to
	// record it behind (--replica-wait). Under a lease the bound is never
	// more than half the lease the node holds.
	ReplicaWait time.Duration

	// FreshnessInterval is how often a copy asks its primary where it
	// stands, to prove how fresh it is (--freshness-interval), while it is
	// warm — a read asked it for a bound in the last 30 s; otherwise
	// about once a second. 0: a copy proves nothing (Fenec-Max-Staleness
	// is refused on its copies).
	FreshnessInterval time.Duration

	// HugePages has the node ask the kernel for huge pages for a loaded
	// graph's arrays and an installed image's large items (--huge-pages):
	// the whole process's, so it is Run's to apply, not New's.
	HugePages bool

	// IdleClose closes a tenant nobody has used for this long.
	IdleClose time.Duration
	// MaxMemory bounds the memory of the open tenants together, in bytes
	// (0: no bound). Past it, idle tenants are closed least recently used
	// first, and a write to a tenant that alone is past it is refused 507.
	MaxMemory int64
	// IdleTimeout closes a silent keep-alive client connection.
	IdleTimeout time.Duration
	// IdempotencyTTL is how long an Idempotency-Key is kept.
	IdempotencyTTL time.Duration
	// MaxStreams bounds the subscriptions open on one tenant.
	MaxStreams int
	// MaxBody bounds a request body in bytes; larger is 413.
	MaxBody int64
	// MaxImage bounds a tenant image put on the node (an install, a
	// restore) in bytes when the tenant has no bytes quota, which bounds
	// it otherwise; larger is 413, refused as its bytes arrive. 0: no
	// bound. --max-image, in MiB.
	MaxImage int64
	// Conns bounds the client connections open at once, in all and from
	// one address (--max-conns, --max-conns-per-addr).
	Conns connlimit.Limits
	// BodyTimeout cuts a request body that sends no byte for this long
	// (408, the connection closed): the gap between bytes, not the whole,
	// so a large image upload that keeps coming is never cut for its size.
	// It bounds an answer's writes the same way (respWriter).
	BodyTimeout time.Duration
	// MaxStatementTime stops a statement (a request's block, a read) that
	// runs longer, answered 503 saying what to do; a block stopped lands
	// nothing (--max-statement-time; 0: no bound).
	MaxStatementTime time.Duration
	// MaxAnswerMemory bounds the bytes the answers being made and written
	// hold at once, in all (--max-answer-memory; 0: no bound): a read past
	// it is refused 503 with Retry-After before it runs or before its
	// first byte, and one answer that alone would pass it 400 naming
	// limit (answer.go).
	MaxAnswerMemory int64

	// Audit, if set, is a file receiving JSON lines about refusals and
	// admin changes.
	Audit string

	// KeepAlive is how often a quiet subscription gets a comment line.
	KeepAlive time.Duration
	// ShutdownTimeout bounds how long Close waits for requests to finish.
	ShutdownTimeout time.Duration

	// Logger receives the node's logs; nil means slog.Default().
	Logger *slog.Logger
}

// Values of Config.ClientAuth.
const (
	ClientAuthNone  = "none"  // a certificate shown is verified; none is asked for
	ClientAuthAdmin = "admin" // /_admin/ and replication feeds need one
	ClientAuthAll   = "all"   // every connection needs one
)

// defaultReplicaWait is --replica-wait's default.
const defaultReplicaWait = 5 * time.Second

// defaultFreshnessInterval is --freshness-interval's default: a bound
// about a round trip and 25 ms above the primary's own answers.
const defaultFreshnessInterval = 25 * time.Millisecond

// maxFreshnessInterval is the longest --freshness-interval.
const maxFreshnessInterval = time.Minute

// DefaultMaxConns is --max-conns's default: a stranger's flood of idle
// connections is held to a few GB. At start it is lowered to the
// process's descriptor limit less a reserve for the tenant files and the
// node's own connections (connlimit.Limits.Clamped), saying so in the log.
const DefaultMaxConns = 65536

// DefaultMaxConnsPerAddr is --max-conns-per-addr's default: far more than
// any client's pool, and a small share of the total, so that one stranger
// cannot fill the node. A node's own peers — a router whose requests
// prove the admin token, a copy that follows with the replication token
// — are spared it once they proved it (connlimit.Limiter.Trust): they
// hold many connections to it.
const DefaultMaxConnsPerAddr = 256

// DefaultMaxImage is --max-image's default, 64 GiB: a tenant has to fit
// a node's memory, and twice that to open; an image past it is no
// tenant's but a mistake's (a wrong file, a disk image), refused before it
// fills the node's disk.
const DefaultMaxImage = 64 << 30

// DefaultMaxStatementTime is --max-statement-time's default: far above
// what a statement an index serves takes (milliseconds), room for a full
// scan and sort of a tenant of millions of rows, and below the router's
// --upstream-timeout (60 s), so that the client is told by the node what
// to do rather than by the router that it gave up.
const DefaultMaxStatementTime = 30 * time.Second

// DefaultMaxAnswerMemory is --max-answer-memory's default: a streamed
// answer holds 32 KiB and 8 bytes a row, so this is thousands of slow
// readers at once, or a few answers built whole (a lookup's, a group's,
// a /batch's) of tens of MiB.
const DefaultMaxAnswerMemory = 256 << 20

// DefaultConfig returns the defaults API.md names.
func DefaultConfig() Config {
	return Config{
		HTTP:              "127.0.0.1:7070",
		ClientAuth:        ClientAuthNone,
		Sync:              "100",
		ReplicaWait:       defaultReplicaWait,
		FreshnessInterval: defaultFreshnessInterval,
		IdleClose:         300 * time.Second,
		IdleTimeout:       60 * time.Second,
		IdempotencyTTL:    86400 * time.Second,
		MaxStreams:        64,
		MaxBody:           32 << 20,
		MaxImage:          DefaultMaxImage,
		BodyTimeout:       30 * time.Second,
		MaxStatementTime:  DefaultMaxStatementTime,
		MaxAnswerMemory:   DefaultMaxAnswerMemory,
		Conns:             connlimit.Limits{Total: DefaultMaxConns, PerAddr: DefaultMaxConnsPerAddr},
		KeepAlive:         15 * time.Second,
		ShutdownTimeout:   30 * time.Second,
	}
}

// AddFlags binds the node's flags to c, with c's current values as the
// defaults.
func (c *Config) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Dir, "dir", c.Dir, "directory of tenant files (<tenant>.fenec)")
	fs.StringVar(&c.HTTP, "http", c.HTTP, "address to serve HTTP on")
	fs.StringVar(&c.AdminToken, "admin-token", c.AdminToken, "bearer token of /_admin/ (404 without it)")
	tokenfile.FlagPath(fs, "admin-token", &c.AdminToken, &c.TokenFiles.Admin, "the admin token")
	fs.StringVar(&c.HTTPToken, "http-token", c.HTTPToken, "bearer token data requests need (open without it)")
	tokenfile.FlagPath(fs, "http-token", &c.HTTPToken, &c.TokenFiles.HTTP, "the data token")
	fs.BoolVar(&c.Insecure, "insecure", c.Insecure, "allow a non-loopback address with no token or no TLS")
	c.TLS.AddFlags(fs, "tls", "the node's")
	fs.StringVar(&c.ClientAuth, "tls-client-auth", c.ClientAuth, "which calls need a client certificate --tls-ca verifies: none, admin (/_admin/ and replication feeds, beside their tokens) or all")
	fs.BoolVar(&c.Lease, "lease", c.Lease, "take writes only under a router's lease")
	fs.StringVar(&c.ReplicationToken, "replication-token", c.ReplicationToken, "serve and follow per-tenant replication feeds with this token")
	tokenfile.FlagPath(fs, "replication-token", &c.ReplicationToken, &c.TokenFiles.Replication, "the replication token")
	fs.StringVar(&c.ReplicaOf, "replica-of", c.ReplicaOf, "new tenant files on this node follow that node (http://host:port)")
	fs.StringVar(&c.Resolver, "resolver", c.Resolver, "look the names of nodes followed up at the DNS server `HOST:PORT` (default: the system's way)")
	fs.BoolVar(&c.HugePages, "huge-pages", c.HugePages, "ask the kernel for huge pages for loaded graphs and installed images (faster first touch on most hosts, slower on VMs that hand freed memory back: docs/runbook.md)")
	fs.StringVar(&c.Sync, "sync", c.Sync, "always | off | <ms>: fsync before answering, never, or every <ms>")
	fs.Func("replica-wait", "under --sync always, wait S seconds at most for a copy to hold a write before counting it lagging or asking for it to be recorded behind; under --lease never more than half the lease (default 5)", secondsFlag(&c.ReplicaWait))
	fs.Func("freshness-interval", "a copy asks its primary where it stands every S seconds while reads ask it for a bound (else about once a second), to prove its staleness; 0: copies prove none (default 0.025)", secondsFlag(&c.FreshnessInterval))
	fs.Func("idle-close", "close tenants untouched for S seconds (default 300)", secondsFlag(&c.IdleClose))
	fs.Func("max-memory", "MiB the open tenants may hold together; closes idle ones LRU first (0: no bound)", func(s string) error {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("max-memory %q: want a number of MiB", s)
		}
		c.MaxMemory = n << 20
		return nil
	})
	fs.Func("idle-timeout", "close a silent keep-alive client connection after S seconds (default 60)", secondsFlag(&c.IdleTimeout))
	fs.Func("idempotency-ttl", "keep an Idempotency-Key S seconds (default 86400)", secondsFlag(&c.IdempotencyTTL))
	fs.IntVar(&c.MaxStreams, "max-streams", c.MaxStreams, "subscriptions per tenant")
	fs.Int64Var(&c.MaxBody, "max-body", c.MaxBody, "largest request body in bytes (413 past it)")
	fs.Func("max-image", "MiB a tenant image put on the node may hold when the tenant has no bytes quota (413 past it, refused as it arrives; 0: no bound; default 65536)", func(s string) error {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 || n > 1<<43 {
			return fmt.Errorf("max-image %q: want a number of MiB", s)
		}
		c.MaxImage = n << 20
		return nil
	})
	fs.Func("body-timeout", "cut a request body that sends no byte for S seconds (408), and an answer whose write waits S seconds on a client taking no byte (default 30)", secondsFlag(&c.BodyTimeout))
	fs.Func("max-statement-time", "stop a statement still running after S seconds, answered 503 (a block stopped lands nothing; 0: no bound) (default 30)", secondsFlag(&c.MaxStatementTime))
	fs.Func("max-answer-memory", "MiB the answers being made and written may hold at once, in all; past it a read is refused 503 with Retry-After (0: no bound) (default 256)", func(s string) error {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("max-answer-memory %q: want a number of MiB", s)
		}
		c.MaxAnswerMemory = n << 20
		return nil
	})
	c.Conns.AddFlags(fs)
	fs.StringVar(&c.Audit, "audit", c.Audit, "file of JSON lines: refusals and admin changes")
}

// secondsFlag parses a whole or fractional number of seconds into d.
func secondsFlag(d *time.Duration) func(string) error {
	return func(s string) error {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f < 0 {
			return fmt.Errorf("%q: want a number of seconds", s)
		}
		*d = time.Duration(f * float64(time.Second))
		return nil
	}
}

// Validate checks c, fields alone and together.
func (c *Config) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("dir: required"))
	}
	if _, _, err := c.syncMode(); err != nil {
		errs = append(errs, err)
	}
	host, _, err := net.SplitHostPort(c.HTTP)
	if err != nil {
		errs = append(errs, fmt.Errorf("http %q: %w", c.HTTP, err))
	} else if !netx.LoopbackHost(host) && !c.Insecure {
		if c.HTTPToken == "" {
			errs = append(errs, fmt.Errorf("http %q is not a loopback address: set --http-token or --insecure", c.HTTP))
		}
		if !c.TLS.On() {
			errs = append(errs, fmt.Errorf("http %q is not a loopback address and serves no TLS: set --tls-cert and --tls-key (fenec certs makes them), or --insecure", c.HTTP))
		}
		errs = append(errs, c.flagTokens()...)
	}
	if err := c.TLS.Validate(); err != nil {
		errs = append(errs, err)
	}
	switch c.ClientAuth {
	case ClientAuthNone, "":
	case ClientAuthAdmin, ClientAuthAll:
		if !c.TLS.On() || c.TLS.CA == "" {
			errs = append(errs, fmt.Errorf("tls-client-auth %s: needs --tls-cert, --tls-key and --tls-ca (the bundle client certificates are verified against)", c.ClientAuth))
		}
	default:
		errs = append(errs, fmt.Errorf("tls-client-auth %q: want none, admin or all", c.ClientAuth))
	}
	if c.ReplicaWait <= 0 {
		errs = append(errs, errors.New("replica-wait: must be positive"))
	}
	if c.FreshnessInterval < 0 || c.FreshnessInterval > maxFreshnessInterval {
		errs = append(errs, fmt.Errorf("freshness-interval: from 0 to %v", maxFreshnessInterval))
	}
	if c.IdleClose <= 0 {
		errs = append(errs, errors.New("idle-close: must be positive"))
	}
	if c.IdleTimeout <= 0 {
		errs = append(errs, errors.New("idle-timeout: must be positive"))
	}
	if c.IdempotencyTTL < time.Second {
		errs = append(errs, errors.New("idempotency-ttl: at least one second"))
	}
	if c.MaxStreams < 1 {
		errs = append(errs, errors.New("max-streams: at least 1"))
	}
	if c.MaxBody < 1 {
		errs = append(errs, errors.New("max-body: at least 1 byte"))
	}
	if c.BodyTimeout <= 0 {
		errs = append(errs, errors.New("body-timeout: must be positive"))
	}
	if c.MaxStatementTime < 0 {
		errs = append(errs, errors.New("max-statement-time: must not be negative"))
	}
	if c.MaxAnswerMemory < 0 || (c.MaxAnswerMemory > 0 && c.MaxAnswerMemory < 1<<20) {
		errs = append(errs, errors.New("max-answer-memory: at least 1 MiB, or 0 for no bound"))
	}
	if c.MaxMemory < 0 {
		errs = append(errs, errors.New("max-memory: must not be negative"))
	}
	if c.KeepAlive <= 0 || c.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("keep-alive and shutdown timeout: must be positive"))
	}
	if c.Resolver != "" {
		if _, _, err := net.SplitHostPort(c.Resolver); err != nil {
			errs = append(errs, fmt.Errorf("resolver %q: must be host:port: %v", c.Resolver, err))
		}
	}
	if c.ReplicaOf != "" {
		if err := checkFrom(c.ReplicaOf); err != nil {
			errs = append(errs, fmt.Errorf("replica-of: %w", err))
		}
		if c.ReplicationToken == "" {
			errs = append(errs, errors.New("replica-of: needs --replication-token"))
		}
	}
	errs = append(errs, checkTokens(c.AdminToken, c.HTTPToken, c.ReplicationToken)...)
	return errors.Join(errs...)
}

// TokenFiles are the paths the node's tokens were read from ("": the
// token was given on the command line, or not at all).
type TokenFiles struct {
	Admin, HTTP, Replication string
}

// flagTokens refuses, off loopback, a token given on the command line
// (every user of the machine reads it in the process list): each is named
// with the flag that reads it from a file.
func (c *Config) flagTokens() []error {
	var errs []error
	for _, t := range []struct{ flag, token, file string }{
		{"admin-token", c.AdminToken, c.TokenFiles.Admin},
		{"http-token", c.HTTPToken, c.TokenFiles.HTTP},
		{"replication-token", c.ReplicationToken, c.TokenFiles.Replication},
	} {
		if t.token != "" && t.file == "" {
			errs = append(errs, fmt.Errorf("http %q is not a loopback address and --%s was given on the command line, where every user of the machine can read it: give it with --%s-file, or --insecure", c.HTTP, t.flag, t.flag))
		}
	}
	return errs
}

// checkTokens refuses tokens that are one another's.
func checkTokens(admin, data, repl string) []error {
	var errs []error
	if admin != "" && admin == data {
		errs = append(errs, errors.New("admin-token: must differ from http-token"))
	}
	// The replication token goes to every node this one follows and is
	// sent by every node following it: one equal to another token would
	// hand those nodes the data or the admin surface too.
	if repl != "" && repl == admin {
		errs = append(errs, errors.New("replication-token: must differ from admin-token"))
	}
	if repl != "" && repl == data {
		errs = append(errs, errors.New("replication-token: must differ from http-token"))
	}
	return errs
}

// syncMode turns Sync into the engine's options.
func (c *Config) syncMode() (engine.SyncMode, time.Duration, error) {
	switch s := strings.TrimSpace(c.Sync); s {
	case "always":
		return engine.SyncAlways, 0, nil
	case "off":
		return engine.SyncOff, 0, nil
	default:
		ms, err := strconv.Atoi(s)
		if err != nil || ms < 1 {
			return 0, 0, fmt.Errorf("sync %q: want always, off or a number of milliseconds", c.Sync)
		}
		return engine.SyncEvery, time.Duration(ms) * time.Millisecond, nil
	}
}
