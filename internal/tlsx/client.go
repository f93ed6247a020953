package tlsx

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
)

// Client returns the config of one connection out to addr (host:port):
// the peer's chain is verified against the CA bundle current now (the
// system's roots without one) and its certificate must name host; s's
// certificate, if any, is shown when the peer asks for one. Sessions are
// kept per addr for resumption; crypto/tls resumes one only while its
// chain still verifies against the config's bundle.
func (s *Source) Client(addr string) *tls.Config {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	m := s.cur.Load()
	return &tls.Config{
		MinVersion:           tls.VersionTLS12,
		CipherSuites:         Suites,
		NextProtos:           alpn,
		RootCAs:              m.pool,
		ServerName:           host,
		ClientSessionCache:   perAddr{c: s.sessions, addr: addr},
		GetClientCertificate: s.clientCert,
	}
}

// Etcd returns the config of an etcd client (grpc names the server from
// the endpoint it dials): the CA bundle as loaded now, s's certificate as
// current at each handshake. A CA bundle changed later reaches etcd
// clients opened after it.
func (s *Source) Etcd() *tls.Config {
	return &tls.Config{
		MinVersion:           tls.VersionTLS12,
		CipherSuites:         Suites,
		RootCAs:              s.cur.Load().pool,
		GetClientCertificate: s.clientCert,
	}
}

// clientCert shows the current certificate, or none.
func (s *Source) clientCert(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	if m := s.cur.Load(); m.cert != nil {
		return m.cert, nil
	}
	return &tls.Certificate{}, nil
}

// Handshake runs the client side of TLS over c, a connection to addr
// just dialled, within ctx; on an error c is closed.
func (s *Source) Handshake(ctx context.Context, c net.Conn, addr string) (*tls.Conn, error) {
	tc := tls.Client(c, s.Client(addr))
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("tls handshake with %s: %w", addr, err)
	}
	return tc, nil
}

// DialFunc is a dialer's DialContext.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Dialer returns a DialTLSContext for an http.Transport: dial with dial,
// then shake hands within the same ctx.
func (s *Source) Dialer(dial DialFunc) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return s.Handshake(ctx, c, addr)
	}
}

// perAddr keeps one peer's sessions apart from another's: crypto/tls
// keys them by server name alone, which two nodes on one host share.
type perAddr struct {
	c    tls.ClientSessionCache
	addr string
}

func (p perAddr) Get(key string) (*tls.ClientSessionState, bool) { return p.c.Get(p.addr + "|" + key) }

func (p perAddr) Put(key string, cs *tls.ClientSessionState) { p.c.Put(p.addr+"|"+key, cs) }
