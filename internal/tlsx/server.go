package tlsx

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"

	"github.com/fenec-go/fenec/internal/rawtcp"
)

// alpn is the one application protocol fenec speaks over TLS.
var alpn = []string{"http/1.1"}

// Suites are the TLS 1.2 cipher suites fenec offers and takes: ECDHE key
// exchange (forward secrecy) with an AEAD, AES-GCM or ChaCha20-Poly1305.
// crypto/tls's own list also holds CBC suites with SHA-1 or SHA-256 MACs
// (Lucky Thirteen's family); no client fenec speaks with needs them. TLS
// 1.3's suites are all AEADs and are not configurable.
var Suites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// Server returns the config of a listener over s: the certificate and CA
// bundle current at each handshake. A client certificate is asked for
// when s has a CA bundle, and verified against it if given (a
// certificate from another CA fails the handshake); with
// requireClientCert, one is required.
func (s *Source) Server(requireClientCert bool) *tls.Config {
	if requireClientCert {
		return s.listener[1]
	}
	return s.listener[0]
}

// Listen wraps ln in TLS with s's listener config.
func (s *Source) Listen(ln net.Listener, requireClientCert bool) net.Listener {
	return tls.NewListener(rawtcp.Listener(ln), s.Server(requireClientCert))
}

// forClient hands a handshake the config built over the material current
// at that moment.
func (s *Source) forClient(require bool) func(*tls.ClientHelloInfo) (*tls.Config, error) {
	i := 0
	if require {
		i = 1
	}
	return func(*tls.ClientHelloInfo) (*tls.Config, error) {
		m := s.cur.Load()
		if m.cert == nil {
			return nil, fmt.Errorf("%w: no certificate to serve", ErrFiles)
		}
		return m.server[i], nil
	}
}

// serverConfig is the listener config over one load of the files. A
// resumed session's client certificate is checked by crypto/tls against
// this config's bundle, so a CA taken out of it comes back through no
// ticket.
func (s *Source) serverConfig(m *material, require bool) *tls.Config {
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		CipherSuites: Suites,
		NextProtos:   alpn,
		ClientAuth:   tls.NoClientCert,
	}
	if m.cert != nil {
		cfg.Certificates = []tls.Certificate{*m.cert}
	}
	if m.pool != nil {
		cfg.ClientCAs = m.pool
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
		if require {
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	return cfg
}

// HasClientCert reports whether r came over TLS with a client certificate
// its listener verified against its CA bundle.
func HasClientCert(r *http.Request) bool {
	return r.TLS != nil && len(r.TLS.VerifiedChains) > 0
}
