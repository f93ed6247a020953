package tlsx

import (
	"flag"
	"fmt"
)

// Files names what a process speaks TLS with, all PEM: its certificate
// (with any intermediates after it) and key, and the CA bundle its peers'
// certificates are checked against. The zero Files is no TLS.
type Files struct {
	// Cert is the process's certificate chain, leaf first. It is served
	// by its listener and presented as its client certificate to the
	// peers it dials.
	Cert string
	// Key is Cert's private key.
	Key string
	// CA is the bundle of CA certificates peers are verified against:
	// the servers this process dials, and client certificates its
	// listener is shown. Empty: servers are verified against the
	// system's roots, and no client certificate is asked for.
	CA string
}

// On reports whether a certificate is configured (the process serves
// TLS).
func (f Files) On() bool { return f.Cert != "" }

// Validate checks the files go together; it reads none of them (Load
// does).
func (f Files) Validate() error {
	if (f.Cert == "") != (f.Key == "") {
		return fmt.Errorf("%w: a certificate and its key go together (cert %q, key %q)", ErrFiles, f.Cert, f.Key)
	}
	return nil
}

// AddFlags registers --PREFIX-cert, --PREFIX-key and --PREFIX-ca on fs,
// with f's values as defaults; what names whose files they are in the
// help ("the node's", "the directory's").
func (f *Files) AddFlags(fs *flag.FlagSet, prefix, what string) {
	fs.StringVar(&f.Cert, prefix+"-cert", f.Cert, what+" TLS certificate (PEM `PATH`, leaf first); served, and shown to peers it dials")
	fs.StringVar(&f.Key, prefix+"-key", f.Key, "the private key of --"+prefix+"-cert (PEM `PATH`)")
	fs.StringVar(&f.CA, prefix+"-ca", f.CA, "CA bundle (PEM `PATH`) that peers' certificates are verified against")
}
