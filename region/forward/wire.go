package forward

import (
	"bufio"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/fenec-go/fenec/internal/forwarded"
	"github.com/fenec-go/fenec/wire"
)

// parseTarget takes the tenant from the raw request target (never a
// cleaned or decoded path) and names the route it is counted under.
func parseTarget(raw string) (tenant string, rt route, err error) {
	if !strings.HasPrefix(raw, "/t/") {
		return "", routeOther, ErrBadTarget
	}
	rest := raw[3:]
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	tenant = rest[:end]
	if !wire.ValidName(tenant) {
		return "", routeOther, ErrBadTenant
	}
	return tenant, routeOf(rest[end:]), nil
}

// routeOf names the route of what follows /t/<tenant>.
func routeOf(rest string) route {
	if q := strings.IndexByte(rest, '?'); q >= 0 {
		rest = rest[:q]
	}
	switch {
	case rest == "/query":
		return routeQuery
	case rest == "/batch":
		return routeBatch
	case rest == "/_changes" || strings.HasSuffix(rest, "/changes") && strings.Count(rest, "/") == 2:
		return routeChanges
	case len(rest) > 1 && rest[1] != '_' && strings.Count(rest, "/") <= 2:
		return routeRest
	}
	return routeOther
}

// SaneRequestID accepts a client's X-Request-Id of 1–128 visible ASCII bytes.
func SaneRequestID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

const hexDigits = "0123456789abcdef"

func newRequestID(buf *[16]byte) []byte {
	v := rand.Uint64()
	for i := range buf {
		buf[i] = hexDigits[v>>(60-4*uint(i))&0xf]
	}
	return buf[:]
}

// hopByHop names the headers that belong to one connection and are never
// passed on.
func hopByHop(k string) bool {
	switch k {
	case "Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return strings.HasPrefix(k, "Proxy-")
}

// namedByConnection reports whether the Connection header lists k.
func namedByConnection(k string, conn []string) bool {
	for _, v := range conn {
		for v != "" {
			var tok string
			tok, v, _ = strings.Cut(v, ",")
			if strings.EqualFold(strings.TrimSpace(tok), k) {
				return true
			}
		}
	}
	return false
}

// replicationFeed says whether a decoded path is a tenant's replication
// feed as the node routes it (/t/<t>/_replication, a trailing slash
// allowed): the router forwards it to no one.
func replicationFeed(path string) bool {
	rest, ok := strings.CutPrefix(path, "/t/")
	if !ok {
		return false
	}
	_, rest, ok = strings.Cut(rest, "/")
	return ok && (rest == "_replication" || rest == "_replication/")
}

// skipRequestHeader: what is not copied as is (hop-by-hop, or written by
// the router itself — a client's own Fenec-Client, Fenec-Router-Proof or
// Fenec-Copy-Wait is dropped, never passed on: beside the router's proof
// a node would take them as the router's).
func skipRequestHeader(k string, conn []string) bool {
	switch k {
	case "Host", "Content-Length", "Expect", "X-Request-Id", "X-Forwarded-For",
		forwarded.HeaderClient, forwarded.HeaderProof, wire.HeaderCopyWait:
		return true
	}
	return hopByHop(k) || len(conn) > 0 && namedByConnection(k, conn)
}

func writeHeaderLine(bw *bufio.Writer, k, v string) {
	bw.WriteString(k)
	bw.WriteString(": ")
	bw.WriteString(v)
	bw.WriteString("\r\n")
}

// writeRequest writes the request line with the original raw target, the
// headers minus hop-by-hop ones, X-Request-Id and X-Forwarded-For, the
// client's address with proof (the proof of the node's admin token; ""
// sends neither), and the buffered body into bw; pconn.send sends it.
func (x *exchange) writeRequest(bw *bufio.Writer, now time.Time, proof string) {
	r := x.r
	resend := x.sends > 1
	bw.WriteString(r.Method)
	bw.WriteByte(' ')
	bw.WriteString(r.RequestURI)
	bw.WriteString(" HTTP/1.1\r\n")
	writeHeaderLine(bw, "Host", r.Host)
	conn := r.Header["Connection"]
	for k, vs := range r.Header {
		if skipRequestHeader(k, conn) || resend && x.wait >= 0 && k == wire.HeaderWait {
			continue
		}
		for _, v := range vs {
			writeHeaderLine(bw, k, v)
		}
	}
	if x.toCopy {
		x.copyWaitHeader(bw, x.copyUntil.Sub(now))
	}
	if resend && x.wait >= 0 {
		left := x.wait - now.Sub(x.start).Milliseconds()
		bw.WriteString(wire.HeaderWait + ": ")
		bw.Write(strconv.AppendInt(x.scratch[:0], max(left, 0), 10))
		bw.WriteString("\r\n")
	}
	if x.body.Len() > 0 || x.hadLength {
		bw.WriteString("Content-Length: ")
		bw.Write(strconv.AppendInt(x.scratch[:0], int64(x.body.Len()), 10))
		bw.WriteString("\r\n")
	}
	bw.WriteString("X-Request-Id: ")
	if x.requestID != nil {
		bw.Write(x.requestID)
	} else {
		bw.WriteString(r.Header["X-Request-Id"][0])
	}
	bw.WriteString("\r\n")
	ip := clientIP(r.RemoteAddr)
	writeForwardedFor(bw, r.Header["X-Forwarded-For"], ip)
	if proof != "" {
		writeHeaderLine(bw, forwarded.HeaderClient, ip)
		writeHeaderLine(bw, forwarded.HeaderProof, proof)
	}
	bw.WriteString("\r\n")
	if x.body.Len() > 0 {
		bw.Write(x.body.Bytes())
	}
}

// writeForwardedFor appends the client's address to what proxies before
// the router said.
func writeForwardedFor(bw *bufio.Writer, prior []string, ip string) {
	if len(prior) == 0 && ip == "" {
		return
	}
	bw.WriteString("X-Forwarded-For: ")
	for i, v := range prior {
		if i > 0 {
			bw.WriteString(", ")
		}
		bw.WriteString(v)
	}
	if ip != "" {
		if len(prior) > 0 {
			bw.WriteString(", ")
		}
		bw.WriteString(ip)
	}
	bw.WriteString("\r\n")
}

// clientIP is the host part of a RemoteAddr, without allocating.
func clientIP(addr string) string {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return addr
	}
	host := addr[:i]
	if len(host) > 1 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
	}
	return host
}
