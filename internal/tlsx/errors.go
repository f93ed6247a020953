package tlsx

import "errors"

// Sentinel errors of the package.
var (
	// ErrFiles: a certificate without its key, a key without its
	// certificate, or a client-certificate requirement with no CA bundle
	// to check certificates against.
	ErrFiles = errors.New("tls files")
	// ErrNoCerts: a CA bundle holding no certificate.
	ErrNoCerts = errors.New("no certificate in the CA bundle")
	// ErrNoClientCert: a peer required to present a certificate the CA
	// bundle verifies presented none.
	ErrNoClientCert = errors.New("no client certificate")
)
