package global

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/fenec-go/fenec/internal/tlsx"
)

// Cluster states of EmbedConfig.ClusterState.
const (
	ClusterNew      = "new"      // the member founds a cluster with InitialCluster
	ClusterExisting = "existing" // the member joins a running cluster
)

// EmbedConfig says how to run one embedded etcd member.
type EmbedConfig struct {
	// Dir holds the member's data (WAL and snapshots). Required. A member
	// restarted on the same Dir keeps its data and membership.
	Dir string
	// Name is the member's name in InitialCluster (default "fenec").
	Name string
	// ClientURL is where clients reach the member (default
	// http://127.0.0.1:2379). Port 0 picks a free port.
	ClientURL string
	// PeerURL is where the other members reach it (default
	// http://127.0.0.1:2380). Port 0 picks a free port (only for a member
	// alone: the others must know its peer URL in advance).
	PeerURL string
	// ListenClientURL and ListenPeerURL, if set, are where the member
	// listens (an IP address, 0.0.0.0 for every interface), while ClientURL
	// and PeerURL are what it tells the others, which may name the host
	// (http://g1:2380): etcd binds only to addresses. Default: the URLs it
	// tells, which must then be addresses.
	ListenClientURL, ListenPeerURL string
	// InitialCluster lists every founding member, "name=peerURL,..."
	// (default this member alone).
	InitialCluster string
	// ClusterState is ClusterNew or ClusterExisting (default new).
	ClusterState string
	// ForceNewCluster restarts the member on its Dir as a cluster of one,
	// keeping its data: an operator's promotion after quorum was lost.
	ForceNewCluster bool
	// HeartbeatMS and ElectionMS are raft's timing (etcd's defaults, 100 and
	// 1000, when zero).
	HeartbeatMS, ElectionMS uint
	// CompactionRetention keeps this much history for watches (default one
	// hour); a watcher further behind lists again.
	CompactionRetention time.Duration
	// LogLevel is etcd's zap level: debug, info, warn or error (default
	// error, so the member is quiet).
	LogLevel string
	// Log, if set, receives etcd's log lines at LogLevel and above, written
	// by its handler like the server's own; nil: JSON lines on stderr.
	Log *slog.Logger
	// TLS is the member's certificate, key and CA bundle (--etcd-cert,
	// --etcd-key, --etcd-ca), used on whichever of ClientURL and PeerURL
	// is https://: the member serves the certificate there and, with a
	// bundle, takes only clients and peers showing a certificate the
	// bundle verifies. etcd reads the certificate again at every
	// handshake; it reads the bundle once, at start.
	TLS tlsx.Files
}

// DefaultEmbedConfig returns the defaults for a member keeping its data in dir.
func DefaultEmbedConfig(dir string) EmbedConfig {
	return EmbedConfig{
		Dir:                 dir,
		Name:                "fenec",
		ClientURL:           "http://127.0.0.1:2379",
		PeerURL:             "http://127.0.0.1:2380",
		ClusterState:        ClusterNew,
		CompactionRetention: time.Hour,
		LogLevel:            "error",
	}
}

// AddFlags registers the embedded member's flags (API.md §2: --etcd-dir,
// --etcd-name, --etcd-client-url, --etcd-peer-url, --etcd-initial-cluster,
// --etcd-cluster-state, --etcd-force-new-cluster) with c's values as
// defaults. An empty --etcd-dir means no member is embedded.
func (c *EmbedConfig) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Dir, "etcd-dir", c.Dir, "run an embedded etcd member keeping its data in `DIR`")
	fs.StringVar(&c.Name, "etcd-name", c.Name, "the embedded member's name")
	fs.StringVar(&c.ClientURL, "etcd-client-url", c.ClientURL, "`URL` clients reach the embedded member at")
	fs.StringVar(&c.PeerURL, "etcd-peer-url", c.PeerURL, "`URL` the other members reach the embedded member at")
	fs.StringVar(&c.ListenClientURL, "etcd-listen-client-url", c.ListenClientURL, "`URL` the member listens for clients at, an IP address (default: --etcd-client-url)")
	fs.StringVar(&c.ListenPeerURL, "etcd-listen-peer-url", c.ListenPeerURL, "`URL` the member listens for members at, an IP address (default: --etcd-peer-url)")
	fs.StringVar(&c.InitialCluster, "etcd-initial-cluster", c.InitialCluster, "founding members, name=peerURL,... (default: this member alone)")
	fs.StringVar(&c.ClusterState, "etcd-cluster-state", c.ClusterState, "new (found a cluster) or existing (join one)")
	fs.BoolVar(&c.ForceNewCluster, "etcd-force-new-cluster", c.ForceNewCluster, "restart the member as a cluster of one keeping its data, after quorum was lost")
	c.TLS.AddFlags(fs, "etcd", "the directory's (the embedded member's https:// ports, and every etcd client; default --tls-cert's)")
}

