package trust

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/badtoken"
	"github.com/fenec-go/fenec/internal/netx"
	"github.com/fenec-go/fenec/internal/rawtcp"
	"github.com/fenec-go/fenec/internal/tlsx"
	"github.com/fenec-go/fenec/internal/tokenfile"
)

// Deps are everything the trust uses of the router beside its Config.
type Deps struct {
	// Log receives what the trust says until Named gives it the router's
	// own logger.
	Log *slog.Logger
	// Go runs job on a goroutine the router owns, with a context that
	// ends as the router closes (a check of the directory's seals put off
	// until the directory answers).
	Go func(job func(ctx context.Context))
	// Changes is the lead's store, fenced on the term this router leads
	// at (SealClearNodes writes through it); Settle waits, bounded, until
	// the router's view of its directory holds rev.
	Changes func(ctx context.Context) (*global.Store, error)
	Settle  func(ctx context.Context, rev int64)
}

// Trust is what a router holds to be trusted and to trust: its
// certificate and CA bundle, the directory's key and password, the router
// token and its bad-token back-off. Load builds it as the router starts.
type Trust struct {
	cfg  Config
	deps Deps
	// id and log are the router's name and logger once Named (before: ""
	// and deps.Log). Set once, before the router serves.
	id  string
	log *slog.Logger

	// tls is the router's certificate and CA bundle (its listener, its
	// calls to nodes); etcdTLS the directory's links' (tls itself unless
	// --etcd-* names other files). Both reloaded.
	tls, etcdTLS *tlsx.Source
	// tok is the router token in use once its file was read again (nil:
	// cfg.Token).
	tok atomic.Pointer[string]
	// keys seal node tokens in the directory (nil: held in clear);
	// password is the directory's etcd password ("": none). Set at Load,
	// or as the directory is closed, before the router serves.
	keys     *global.Keyring
	password string
	// badTokens is the bad-token back-off of /_shard/ and /_metrics, per
	// client address.
	badTokens *badtoken.Book[string]
}

// Load reads the router's TLS files and the directory's secrets, and
// refuses a router that would found a directory of several members
// without them (the founders could not agree on secrets each made alone).
func Load(cfg Config, d Deps) (*Trust, error) {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	t := &Trust{cfg: cfg, deps: d, log: d.Log, badTokens: badtoken.New[string]()}
	if err := t.loadTLS(); err != nil {
		return nil, err
	}
	if err := t.loadSecrets(); err != nil {
		return nil, err
	}
	if err := t.refuseFoundingBlind(); err != nil {
		return nil, err
	}
	return t, nil
}

// Named gives the trust the router's name (noted beside its sealing key)
// and its logger, once the router has them; before it serves.
func (t *Trust) Named(id string, log *slog.Logger) {
	t.id, t.log = id, log
}

// loadTLS reads the router's TLS files and the directory's (the same
// Source when they are the same files).
func (t *Trust) loadTLS() error {
	var err error
	if t.tls, err = tlsx.Load(t.cfg.TLS, t.log); err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	t.etcdTLS = t.tls
	if ef := t.cfg.EtcdFiles(); ef != t.cfg.TLS {
		if t.etcdTLS, err = tlsx.Load(ef, t.log); err != nil {
			return fmt.Errorf("etcd tls: %w", err)
		}
	}
	return nil
}

// Listen has ln's connections read and write raw (internal/rawtcp), and
// wraps it in TLS when the router serves it.
func (t *Trust) Listen(ln net.Listener) net.Listener {
	if !t.cfg.TLS.On() {
		return rawtcp.Listener(ln) // reads and writes that wake no monitor thread
	}
	return t.tls.Listen(ln, t.cfg.ClientAuth == ClientAuthAll)
}

// Client is the TLS config of a new connection to the node at hostport:
// the router's certificate shown, the node verified against its bundle.
func (t *Trust) Client(hostport string) *tls.Config { return t.tls.Client(hostport) }

// Secure has tr reach nodes addressed https:// over the router's TLS.
func (t *Trust) Secure(tr *http.Transport) {
	tr.DialTLSContext = t.tls.Dialer(netx.Dialer(t.cfg.Resolver, 30*time.Second).DialContext)
}

// EtcdOptions has an etcd client of urls show the directory's password
// (every directory a router reaches, its own and the global one, takes
// the same), and speak TLS when any URL is https://.
func (t *Trust) EtcdOptions(urls []string) []global.EtcdOption {
	opts := []global.EtcdOption{global.WithPassword(t.password)}
	for _, u := range urls {
		if strings.HasPrefix(u, "https://") {
			return append(opts, global.WithTLS(t.etcdTLS.Etcd()))
		}
	}
	return opts
}

// Seal is d with its node records' tokens sealed under the directory's
// key and opened with any of its keys (global.Sealing; in clear without a
// key).
func (t *Trust) Seal(d global.Directory) global.Directory { return global.Sealing(d, t.keys) }

// Reload reads the router's TLS files (also read whenever they change)
// and its token file again now. On an error the router keeps what it had
// of the files that failed.
func (t *Trust) Reload() error {
	err := t.reloadTLS()
	if t.cfg.TokenFile != "" {
		tok, terr := tokenfile.Read(t.cfg.TokenFile)
		switch {
		case terr != nil:
			err = errors.Join(err, fmt.Errorf("token file not read again, the token in use kept: %w", terr))
		case tok != t.token():
			t.tok.Store(&tok)
			t.log.Info("token file read again")
		}
	}
	return err
}

// reloadTLS reads the TLS files again.
func (t *Trust) reloadTLS() error {
	err := t.tls.Reload()
	if t.etcdTLS != t.tls {
		if eerr := t.etcdTLS.Reload(); err == nil {
			err = eerr
		}
	}
	return err
}

// ReloadLoop reloads on the Config's Reload and watches the TLS files
// until ctx ends.
func (t *Trust) ReloadLoop(ctx context.Context) {
	tlsx.Loop(ctx.Done(), t.cfg.Reload, t.cfg.TLSWatch, t.Reload, func() { _ = t.reloadTLS() }, t.log)
}

// token is the router token in use: the command line's, or its file's as
// last read.
func (t *Trust) token() string {
	if p := t.tok.Load(); p != nil {
		return *p
	}
	return t.cfg.Token
}
