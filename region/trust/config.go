package trust

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/netx"
	"github.com/fenec-go/fenec/internal/tlsx"
)

// Config is what the trust takes of the router's configuration: the
// router (package region) builds it from its own Config, whose fields and
// flags these are, and checks it with CheckTLS and CheckExposure.
type Config struct {
	// Listen is the address the router serves on (--listen).
	Listen string
	// Token is the router token (--token, or --token-file's as read at
	// start); TokenFile the file it was read from, read again on Reload.
	Token     string
	TokenFile string
	// Insecure allows what CheckExposure refuses (--insecure).
	Insecure bool

	// TLS is the router's certificate, key and CA bundle (--tls-*);
	// ClientAuth which calls need a client certificate the bundle
	// verifies (--tls-client-auth).
	TLS        tlsx.Files
	ClientAuth string
	// TLSWatch is how often the TLS files are looked at for a change (0:
	// tlsx.DefaultWatch); Reload, when it receives, has them and the
	// token file read again.
	TLSWatch time.Duration
	Reload   <-chan os.Signal
	// Resolver is the DNS server node names are looked up at ("": the
	// system's way), for the dialer Secure gives a transport.
	Resolver string

	// Etcd is the embedded member's configuration, its TLS the files the
	// --etcd-* flags name (zero: the router's own). Used unless the
	// directory is given (DirectoryGiven) or reached at DirectoryURLs.
	Etcd           global.EmbedConfig
	DirectoryURLs  []string
	DirectoryGiven bool
	// GlobalURLs are the global directory's etcd client URLs on a region's
	// router (--global); Global, in tests, the global directory as it is.
	GlobalURLs []string
	Global     global.Directory
	// KeyFile and PasswordFile are the directory's secrets
	// (--directory-key-file, --directory-password-file); CloseDirectory
	// turns on the authentication of a directory left open
	// (--close-directory). Prefix is where fenec's keys live in etcd.
	KeyFile        string
	PasswordFile   string
	CloseDirectory bool
	Prefix         string
}

// Values of Config.ClientAuth.
const (
	ClientAuthNone  = "none"  // a certificate shown is verified; none is asked for
	ClientAuthAdmin = "admin" // /_shard/ and /_metrics need one
	ClientAuthAll   = "all"   // every connection needs one
)

// Names of the files a router keeps in its --etcd-dir when it made them.
const (
	KeyFileName      = "directory.key"
	PasswordFileName = "directory.password"
)

// EtcdFiles are the files of the directory's links: --etcd-cert,
// --etcd-key and --etcd-ca where given, else the router's own.
func (c Config) EtcdFiles() tlsx.Files {
	if c.Etcd.TLS != (tlsx.Files{}) {
		return c.Etcd.TLS
	}
	return c.TLS
}

// embedded reports whether the router runs an etcd member of its own.
func (c Config) embedded() bool { return !c.DirectoryGiven && len(c.DirectoryURLs) == 0 }

// mirroring reports whether the router is a region's linked to the
// global directory.
func (c Config) mirroring() bool { return len(c.GlobalURLs) > 0 || c.Global != nil }

// CheckTLS checks the TLS files and --tls-client-auth. Its errors name
// the flag; the router wraps them as a bad configuration.
func (c Config) CheckTLS() error {
	for _, f := range []tlsx.Files{c.TLS, c.Etcd.TLS} {
		if err := f.Validate(); err != nil {
			return err
		}
	}
	switch c.ClientAuth {
	case ClientAuthNone, "":
	case ClientAuthAdmin, ClientAuthAll:
		if !c.TLS.On() || c.TLS.CA == "" {
			return fmt.Errorf("--tls-client-auth %s needs --tls-cert, --tls-key and --tls-ca (the bundle client certificates are verified against)", c.ClientAuth)
		}
	default:
		return fmt.Errorf("--tls-client-auth %q: want none, admin or all", c.ClientAuth)
	}
	return nil
}

// CheckExposure refuses, unless Insecure, a non-loopback listener
// without a token or TLS, and non-loopback etcd URLs without TLS or, for
// the embedded member's ports, without client certificates: each
// refusal names the flags that fix it (ErrInsecure).
func (c Config) CheckExposure() error {
	if c.Insecure {
		return nil
	}
	why := c.listenerExposed()
	if c.embedded() {
		why = append(why, c.memberExposed()...)
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
	if c.KeyFile == "" && c.directoryOffLoopback() {
		why = append(why, "the directory is reachable off loopback and would hold node tokens in clear: set --directory-key-file (fenec certs makes one)")
	}
	if len(why) > 0 {
		return fmt.Errorf("%w: %s", ErrInsecure, strings.Join(why, "; "))
	}
	return nil
}

// listenerExposed says what a listener off loopback lacks: a token from
// a file, TLS.
func (c Config) listenerExposed() []string {
	if netx.LoopbackAddr(c.Listen) {
		return nil
	}
	var why []string
	switch {
	case c.Token == "":
		why = append(why, fmt.Sprintf("--listen %s has no token: set --token-file", c.Listen))
	case c.TokenFile == "":
		why = append(why, fmt.Sprintf("--listen %s with --token given on the command line, where every user of the machine can read it: give it with --token-file", c.Listen))
	}
	if !c.TLS.On() {
		why = append(why, fmt.Sprintf("--listen %s serves no TLS: set --tls-cert and --tls-key (fenec certs makes them)", c.Listen))
	}
	return why
}

// memberExposed says what the embedded member's URLs off loopback lack:
// TLS, a bundle that client certificates are verified against.
func (c Config) memberExposed() []string {
	var why []string
	ef := c.EtcdFiles()
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
	return why
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

// CheckNodeAddr refuses, unless insecure, a node address off loopback
// that is not https://: the router would send it the node's admin token
// and clients' requests, data tokens and all, in clear. The router
// answers the refusal as a bad request.
func CheckNodeAddr(addr string, insecure bool) error {
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
	return fmt.Errorf("node address %s is not https://, so its admin token and clients' requests would cross the network in clear: serve the node over TLS (fenec-node --tls-cert, --tls-key) and record it as https://, or start the router with --insecure", addr)
}

// keyPath is the key file the router reads: the one given, else the one
// in its --etcd-dir (which may not exist yet).
func (c Config) keyPath() string {
	if c.KeyFile != "" || !c.embedded() {
		return c.KeyFile
	}
	return filepath.Join(c.Etcd.Dir, KeyFileName)
}

// passwordPath is keyPath for the password file.
func (c Config) passwordPath() string {
	if c.PasswordFile != "" || !c.embedded() {
		return c.PasswordFile
	}
	return filepath.Join(c.Etcd.Dir, PasswordFileName)
}

// mayMake says whether the router makes the secrets it lacks in its
// --etcd-dir: it embeds a member, mirrors no global directory, and
// founds its directory alone or was told to close an old one.
func (c Config) mayMake() bool {
	if !c.embedded() || c.mirroring() {
		return false
	}
	alone := c.Etcd.ClusterState != global.ClusterExisting && !strings.Contains(c.Etcd.InitialCluster, ",")
	return alone || c.CloseDirectory
}