// withDefaults fills the zero fields from DefaultEmbedConfig.
func (c EmbedConfig) withDefaults() EmbedConfig {
	d := DefaultEmbedConfig(c.Dir)
	if c.Name == "" {
		c.Name = d.Name
	}
	if c.ClientURL == "" {
		c.ClientURL = d.ClientURL
	}
	if c.PeerURL == "" {
		c.PeerURL = d.PeerURL
	}
	if c.ClusterState == "" {
		c.ClusterState = d.ClusterState
	}
	if c.CompactionRetention == 0 {
		c.CompactionRetention = d.CompactionRetention
	}
	if c.LogLevel == "" {
		c.LogLevel = d.LogLevel
	}
	return c
}

// Validate checks the config (after defaults are applied).
func (c EmbedConfig) Validate() error {
	c = c.withDefaults()
	if c.Dir == "" {
		return fmt.Errorf("embedded etcd: no data dir: %w", ErrEmbedded)
	}
	if c.ClusterState != ClusterNew && c.ClusterState != ClusterExisting {
		return fmt.Errorf("embedded etcd: cluster state %q (want new or existing): %w", c.ClusterState, ErrEmbedded)
	}
	for _, u := range []string{c.ClientURL, c.PeerURL, c.ListenClientURL, c.ListenPeerURL} {
		pu, err := url.Parse(u)
		if err != nil {
			return fmt.Errorf("embedded etcd: url %q: %w", u, err)
		}
		if pu.Scheme == "https" && !c.TLS.On() {
			return fmt.Errorf("embedded etcd: url %q is https: set --etcd-cert and --etcd-key (or --tls-cert and --tls-key): %w", u, ErrEmbedded)
		}
	}
	for _, pair := range [][2]string{{c.ClientURL, c.ListenClientURL}, {c.PeerURL, c.ListenPeerURL}} {
		if pair[1] != "" && strings.HasPrefix(pair[0], "https://") != strings.HasPrefix(pair[1], "https://") {
			return fmt.Errorf("embedded etcd: %q is told and %q listened on: both https:// or neither: %w", pair[0], pair[1], ErrEmbedded)
		}
	}
	if err := c.TLS.Validate(); err != nil {
		return fmt.Errorf("embedded etcd: %w", err)
	}
	if (c.HeartbeatMS == 0) != (c.ElectionMS == 0) || c.ElectionMS < 5*c.HeartbeatMS {
		return fmt.Errorf("embedded etcd: election %d ms must be set with heartbeat %d ms and be at least 5 times it: %w",
			c.ElectionMS, c.HeartbeatMS, ErrEmbedded)
	}
	return nil
}

// Embedded is one etcd member running inside this process. It owns the etcd
// server and the goroutine that watches it; Close stops both.
type Embedded struct {
	cfg    EmbedConfig
	etcd   *embed.Etcd
	ready  chan struct{}
	errc   chan error
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
	// closing silences etcd's log once Close starts.
	closing *atomic.Bool
}

// StartEmbedded starts a member and returns without waiting for it to join
// its cluster (members of a new cluster can only be ready once a quorum of
// them runs): wait on Ready. ctx bounds the start only; the member runs until
// Close.
func StartEmbedded(ctx context.Context, cfg EmbedConfig) (*Embedded, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	var err error
	if cfg.ClientURL, err = pickPort(cfg.ClientURL); err != nil {
		return nil, fmt.Errorf("embedded etcd: client url: %w", err)
	}
	if cfg.PeerURL, err = pickPort(cfg.PeerURL); err != nil {
		return nil, fmt.Errorf("embedded etcd: peer url: %w", err)
	}
	closing := new(atomic.Bool)
	ecfg, err := etcdConfig(cfg, closing)
	if err != nil {
		return nil, err
	}
	e, err := embed.StartEtcd(ecfg)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd %s: %w: %w", cfg.Name, ErrEmbedded, err)
	}
	m := &Embedded{cfg: cfg, etcd: e, ready: make(chan struct{}), errc: make(chan error, 1), closing: closing}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.wg.Go(m.watchServer)
	return m, nil
}

