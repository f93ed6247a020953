package h1

import (
	"bytes"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"

	"github.com/fenec-go/fenec/internal/httptoken"
)

// headEnd finds the end of the head in buf: the index just past the empty
// line, or 0 if it has not all come. bare reports a line ended by LF
// alone, which the loop leaves to the fallback.
func headEnd(buf []byte) (end int, bare bool) {
	start := 0
	for {
		i := bytes.IndexByte(buf[start:], '\n')
		if i < 0 {
			return 0, false
		}
		i += start
		if i == 0 || buf[i-1] != '\r' {
			return 0, true
		}
		if i-1 == start {
			return i + 1, false
		}
		start = i + 1
	}
}

// parse reads a whole head into c.req, or reports false for one the loop
// does not take. Nothing is consumed either way.
func (c *conn) parse(raw []byte) bool {
	// One string holds the head; the request's strings are slices of it.
	s := string(raw[:len(raw)-2])
	line, rest, _ := strings.Cut(s, "\r\n")
	method, target, proto, ok := requestLine(line)
	if !ok || proto != "HTTP/1.1" || c.tls != nil && c.tls.NegotiatedProtocol != "" && c.tls.NegotiatedProtocol != "http/1.1" || !strings.HasPrefix(target, c.s.Prefix) || target == "" || target[0] != '/' {
		return false
	}
	clear(c.hdr)
	c.vals = c.vals[:0]
	var host string
	hosts, length, closing := 0, int64(-1), false
	for rest != "" {
		line, rest, _ = strings.Cut(rest, "\r\n")
		k, v, ok := headerLine(line)
		if !ok {
			return false
		}
		switch k {
		case "Host":
			hosts++
			host = v
			continue // net/http moves it to Request.Host
		case "Content-Length":
			n, ok := httptoken.Decimal(v, 18)
			if !ok || length >= 0 {
				return false
			}
			length = n
		case "Transfer-Encoding", "Expect", "Upgrade", "Trailer":
			return false
		case "Connection":
			if httptoken.HasToken(v, "upgrade") {
				return false
			}
			closing = closing || httptoken.HasToken(v, "close")
		}
		c.add(k, v)
	}
	if hosts != 1 || !saneHost(host) {
		return false
	}
	u, ok := c.url(target)
	if !ok {
		return false
	}
	r := &c.req
	*r = *c.tmpl
	r.Method, r.URL, r.RequestURI, r.Host = method, u, target, host
	r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/1.1", 1, 1
	r.Header, r.Close, r.RemoteAddr, r.TLS = c.hdr, closing, c.remote, c.tls
	r.ContentLength = max(length, 0)
	c.body.n = r.ContentLength
	r.Body = http.NoBody
	if length > 0 {
		r.Body = &c.body
	}
	return true
}

// add records one header line, the value's slice backed by c.vals.
func (c *conn) add(k, v string) {
	if prev, ok := c.hdr[k]; ok {
		c.hdr[k] = append(prev[:len(prev):len(prev)], v)
		return
	}
	if len(c.vals) == cap(c.vals) {
		c.vals = make([]string, 0, max(16, 2*cap(c.vals))) // earlier slices keep the old array
	}
	c.vals = append(c.vals, v)
	i := len(c.vals) - 1
	c.hdr[k] = c.vals[i : i+1 : i+1]
}

// url parses the target as net/http does; one made only of bytes that
// are never escaped in a path or a query is split without a parser and
// without allocating (the URL is the connection's).
func (c *conn) url(target string) (*url.URL, bool) {
	for i := 0; i < len(target); i++ {
		if !plainURLByte(target[i]) {
			u, err := url.ParseRequestURI(target)
			return u, err == nil
		}
	}
	c.u = url.URL{Path: target}
	if i := strings.IndexByte(target, '?'); i >= 0 {
		c.u.Path, c.u.RawQuery = target[:i], target[i+1:]
		c.u.ForceQuery = c.u.RawQuery == ""
	}
	return &c.u, true
}

// plainURLByte: the bytes net/url keeps as they are in a path (so the URL
// has no RawPath) and that need no unescaping.
func plainURLByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~$&+,;=:@/?", c) >= 0
}

// requestLine splits "METHOD target HTTP/x.y" with single spaces, the
// method a token and the target visible ASCII.
func requestLine(line string) (method, target, proto string, ok bool) {
	method, rest, ok1 := strings.Cut(line, " ")
	target, proto, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || method == "" || target == "" {
		return "", "", "", false
	}
	for i := 0; i < len(method); i++ {
		if !httptoken.IsTokenByte(method[i]) {
			return "", "", "", false
		}
	}
	for i := 0; i < len(target); i++ {
		if c := target[i]; c <= ' ' || c >= 0x7f {
			return "", "", "", false
		}
	}
	return method, target, proto, true
}

// headerLine splits "Name: value" into the canonical name and the value
// without surrounding blanks. A name must be a token right before the
// colon; a value holds no control byte but tab.
func headerLine(line string) (k, v string, ok bool) {
	i := strings.IndexByte(line, ':')
	if i <= 0 {
		return "", "", false
	}
	k = line[:i]
	for j := 0; j < len(k); j++ {
		if !httptoken.IsTokenByte(k[j]) {
			return "", "", false
		}
	}
	v = strings.Trim(line[i+1:], " \t")
	for j := 0; j < len(v); j++ {
		if c := v[j]; c < ' ' && c != '\t' || c == 0x7f {
			return "", "", false
		}
	}
	if !httptoken.Canonical(k) {
		k = textproto.CanonicalMIMEHeaderKey(k)
	}
	return k, v, true
}

// saneHost takes a host[:port] of letters, digits and the marks a name or
// an address uses; anything else is left to net/http.
func saneHost(h string) bool {
	if h == "" || len(h) > 255 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') && !strings.ContainsRune(".-_:[]", rune(c)) {
			return false
		}
	}
	return true
}
