package region

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/netx"
	"github.com/fenec-go/fenec/internal/rawtcp"
	"github.com/fenec-go/fenec/internal/tlsx"
	"github.com/fenec-go/fenec/internal/tokenfile"
)

// etcdFiles are the files of the directory's links: --etcd-cert,
// --etcd-key and --etcd-ca where given, else the router's own.
func (c Config) etcdFiles() tlsx.Files {
	if c.Etcd.TLS != (tlsx.Files{}) {
		return c.Etcd.TLS
	}
	return c.TLS
}

// embedded reports whether the router runs an etcd member of its own.
func (c Config) embedded() bool { return c.Directory == nil && len(c.DirectoryURLs) == 0 }

// validateTLS checks the TLS files and --tls-client-auth.
func (c Config) validateTLS() error {
	for _, f := range []tlsx.Files{c.TLS, c.Etcd.TLS} {
		if err := f.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrBadConfig, err)
		}
	}
	switch c.ClientAuth {
	case ClientAuthNone, "":
	case ClientAuthAdmin, ClientAuthAll:
		if !c.TLS.On() || c.TLS.CA == "" {
			return fmt.Errorf("%w: --tls-client-auth %s needs --tls-cert, --tls-key and --tls-ca (the bundle client certificates are verified against)", ErrBadConfig, c.ClientAuth)
		}
	default:
		return fmt.Errorf("%w: --tls-client-auth %q: want none, admin or all", ErrBadConfig, c.ClientAuth)
	}
	return nil
}

// validateExposure refuses, unless Insecure, a non-loopback listener
// without a token or TLS, and non-loopback etcd URLs without TLS or, for
// the embedded member's ports, without client certificates: each
// refusal names the flags that fix it.
func (c Config) validateExposure() error {
	if c.Insecure {
		return nil
	}
	var why []string
	if !netx.LoopbackAddr(c.Listen) {
		switch {
		case c.Token == "":
			why = append(why, fmt.Sprintf("--listen %s has no token: set --token-file", c.Listen))
		case c.TokenFile == "":
			why = append(why, fmt.Sprintf("--listen %s with --token given on the command line, where every user of the machine can read it: give it with --token-file", c.Listen))
		}
		if !c.TLS.On() {
			why = append(why, fmt.Sprintf("--listen %s serves no TLS: set --tls-cert and --tls-key (fenec certs makes them)", c.Listen))
		}
	}
	if c.embedded() {
		ef := c.etcdFiles()
		for _, u := range []struct{ flag, url string }{
			{"--etcd-client-url", c.Etcd.ClientURL}, {"--etcd-peer-url", c.Etcd.PeerURL},
			{"--etcd-listen-client-url", c.Etcd.ListenClientURL}, {"--etcd-listen-peer-url", c.Etcd.ListenPeerURL},
		} {
			switch {
			case u.url == "" || netx.LoopbackURL(u.url):
			case !strings.HasPrefix(u.url, "https://"):
				why = append(why, fmt.Sprintf("%s %s is not https://: serve it over TLS (https:// with --etcd-cert and --etcd-key, or --tls-cert and --tls-key)", u.flag, u.url))
			case ef.CA == "":
				why = append(why, fmt.Sprintf("%s %s takes any client: set --etcd-ca (or --tls-ca) so that only certificates it verifies reach the directory", u.flag, u.url))
			}
		}
	}
	for _, l := range []struct {
		flag string
		urls []string
	}{{"--directory", c.DirectoryURLs}, {"--global", c.GlobalURLs}} {
		for _, u := range l.urls {
			if !netx.LoopbackURL(u) && !strings.HasPrefix(u, "https://") {
				why = append(why, fmt.Sprintf("%s %s is not https://: reach etcd over TLS (https:// with --etcd-ca, and --etcd-cert and --etcd-key where it asks for a client certificate)", l.flag, u))
			}
		}
	}
	if c.DirectoryKeyFile == "" && c.directoryOffLoopback() {
		why = append(why, "the directory is reachable off loopback and would hold node tokens in clear: set --directory-key-file (fenec certs makes one)")
	}
	if len(why) > 0 {
		return fmt.Errorf("%w: %s", ErrInsecure, strings.Join(why, "; "))
	}
	return nil
}

// directoryOffLoopback reports whether the directory the router uses or
// mirrors from is reached, or served, off loopback.
func (c Config) directoryOffLoopback() bool {
	urls := append(append([]string{}, c.DirectoryURLs...), c.GlobalURLs...)
	if c.embedded() {
		urls = append(urls, c.Etcd.ClientURL, c.Etcd.PeerURL, c.Etcd.ListenClientURL, c.Etcd.ListenPeerURL)
	}
	for _, u := range urls {
		if u != "" && !netx.LoopbackURL(u) {
			return true
		}
	}
	return false
}