// etcdConfig translates cfg into etcd's own.
func etcdConfig(cfg EmbedConfig, closing *atomic.Bool) (*embed.Config, error) {
	ec := embed.NewConfig()
	ec.Name = cfg.Name
	ec.Dir = cfg.Dir
	cu, err := url.Parse(cfg.ClientURL)
	if err != nil {
		return nil, err
	}
	pu, err := url.Parse(cfg.PeerURL)
	if err != nil {
		return nil, err
	}
	lcu, lpu := *cu, *pu
	if cfg.ListenClientURL != "" {
		u, err := url.Parse(cfg.ListenClientURL)
		if err != nil {
			return nil, err
		}
		lcu = *u
	}
	if cfg.ListenPeerURL != "" {
		u, err := url.Parse(cfg.ListenPeerURL)
		if err != nil {
			return nil, err
		}
		lpu = *u
	}
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{lcu}, []url.URL{*cu}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{lpu}, []url.URL{*pu}
	ec.ClientAutoTLS, ec.PeerAutoTLS = false, false
	if lcu.Scheme == "https" {
		ec.ClientTLSInfo = tlsInfo(cfg.TLS)
		// The member's TLS still requires a client certificate the
		// bundle verifies, at the handshake (etcd's TLS asks for one
		// whenever it has a CA). etcd's client-cert-auth stays off: it
		// would also take a certificate's common name as a user of the
		// directory, and one named "root" would be root. Clients prove
		// themselves with the password (auth.go).
		ec.ClientTLSInfo.ClientCertAuth = false
	}
	if lpu.Scheme == "https" {
		ec.PeerTLSInfo = tlsInfo(cfg.TLS)
	}
	ec.BcryptCost = 4 // bcrypt's lowest: the password is 32 random bytes, not a person's (NewPasswordText)
	ec.InitialCluster = cfg.InitialCluster
	if ec.InitialCluster == "" {
		ec.InitialCluster = cfg.Name + "=" + cfg.PeerURL
	}
	ec.ClusterState = cfg.ClusterState
	ec.InitialClusterToken = "fenec"
	ec.ForceNewCluster = cfg.ForceNewCluster
	if cfg.HeartbeatMS != 0 {
		ec.TickMs, ec.ElectionMs = cfg.HeartbeatMS, cfg.ElectionMS
	}
	ec.AutoCompactionMode = "periodic"
	ec.AutoCompactionRetention = cfg.CompactionRetention.String()
	lg, err := newEtcdLogger(cfg.LogLevel, closing, cfg.Log)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: log level %q: %w", cfg.LogLevel, err)
	}
	ec.LogLevel = cfg.LogLevel
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)
	ec.EnableGRPCGateway = false
	// The client port answers etcd's /metrics and /debug/vars (memory,
	// the process's command line) to whoever reaches it, authenticated or
	// not: not served. The router's /_metrics counts what it does.
	ec.UserHandlers = map[string]http.Handler{"/metrics": notServed{}, "/debug/vars": notServed{}}
	return ec, nil
}

// notServed answers 404 to a path of etcd's the member does not serve.
type notServed struct{}

func (notServed) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	http.Error(w, "not served: this etcd member is a fenec directory's", http.StatusNotFound)
}

// tlsInfo is etcd's TLS settings of a port served with files: the
// certificate, and with a CA bundle, client certificates required and
// verified against it.
func tlsInfo(f tlsx.Files) transport.TLSInfo {
	return transport.TLSInfo{
		CertFile:       f.Cert,
		KeyFile:        f.Key,
		TrustedCAFile:  f.CA,
		ClientCertAuth: f.CA != "",
		MinVersion:     tls.VersionTLS12,
		CipherSuites:   tlsx.Suites,
	}
}

