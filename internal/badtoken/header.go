package badtoken

import (
	"net"
	"net/http"
	"strings"
)

// Bearer is the token of an Authorization header of the Bearer scheme,
// whose name is matched case-insensitively (RFC 7235 §2.1), with one or
// more spaces after it. ok is false for another scheme or no token.
func Bearer(h string) (token string, ok bool) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimLeft(token, " ")
	return token, token != ""
}

// RemoteHost is the request's remote address without its port: the
// address a server's own strikes are counted against (through ClientKey).
func RemoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
