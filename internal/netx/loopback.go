package netx

import (
	"net"
	"net/netip"
	"net/url"
)

// LoopbackHost reports whether host names only this machine: "localhost"
// or a loopback address (127.0.0.0/8, ::1, or 127.x mapped into IPv6).
// Routers and nodes decide by it where tokens and TLS may be left off, so
// a name that is not literally "localhost" is never taken on trust: what
// it resolves to can change. An empty host, as in ":7070", is every
// interface and not loopback.
func LoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// LoopbackAddr reports whether a listener's host:port listens on loopback
// only; an address without a port is not one.
func LoopbackAddr(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	return err == nil && LoopbackHost(host)
}

// LoopbackURL reports whether u's host names only this machine; a string
// that does not parse as a URL is not loopback.
func LoopbackURL(u string) bool {
	pu, err := url.Parse(u)
	return err == nil && LoopbackHost(pu.Hostname())
}
