package cluster

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/internal/tlsx"
)

// PKI is a cluster's certificate authority, the certificates it issued
// its processes (files named after them), and the routers' key.
type PKI struct {
	*testkit.PKI
	tb testing.TB
	// KeyFile is the routers' --directory-key-file (Secrets().Key).
	KeyFile string
	// operator is the client certificate the cluster's clients show.
	operator *tlsx.Source
}

// Operator is the name of the certificate the cluster's own clients
// (Router.Client, Node.Admin) show.
const Operator = "operator"

// UseTLS has every process the cluster starts from now on speak TLS on
// every link: nodes serve HTTPS taking admin calls and replication feeds
// only beside a client certificate (--tls-client-auth admin), routers
// serve HTTPS likewise for /_shard/, their etcd members' client and peer
// ports are https:// with client certificates, node tokens are sealed in
// the directory, and the cluster's clients verify and show certificates.
// Call it before starting any process.
func (c *Cluster) UseTLS() *PKI {
	c.tb.Helper()
	p := &PKI{PKI: testkit.NewPKIAt(c.tb, "e2e CA", filepath.Join(c.dir, "pki")), tb: c.tb}
	p.KeyFile = c.Secrets().Key
	p.operator = testkit.Source(c.tb, p.Issue(Operator))
	c.tls = p
	return p
}

// Files are the certificate, key and bundle of name, issued or not.
func (p *PKI) Files(name string) tlsx.Files {
	return tlsx.Files{
		Cert: filepath.Join(p.Dir, name+".pem"),
		Key:  filepath.Join(p.Dir, name+"-key.pem"),
		CA:   p.Bundle(),
	}
}

// Issue writes a new certificate for name, valid for 127.0.0.1 and name
// (more hosts if given), over name's files, and returns them: a process
// started with them, given them again, rotates its certificate.
func (p *PKI) Issue(name string, hosts ...string) tlsx.Files {
	p.tb.Helper()
	f := p.Files(name)
	p.Reissue(f, name, append([]string{"127.0.0.1", name}, hosts...)...)
	return f
}

// Serial is the serial number of name's certificate as written now.
func (p *PKI) Serial(name string) string {
	p.tb.Helper()
	b, err := os.ReadFile(p.Files(name).Cert)
	if err != nil {
		p.tb.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		p.tb.Fatalf("%s: no certificate", p.Files(name).Cert)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		p.tb.Fatal(err)
	}
	return cert.SerialNumber.String()
}

// tokenArgs gives a process a token: under TLS from a file
// (--NAME-file), so that it is not on any command line, else as a flag.
func (c *Cluster) tokenArgs(name, token string) []string {
	if c.tls == nil {
		return []string{"--" + name, token}
	}
	return []string{"--" + name + "-file", c.tls.TokenFile(name, token)}
}

// TokenFile writes token to a file named name in the PKI's directory (if
// it is not there yet) and returns its path.
func (p *PKI) TokenFile(name, token string) string {
	p.tb.Helper()
	path := filepath.Join(p.Dir, name)
	if _, err := os.Stat(path); err == nil {
		return path
	}
	if err := tlsx.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		p.tb.Fatal(err)
	}
	return path
}

// scheme is the URL scheme of the cluster's processes.
func (c *Cluster) scheme() string {
	if c.tls != nil {
		return "https://"
	}
	return "http://"
}

// tlsArgs are the flags giving a process name's certificate.
func (c *Cluster) tlsArgs(name string) []string {
	f := c.tls.Issue(name)
	return []string{"--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-ca", f.CA, "--tls-client-auth", "admin"}
}

// nodeTLSArgs are a node's TLS flags (none without UseTLS).
func (c *Cluster) nodeTLSArgs(name string) []string {
	if c.tls == nil {
		return nil
	}
	return c.tlsArgs(name)
}

// routerTLSArgs are a router's TLS flags (none without UseTLS).
func (c *Cluster) routerTLSArgs(name string) []string {
	if c.tls == nil {
		return nil
	}
	return c.tlsArgs(name)
}

// transport is an HTTP transport for the cluster's processes: under TLS
// it verifies them against the cluster's CA and shows the operator's
// certificate.
func (c *Cluster) transport(idle int) *http.Transport {
	tr := &http.Transport{MaxIdleConnsPerHost: idle}
	if c.tls != nil {
		var d net.Dialer
		tr.DialTLSContext = c.tls.operator.Dialer(d.DialContext)
	}
	return tr
}

// NewClient is a client of base (one of the cluster's URLs) with token,
// over TLS when the cluster uses it.
func (c *Cluster) NewClient(base, token string) *Client {
	c.tb.Helper()
	hc := &http.Client{Transport: c.transport(16)}
	c.tb.Cleanup(hc.CloseIdleConnections)
	return &Client{tb: c.tb, base: base, token: token, hc: hc}
}

// NewClientWith is a client of base with token that speaks TLS with src
// (its certificate shown, its bundle verifying the server): a stranger's,
// or an application's.
func NewClientWith(tb testing.TB, base, token string, src *tlsx.Source) *Client {
	tb.Helper()
	var d net.Dialer
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16, DialTLSContext: src.Dialer(d.DialContext)}}
	tb.Cleanup(hc.CloseIdleConnections)
	return &Client{tb: tb, base: base, token: token, hc: hc}
}

// MustSource loads files, failing tb on an error.
var MustSource = testkit.Source

// Fresh makes c open a new connection for every request (no keep-alive):
// every request then shakes hands, resuming a session where it can.
func (c *Client) Fresh() *Client {
	if tr, ok := c.hc.Transport.(*http.Transport); ok {
		tr.DisableKeepAlives = true
	}
	return c
}

// waitHealthy waits for p's health check at url, over TLS when the
// cluster uses it.
func (c *Cluster) waitHealthy(p *Proc, url string) {
	c.tb.Helper()
	hc := &http.Client{Timeout: 2 * time.Second, Transport: c.transport(1)}
	waitHealthy(c.tb, p, url, hc)
}
