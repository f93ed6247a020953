package region

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/connlimit"
	"github.com/fenec-go/fenec/internal/flagx"
	"github.com/fenec-go/fenec/internal/tlsx"
	"github.com/fenec-go/fenec/internal/tokenfile"
	"github.com/fenec-go/fenec/region/forward"
	"github.com/fenec-go/fenec/region/trust"
)

// Config is one router's configuration (API.md §2). Build it with
// DefaultConfig, fill it from flags with AddFlags, check it with Validate.
type Config struct {
	// Listen is the address the router serves on (host:port; port 0 picks
	// one). --listen.
	Listen string
	// Token is the bearer token /_shard/ and /_metrics need. Empty leaves
	// them open, which only a loopback Listen (or Insecure) allows. --token.
	Token string
	// TokenFile is the file Token was read from (--token-file): read again
	// on Reload, its token replaces the one in use.
	TokenFile string
	// Insecure allows a non-loopback Listen with no Token or no TLS, and
	// non-loopback etcd URLs with no TLS or no client certificates.
	// --insecure.
	Insecure bool

	// TLS is the router's certificate, key and CA bundle (--tls-cert,
	// --tls-key, --tls-ca). With a certificate the listener serves HTTPS;
	// the certificate is also shown to the nodes the router calls
	// (mutual TLS, where nodes ask) and to etcd unless Etcd.TLS names
	// other files. The bundle verifies nodes addressed https:// and the
	// client certificates the listener is shown. Read again on Reload and
	// whenever the files change.
	TLS tlsx.Files
	// ClientAuth says which calls need a client certificate the bundle
	// verifies (--tls-client-auth): ClientAuthNone, ClientAuthAdmin
	// (/_shard/ and /_metrics, beside the token) or ClientAuthAll.
	ClientAuth string
	// TLSWatch is how often the TLS files are looked at for a change (0:
	// tlsx.DefaultWatch).
	TLSWatch time.Duration
	// Reload, when it receives, has the router read its TLS files again
	// (fenec-shard sends on SIGHUP).
	Reload <-chan os.Signal
	// ID is this router's name in the leader record ([a-z0-9_-]{1,64}).
	// Empty: the host name and the listening port. --id.
	ID string

	// Etcd runs an embedded etcd member holding the directory (--etcd-*).
	// Used unless DirectoryURLs names an existing cluster.
	Etcd global.EmbedConfig
	// DirectoryURLs are an existing etcd cluster's client URLs; when set,
	// no member is embedded. --directory (comma-separated).
	DirectoryURLs []string
	// DirectoryKeyFile is the routers' key file (--directory-key-file):
	// node tokens are sealed under its first key in the directory, and
	// opened with any of its keys (global.Sealing). Every router of a
	// deployment reads the same file. Required when the directory is off
	// loopback, unless Insecure. Empty, on a router embedding a member:
	// the file kept in its --etcd-dir (KeyFileName), made there when it
	// founds a directory alone.
	DirectoryKeyFile string
	// DirectoryPasswordFile is the file holding the directory's etcd
	// password (--directory-password-file): every etcd client the router
	// opens authenticates with it, and a new directory takes no other
	// client from its first start. Every router of a deployment reads the
	// same file. Empty, on a router embedding a member: the file kept in
	// its --etcd-dir (PasswordFileName), made there when it founds a
	// directory alone.
	DirectoryPasswordFile string
	// CloseDirectory turns on the authentication of a directory made
	// before directories were closed at their first start (and makes the
	// key and password in --etcd-dir where no file is given); every other
	// router of the deployment needs the same files first.
	// --close-directory.
	CloseDirectory bool
	// Prefix is where fenec's keys live in etcd (default /fenec/).
	Prefix string
	// Directory, if set, is used as the directory as it is (tests); the
	// router does not close it. It overrides Etcd and DirectoryURLs.
	Directory global.Directory

	// Region is the region this router serves; tenants it places without
	// a named node or region go to that region's nodes. Empty: the global
	// tier, every region's nodes. --region.
	Region string
	// GlobalURLs, set on a region's routers (with Region), are the global
	// directory's etcd client URLs: the region's leading router links its
	// own directory to it (docs/regions.md) — copying the region's records
	// down while the global tier leases the region, which the region's
	// routers forward from, and up while the region leases its own nodes
	// (with AutoFailover), when it takes the region's changes. --global.
	GlobalURLs []string
	// Global, if set with Region, is used as the global directory as it is
	// (tests); the router does not close it. It overrides GlobalURLs.
	Global global.Directory
	// Near is the region this router's readers are in: a read that
	// states a bound (Fenec-Max-Staleness, Fenec-After) goes first to the
	// tenant's read copy on a node of that region, if it has one
	// (docs/regions.md, "Reads near the reader"). Empty: every read goes
	// to the primary. --near.
	Near string
	// Standby never claims the lead on its own: it forwards, answers
	// /_shard/ reads, and leads only once promoted. --standby.
	Standby bool

	// Forward bounds the forwarding path (--upstream-timeout, --idle-timeout).
	Forward forward.Config
	// Conns bounds the client connections open at once, in all and from
	// one address (--max-conns, --max-conns-per-addr).
	Conns connlimit.Limits
	// NodeTimeout bounds one admin call to a node (a token check, sizes,
	// create, delete, freeze, thaw). Default 10 s.
	NodeTimeout time.Duration
	// MoveTimeout bounds a whole move, image copy included. Default 30 min.
	MoveTimeout time.Duration
	// MoveImage moves a tenant by copying its image with the source
	// frozen (writes pause for the whole copy), as fenec did before moves
	// by following; a target without a replication token is always moved
	// so. For comparison. --move-image.
	MoveImage bool
	// TestMovePause, for tests alone, holds every move at that step
	// (global.MoveFollowing, MoveSwitching, MovePromoting) until the
	// router stops, so that a test can kill it there. Only a fenec-shard
	// built with the tag nemesis sets it, from the environment
	// (FENEC_TEST_MOVE_PAUSE); empty: never.
	TestMovePause string
	// Replicas gives each tenant a following copy on another node of its
	// region. --replicas.
	Replicas bool
	// AutoFailover, when positive, leases each node recorded as taking
	// leases the tenants placed there for this long while this router
	// leads, and fails over a node whose lease lapsed. --auto-failover
	// (seconds).
	AutoFailover time.Duration
	// SizesParallel bounds how many nodes are asked their sizes at once.
	// Default 8.
	SizesParallel int

	// Audit, if set, is a file receiving a JSON line for every change and
	// refusal. --audit.
	Audit string

	// Logger receives the router's logs; nil discards them.
	Logger *slog.Logger
}

