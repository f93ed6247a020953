// Package netx holds what fenec's routers and nodes share about reaching
// each other, and the one rule for which addresses name only this machine
// (LoopbackHost, LoopbackAddr, LoopbackURL), by which each decides where
// tokens and TLS may be left off.
package netx

import (
	"context"
	"net"
	"time"
)

// Dialer is the dialer a router's connections to nodes, and a node's to
// the nodes it follows, are made with. Names are looked up within the
// dial's own context, so a name a resolver is slow to refuse holds up only
// the call that needs it. With resolver (host:port of a DNS server) names
// are looked up there, by Go's own resolver; without, the system's way.
func Dialer(resolver string, keepAlive time.Duration) *net.Dialer {
	d := &net.Dialer{KeepAlive: keepAlive}
	if resolver != "" {
		var to net.Dialer
		d.Resolver = &net.Resolver{
			PreferGo: true,
			Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return to.DialContext(ctx, network, resolver)
			},
		}
	}
	return d
}
