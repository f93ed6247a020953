package main

import (
	"flag"
	"net"
	"net/http"

	"github.com/fenec-go/fenec/internal/tlsx"
)

// Environment variables the TLS flags default to.
const (
	envTLSCA   = "FENEC_TLS_CA"   // the CA bundle servers are verified against
	envTLSCert = "FENEC_TLS_CERT" // the client certificate shown
	envTLSKey  = "FENEC_TLS_KEY"  // its key
)

// addTLSFlags registers --tls-ca, --tls-cert and --tls-key on fs (once)
// and has e's HTTP clients use them: routers and nodes at https:// are
// verified against the bundle, and the certificate is shown to those
// that ask for one (--tls-client-auth admin).
func addTLSFlags(fs *flag.FlagSet, e *env) {
	if fs.Lookup("tls-ca") != nil {
		return
	}
	e.tls = &tlsx.Files{}
	fs.StringVar(&e.tls.CA, "tls-ca", e.getenv(envTLSCA), "verify routers and nodes at https:// against the CA bundle at `PATH` (default $"+envTLSCA+"; else the system's roots)")
	fs.StringVar(&e.tls.Cert, "tls-cert", e.getenv(envTLSCert), "show the client certificate at `PATH` to servers that ask for one (default $"+envTLSCert+")")
	fs.StringVar(&e.tls.Key, "tls-key", e.getenv(envTLSKey), "the key of --tls-cert (`PATH`; default $"+envTLSKey+")")
}

// httpClient is an HTTP client speaking TLS with the --tls-* files to
// https:// servers.
func (e *env) httpClient() (*http.Client, error) {
	if e.tls == nil {
		return &http.Client{}, nil
	}
	src, err := tlsx.Load(*e.tls, nil)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	return &http.Client{Transport: &http.Transport{DialTLSContext: src.Dialer(d.DialContext)}}, nil
}