// pickPort replaces port 0 in a URL by a port free right now (etcd must
// advertise the port it listens on, so it cannot bind :0 itself). It picks
// below the kernel's ephemeral range where it can, so that no outgoing
// connection (etcd's members dial each other before all are up) can hold the
// port by the time etcd binds it. Another process could still take it in
// between; tests live with that.
func pickPort(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	if u.Port() != "0" {
		return raw, nil
	}
	lo, hi := 20000, ephemeralStart()
	for range 64 {
		if hi-lo < 1000 {
			break
		}
		port := lo + rand.IntN(hi-lo)
		if !claimPort(port) {
			continue
		}
		addr := net.JoinHostPort(u.Hostname(), strconv.Itoa(port))
		if ln, err := net.Listen("tcp", addr); err == nil {
			if err := ln.Close(); err != nil {
				return "", err
			}
			u.Host = addr
			return u.String(), nil
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(u.Hostname(), "0"))
	if err != nil {
		return "", err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		return "", err
	}
	u.Host = net.JoinHostPort(u.Hostname(), strconv.Itoa(port))
	return u.String(), nil
}

// picked holds the ports pickPort handed out in this process, so two members
// started together never get the same one.
var picked struct {
	sync.Mutex
	ports map[int]bool
}

// claimPort reports whether port was not handed out before, and marks it.
func claimPort(port int) bool {
	picked.Lock()
	defer picked.Unlock()
	if picked.ports == nil {
		picked.ports = map[int]bool{}
	}
	if picked.ports[port] {
		return false
	}
	picked.ports[port] = true
	return true
}

// ephemeralStart returns the first port the kernel hands out to outgoing
// connections (Linux's ip_local_port_range; 32768 where it cannot be read).
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(fields[0])
	if err != nil {
		return 32768
	}
	return n
}

// FreeLocalURL returns http://127.0.0.1:<a port free right now>, for
// members whose peer URLs must be known before any starts.
func FreeLocalURL() (string, error) { return pickPort("http://127.0.0.1:0") }

// watchServer closes ready when the member has joined its cluster and reports
// the member stopping on its own (an error from etcd, or removal) on errc.
func (m *Embedded) watchServer() {
	select {
	case <-m.etcd.Server.ReadyNotify():
		close(m.ready)
	case <-m.etcd.Server.StopNotify():
	case <-m.ctx.Done():
		return
	}
	select {
	case err, ok := <-m.etcd.Err():
		if ok && err != nil && m.ctx.Err() == nil {
			m.report(fmt.Errorf("embedded etcd %s: %w: %w", m.cfg.Name, ErrEmbedded, err))
		}
	case <-m.etcd.Server.StopNotify():
		if m.ctx.Err() == nil {
			m.report(fmt.Errorf("embedded etcd %s stopped: %w", m.cfg.Name, ErrEmbedded))
		}
	case <-m.ctx.Done():
	}
}

func (m *Embedded) report(err error) {
	select {
	case m.errc <- err:
	default:
	}
}

// Ready is closed once the member has joined its cluster and serves clients.
func (m *Embedded) Ready() <-chan struct{} { return m.ready }

// Err receives an error if the member stops on its own before Close.
func (m *Embedded) Err() <-chan error { return m.errc }

// Name returns the member's name.
func (m *Embedded) Name() string { return m.cfg.Name }

// ClientURLs returns the URLs clients reach the member at.
func (m *Embedded) ClientURLs() []string { return []string{m.cfg.ClientURL} }

// PeerURL returns the URL the other members reach this one at.
func (m *Embedded) PeerURL() string { return m.cfg.PeerURL }

// WaitReady waits until the member is ready, it fails, or ctx ends.
func (m *Embedded) WaitReady(ctx context.Context) error {
	select {
	case <-m.ready:
		return nil
	case err := <-m.errc:
		m.report(err)
		return err
	case <-ctx.Done():
		return fmt.Errorf("embedded etcd %s not ready: %w", m.cfg.Name, ctx.Err())
	}
}

// Open returns a directory under prefix served by this member (over
// TLS when its client URL is https: pass WithTLS).
func (m *Embedded) Open(ctx context.Context, prefix string, opts ...EtcdOption) (*EtcdDirectory, error) {
	return OpenEtcd(ctx, m.ClientURLs(), prefix, opts...)
}

// Close stops the member and waits for it. Safe to call more than once.
func (m *Embedded) Close() error {
	m.once.Do(func() {
		m.closing.Store(true)
		m.cancel()
		select {
		case <-m.ready:
		default:
			// etcd's Close waits for its client servers, which wait for
			// the member to be ready or stopping: a member that never
			// became ready (no quorum yet) must be stopped first.
			m.etcd.Server.Stop()
		}
		m.etcd.Close()
		m.wg.Wait()
	})
	return nil
}

// InitialCluster formats members' names and peer URLs as etcd's
// initial-cluster string ("a=http://...,b=http://...").
func InitialCluster(peers map[string]string) string {
	parts := make([]string, 0, len(peers))
	for name, u := range peers {
		parts = append(parts, name+"="+u)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}
