package node

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/fenec-go/fenec/internal/netx"
	"github.com/fenec-go/fenec/internal/rawtcp"
	"github.com/fenec-go/fenec/internal/tlsx"
)

// loadTLS reads the node's TLS files: the certificate it serves and shows
// the primaries it follows, and the bundle it verifies them and client
// certificates against. With no files, primaries named https:// are
// verified against the system's roots.
func loadTLS(cfg Config, log *slog.Logger, reg *registry) (*tlsx.Source, error) {
	src, err := tlsx.Load(cfg.TLS, log)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	tr := reg.replClient.Transport.(*http.Transport)
	tr.DialTLSContext = src.Dialer(netx.Dialer(cfg.Resolver, 30*time.Second).DialContext)
	return src, nil
}

// listen has ln's connections read and write raw (internal/rawtcp), and
// wraps it in TLS when the node serves it.
func (s *Server) listen(ln net.Listener) net.Listener {
	if !s.cfg.TLS.On() {
		return rawtcp.Listener(ln) // reads and writes that wake no monitor thread
	}
	return s.tls.Listen(ln, s.cfg.ClientAuth == ClientAuthAll)
}

// clientCertOK checks, under --tls-client-auth admin, that an admin call
// or a replication feed came with a client certificate the node's bundle
// verified, and answers 403 when it did not. The token is checked as
// well, after.
func (c *call) clientCertOK() bool {
	if c.s.cfg.ClientAuth != ClientAuthAdmin || tlsx.HasClientCert(c.r) {
		return true
	}
	c.fail(ErrClientCert)
	c.s.auditf(c, auditRefused, "", ErrClientCert.Error())
	return false
}

// Reload reads the node's TLS files (also read whenever they change) and
// its token files again now. On an error the node keeps what it had of
// the files that failed.
func (s *Server) Reload() error {
	terr := s.tls.Reload()
	changed, err := s.reloadTokens()
	if len(changed) > 0 {
		s.log.Info("token files read again", "changed", changed)
	}
	return errors.Join(terr, err)
}

// reloadLoop reloads on cfg.Reload and watches the TLS files, until the
// node stops.
func (s *Server) reloadLoop() {
	tlsx.Loop(s.stopping, s.cfg.Reload, s.cfg.TLSWatch, s.Reload, func() { _ = s.tls.Reload() }, s.log)
}