// Values of Config.ClientAuth (package region/trust's).
const (
	ClientAuthNone  = trust.ClientAuthNone  // a certificate shown is verified; none is asked for
	ClientAuthAdmin = trust.ClientAuthAdmin // /_shard/ and /_metrics need one
	ClientAuthAll   = trust.ClientAuthAll   // every connection needs one
)

// Names of the files a router keeps in its --etcd-dir when it made the
// directory's key and password (package region/trust's).
const (
	KeyFileName      = trust.KeyFileName
	PasswordFileName = trust.PasswordFileName
)

// trustConfig is what package region/trust takes of c.
func (c Config) trustConfig() trust.Config {
	return trust.Config{
		Listen: c.Listen, Token: c.Token, TokenFile: c.TokenFile, Insecure: c.Insecure,
		TLS: c.TLS, ClientAuth: c.ClientAuth, TLSWatch: c.TLSWatch, Reload: c.Reload, Resolver: c.Forward.Resolver,
		Etcd: c.Etcd, DirectoryURLs: c.DirectoryURLs, DirectoryGiven: c.Directory != nil,
		GlobalURLs: c.GlobalURLs, Global: c.Global,
		KeyFile: c.DirectoryKeyFile, PasswordFile: c.DirectoryPasswordFile, CloseDirectory: c.CloseDirectory, Prefix: c.Prefix,
	}
}