// checkNodeAddr refuses, unless insecure, a node address off loopback
// that is not https://: the router would send it the node's admin token
// and clients' requests, data tokens and all, in clear.
func checkNodeAddr(addr string, insecure bool) error {
	if insecure || strings.HasPrefix(addr, "https://") {
		return nil
	}
	u := addr
	if !strings.Contains(u, "://") {
		u = "http://" + u
	}
	if netx.LoopbackURL(u) {
		return nil
	}
	return fmt.Errorf("%w: node address %s is not https://, so its admin token and clients' requests would cross the network in clear: serve the node over TLS (fenec-node --tls-cert, --tls-key) and record it as https://, or start the router with --insecure", ErrBadRequest, addr)
}

// loadTLS reads the router's TLS files and the directory's (the same
// Source when they are the same files).
func (rt *Router) loadTLS() error {
	var err error
	if rt.tls, err = tlsx.Load(rt.cfg.TLS, rt.log); err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	rt.etcdTLS = rt.tls
	if ef := rt.cfg.etcdFiles(); ef != rt.cfg.TLS {
		if rt.etcdTLS, err = tlsx.Load(ef, rt.log); err != nil {
			return fmt.Errorf("etcd tls: %w", err)
		}
	}
	rt.cfg.Etcd.TLS = rt.cfg.etcdFiles()
	rt.cfg.Forward.TLS = rt.tls.Client
	return nil
}

// listen has ln's connections read and write raw (internal/rawtcp), and
// wraps it in TLS when the router serves it.
func (rt *Router) listen(ln net.Listener) net.Listener {
	if !rt.cfg.TLS.On() {
		return rawtcp.Listener(ln) // reads and writes that wake no monitor thread
	}
	return rt.tls.Listen(ln, rt.cfg.ClientAuth == ClientAuthAll)
}

// secure has tr reach nodes addressed https:// over the router's TLS.
func (rt *Router) secure(tr *http.Transport) {
	tr.DialTLSContext = rt.tls.Dialer(netx.Dialer(rt.cfg.Forward.Resolver, 30*time.Second).DialContext)
}

// etcdOptions has an etcd client of urls show the directory's password
// (every directory a router reaches, its own and the global one, takes
// the same), and speak TLS when any URL is https://.
func (rt *Router) etcdOptions(urls []string) []global.EtcdOption {
	opts := []global.EtcdOption{global.WithPassword(rt.password)}
	for _, u := range urls {
		if strings.HasPrefix(u, "https://") {
			return append(opts, global.WithTLS(rt.etcdTLS.Etcd()))
		}
	}
	return opts
}

// clientCertOK checks, under --tls-client-auth admin, that a /_shard/ or
// /_metrics call came with a client certificate the router's bundle
// verified, and answers 403 when it did not.
func (rt *Router) clientCertOK(w http.ResponseWriter, r *http.Request) bool {
	if rt.cfg.ClientAuth != ClientAuthAdmin || tlsx.HasClientCert(r) {
		return true
	}
	cpError(w, ErrClientCert)
	return false
}

// Reload reads the router's TLS files (also read whenever they change)
// and its token file again now. On an error the router keeps what it had
// of the files that failed.
func (rt *Router) Reload() error {
	err := rt.reloadTLS()
	if rt.cfg.TokenFile != "" {
		tok, terr := tokenfile.Read(rt.cfg.TokenFile)
		switch {
		case terr != nil:
			err = errors.Join(err, fmt.Errorf("token file not read again, the token in use kept: %w", terr))
		case tok != rt.token():
			rt.tok.Store(&tok)
			rt.log.Info("token file read again")
		}
	}
	return err
}

// reloadTLS reads the TLS files again.
func (rt *Router) reloadTLS() error {
	err := rt.tls.Reload()
	if rt.etcdTLS != rt.tls {
		if eerr := rt.etcdTLS.Reload(); err == nil {
			err = eerr
		}
	}
	return err
}

// token is the router token in use: the command line's, or its file's as
// last read.
func (rt *Router) token() string {
	if p := rt.tok.Load(); p != nil {
		return *p
	}
	return rt.cfg.Token
}

// reloadLoop reloads on cfg.Reload and watches the TLS files until the
// router closes.
func (rt *Router) reloadLoop() {
	tlsx.Loop(rt.ctx.Done(), rt.cfg.Reload, rt.cfg.TLSWatch, rt.Reload, func() { _ = rt.reloadTLS() }, rt.log)
}
