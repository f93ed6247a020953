package main

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/fenec-go/fenec/internal/tlsx"
)

// loadTLS reads what the drill speaks TLS with to the deployment: the
// CA bundle deploy/build.sh made (deploy/certs/ca.pem) and the operator's
// certificate, which routers taking /_shard/ only beside a client
// certificate (--tls-client-auth admin) ask for.
func loadTLS(root string) (*tlsx.Source, error) {
	dir := filepath.Join(root, "deploy", "certs")
	return tlsx.Load(tlsx.Files{
		Cert: filepath.Join(dir, "operator.pem"),
		Key:  filepath.Join(dir, "operator-key.pem"),
		CA:   filepath.Join(dir, "ca.pem"),
	}, nil)
}

// client is an HTTP client of the deployment's services over TLS: a
// service is named in the URL (its certificate names it) and dialled at
// its address on the project's network.
func (d *deployment) client(timeout time.Duration, idle int) *http.Client {
	var dialer net.Dialer
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if ip, ok := d.ips[host]; ok {
			addr = net.JoinHostPort(ip, port)
		}
		return dialer.DialContext(ctx, network, addr)
	}
	tr := &http.Transport{
		MaxIdleConnsPerHost: idle, IdleConnTimeout: time.Minute,
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return d.tls.Handshake(ctx, c, addr)
		},
	}
	return &http.Client{Transport: tr, Timeout: timeout}
}