// DefaultConfig returns the defaults API.md names: an embedded member in
// ./data/shard, the forwarding defaults.
func DefaultConfig() Config {
	return Config{
		Listen:        "127.0.0.1:7700",
		ClientAuth:    ClientAuthNone,
		Etcd:          global.DefaultEmbedConfig("data/shard"),
		Prefix:        global.DefaultPrefix,
		Forward:       forward.DefaultConfig(),
		Conns:         connlimit.Limits{Total: DefaultMaxConns, PerAddr: DefaultMaxConnsPerAddr},
		NodeTimeout:   10 * time.Second,
		MoveTimeout:   30 * time.Minute,
		SizesParallel: 8,
	}
}

// The router's connection bounds by default. An idle client connection
// costs the router a few tens of KB, so the total keeps a stranger's
// flood of them to a few GB and leaves descriptors for the nodes and the
// directory; one address may hold a sixty-fourth of it, far more than an
// application's pool, so one stranger alone cannot fill it. Clients
// behind one proxy share its address: such a deployment raises the
// address's bound or sets it to 0.
const (
	DefaultMaxConns        = 65536
	DefaultMaxConnsPerAddr = 1024
)

// AddFlags registers the router's flags with c's values as defaults.
func (c *Config) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Listen, "listen", c.Listen, "`ADDR` to serve on (host:port)")
	fs.StringVar(&c.Token, "token", c.Token, "bearer `TOKEN` that /_shard/ and /_metrics need")
	tokenfile.FlagPath(fs, "token", &c.Token, &c.TokenFile, "the router token")
	fs.BoolVar(&c.Insecure, "insecure", c.Insecure, "allow a non-loopback address with no token or no TLS, and non-loopback etcd URLs without TLS")
	c.TLS.AddFlags(fs, "tls", "the router's")
	fs.StringVar(&c.ClientAuth, "tls-client-auth", c.ClientAuth, "which calls need a client certificate --tls-ca verifies: none, admin (/_shard/ and /_metrics, beside the token) or all")
	fs.StringVar(&c.ID, "id", c.ID, "this router's `NAME` in the leader record (default: host name and port)")
	c.Etcd.AddFlags(fs)
	fs.Func("directory", "use the existing etcd cluster at `URLS` (comma-separated) instead of embedding one", urlList(&c.DirectoryURLs))
	fs.StringVar(&c.DirectoryKeyFile, "directory-key-file", c.DirectoryKeyFile, "seal node tokens in the directory under the key in `PATH` (base64 of 32 bytes a line: the first seals, any opens); every router needs the same file (default: directory.key in --etcd-dir, made by a router founding a directory alone)")
	fs.StringVar(&c.DirectoryPasswordFile, "directory-password-file", c.DirectoryPasswordFile, "authenticate to the directory's etcd (and the global one) as root with the password on the first line of `PATH`; every router needs the same file (default: directory.password in --etcd-dir, made by a router founding a directory alone)")
	fs.BoolVar(&c.CloseDirectory, "close-directory", c.CloseDirectory, "turn on the authentication of a directory made before directories were closed at their first start (key and password made in --etcd-dir where no file is given): give every other router the same files first")
	fs.StringVar(&c.Region, "region", c.Region, "serve `REGION` (none: the global tier)")
	fs.Func("global", "(a region's leading router) mirror the region from the global directory at `URLS` (comma-separated etcd client URLs)", urlList(&c.GlobalURLs))
	fs.StringVar(&c.Near, "near", c.Near, "send reads that state a staleness bound or a seq first to the tenant's read copy on a node of `REGION`, this router's readers' region (none: every read to the primary)")
	fs.BoolVar(&c.Standby, "standby", c.Standby, "never claim the lead on its own; forward and wait for POST /_shard/promote")
	fs.BoolVar(&c.Replicas, "replicas", c.Replicas, "give each tenant a replica on another node of its region")
	fs.BoolVar(&c.MoveImage, "move-image", c.MoveImage, "move tenants by copying the image with the source frozen (writes pause for the whole copy) instead of by a following copy; for comparison")
	fs.Var((*flagx.Seconds)(&c.AutoFailover), "auto-failover", "lease each node for `S` seconds; fail over lost ones (0: never)")
	c.Forward.AddFlags(fs)
	c.Conns.AddFlags(fs)
	fs.StringVar(&c.Audit, "audit", c.Audit, "append a JSON line for every change and refusal to `PATH`")
}

// urlList parses a comma-separated list of URLs into *dst.
func urlList(dst *[]string) func(string) error {
	return func(v string) error {
		*dst = nil
		for _, u := range strings.Split(v, ",") {
			if u = strings.TrimSpace(u); u != "" {
				*dst = append(*dst, u)
			}
		}
		return nil
	}
}

// Validate checks every field and how they fit together.
func (c Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("%w: listen %q: %v", ErrBadConfig, c.Listen, err)
	}
	if err := c.trustConfig().CheckTLS(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	if c.ID != "" && !global.ValidName(c.ID) {
		return fmt.Errorf("%w: id %q must be [a-z0-9_-]{1,64}", ErrBadConfig, c.ID)
	}
	if c.Region != "" && !global.ValidName(c.Region) {
		return fmt.Errorf("%w: region %q must be [a-z0-9_-]{1,64}", ErrBadConfig, c.Region)
	}
	if c.Near != "" && !global.ValidName(c.Near) {
		return fmt.Errorf("%w: --near %q must be a region's name, [a-z0-9_-]{1,64}", ErrBadConfig, c.Near)
	}
	if c.Directory == nil && len(c.DirectoryURLs) == 0 {
		e := c.Etcd
		e.TLS = c.trustConfig().EtcdFiles()
		if err := e.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrBadConfig, err)
		}
	}
	if c.CloseDirectory && len(c.DirectoryURLs) > 0 && c.DirectoryPasswordFile == "" {
		return fmt.Errorf("%w: --close-directory with --directory needs --directory-password-file: the password every router of the deployment reads", ErrBadConfig)
	}
	if c.Directory == nil && len(c.DirectoryURLs) > 0 && c.Etcd.ForceNewCluster {
		return fmt.Errorf("%w: --etcd-force-new-cluster needs an embedded member, not --directory", ErrBadConfig)
	}
	if err := c.Forward.Validate(); err != nil {
		return err
	}
	switch {
	case c.NodeTimeout <= 0:
		return fmt.Errorf("%w: node timeout must be positive", ErrBadConfig)
	case c.MoveTimeout < c.NodeTimeout:
		return fmt.Errorf("%w: move timeout %v below the node timeout %v", ErrBadConfig, c.MoveTimeout, c.NodeTimeout)
	case c.TestMovePause != "" && c.TestMovePause != global.MoveFollowing &&
		c.TestMovePause != global.MoveSwitching && c.TestMovePause != global.MovePromoting:
		return fmt.Errorf("%w: a move's test pause %q: want %s, %s or %s (FENEC_TEST_MOVE_PAUSE)", ErrBadConfig,
			c.TestMovePause, global.MoveFollowing, global.MoveSwitching, global.MovePromoting)
	case c.SizesParallel <= 0:
		return fmt.Errorf("%w: sizes parallelism must be positive", ErrBadConfig)
	case (len(c.GlobalURLs) > 0 || c.Global != nil) && c.Region == "":
		return fmt.Errorf("%w: --global mirrors one region: name it with --region", ErrBadConfig)
	case c.AutoFailover < 0 || (c.AutoFailover > 0 && c.AutoFailover < 30*time.Millisecond):
		return fmt.Errorf("%w: --auto-failover %v: at least 0.03 s, or 0", ErrBadConfig, c.AutoFailover)
	}
	return c.trustConfig().CheckExposure()
}

// defaultID makes a router name from the host name and the port it
// listens on, folded into [a-z0-9_-].
func defaultID(addr net.Addr) string {
	host, _ := os.Hostname()
	_, port, _ := net.SplitHostPort(addr.String())
	var b strings.Builder
	for _, r := range strings.ToLower(host) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	name := b.String()
	if name == "" {
		name = "router"
	}
	if len(name) > 64-1-len(port) {
		name = name[:64-1-len(port)]
	}
	return name + "-" + port
}
