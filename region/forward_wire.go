package region

import (
	"bufio"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
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
	if !validTenant(tenant) {
		return "", routeOther, ErrBadTenant
	}
	return tenant, routeOf(rest[end:]), nil
}

func validTenant(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
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

// saneRequestID accepts a client's X-Request-Id of 1–128 visible ASCII bytes.
func saneRequestID(s string) bool {
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

// parseMillis reads a non-negative decimal Fenec-Wait.
func parseMillis(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 12 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
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

// skipRequestHeader: what is not copied as is (hop-by-hop, or written by
// the router itself).
func skipRequestHeader(k string, conn []string) bool {
	switch k {
	case "Host", "Content-Length", "Expect", "X-Request-Id", "X-Forwarded-For":
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
// headers minus hop-by-hop ones, X-Request-Id and X-Forwarded-For, and the
// buffered body, then flushes. nil means the request was wholly sent.
func (x *exchange) writeRequest(bw *bufio.Writer, now time.Time) error {
	r := x.r
	resend := x.sends > 1
	bw.WriteString(r.Method)
	bw.WriteByte(' ')
	bw.WriteString(r.RequestURI)
	bw.WriteString(" HTTP/1.1\r\n")
	writeHeaderLine(bw, "Host", r.Host)
	conn := r.Header["Connection"]
	for k, vs := range r.Header {
		if skipRequestHeader(k, conn) || resend && x.wait >= 0 && k == "Fenec-Wait" {
			continue
		}
		for _, v := range vs {
			writeHeaderLine(bw, k, v)
		}
	}
	if resend && x.wait >= 0 {
		left := x.wait - now.Sub(x.start).Milliseconds()
		bw.WriteString("Fenec-Wait: ")
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
	bw.WriteString("\r\nX-Forwarded-For: ")
	if prior := r.Header["X-Forwarded-For"]; len(prior) > 0 {
		for _, v := range prior {
			bw.WriteString(v)
			bw.WriteString(", ")
		}
	}
	bw.WriteString(clientIP(r.RemoteAddr))
	bw.WriteString("\r\n\r\n")
	if x.body.Len() > 0 {
		bw.Write(x.body.Bytes())
	}
	return bw.Flush()
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

// readResponse reads the answer's head, skipping interim 1xx answers.
func readResponse(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	for {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			return nil, ErrBadAnswer
		}
		return resp, nil
	}
}

// copyAnswerHeader copies the node's headers minus hop-by-hop ones; the
// value slices are shared, the answer being the router's to pass on.
func copyAnswerHeader(dst, src http.Header) {
	conn := src["Connection"]
	for k, vs := range src {
		if hopByHop(k) || len(conn) > 0 && namedByConnection(k, conn) {
			continue
		}
		dst[k] = vs
	}
}

// hasLength: an answer read whole and passed back on a kept-alive
// connection (a length, or no body at all); otherwise it is a stream.
func hasLength(resp *http.Response) bool {
	return resp.Body == http.NoBody || resp.ContentLength >= 0
}

func chunked(resp *http.Response) bool {
	return len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] == "chunked"
}

// answer passes the node's answer back: one with a length whole, then the
// connection goes back to the pool; one without copied as it arrives.
func (f *Forwarder) answer(w http.ResponseWriter, x *exchange, p *pool, pc *pconn, tgt Target, resp *http.Response) (result, int, Target) {
	fl := &x.fl
	if !hasLength(resp) {
		if !fl.enter(phaseStream, nil) {
			pc.close()
			return f.ended(fl, true, x)
		}
		return resDone, f.stream(w, x, p, pc, tgt, resp), Target{}
	}
	if !fl.enter(phaseAnswer, nil) {
		pc.close()
		return f.ended(fl, true, x)
	}
	h := w.Header()
	copyAnswerHeader(h, resp.Header)
	if _, ok := h["Content-Length"]; !ok && resp.ContentLength >= 0 && resp.Body != http.NoBody {
		h["Content-Length"] = []string{strconv.FormatInt(resp.ContentLength, 10)}
	}
	w.WriteHeader(resp.StatusCode)
	if resp.Body != http.NoBody {
		buf := streamBufs.Get().(*[]byte)
		n, err := io.CopyBuffer(w, resp.Body, *buf)
		streamBufs.Put(buf)
		if err != nil || n != resp.ContentLength {
			pc.close()
			if _, gone, _ := fl.state(); gone {
				return resDone, statusClient, Target{}
			}
			f.metrics.upstreamError(tgt.Node)
			return resDone, codeAborted, Target{}
		}
	}
	_ = pc.c.SetDeadline(time.Time{})
	if resp.Close {
		pc.close()
	} else {
		p.put(pc, dialAddr(tgt.Addr), f.now(), f.cfg.MaxIdlePerNode)
	}
	return resDone, resp.StatusCode, Target{}
}

// stream copies an answer without a length as it arrives, flushing each
// write, until either side closes. The upstream timeout no longer applies.
func (f *Forwarder) stream(w http.ResponseWriter, x *exchange, p *pool, pc *pconn, tgt Target, resp *http.Response) int {
	_ = pc.c.SetDeadline(time.Time{})
	copyAnswerHeader(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	buf := streamBufs.Get().(*[]byte)
	defer streamBufs.Put(buf)
	for {
		n, err := resp.Body.Read(*buf)
		if n > 0 {
			if _, werr := w.Write((*buf)[:n]); werr != nil {
				pc.close()
				return statusClient
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if err == io.EOF {
			if chunked(resp) && !resp.Close {
				p.put(pc, dialAddr(tgt.Addr), f.now(), f.cfg.MaxIdlePerNode)
			} else {
				pc.close()
			}
			return resp.StatusCode
		}
		if err != nil {
			pc.close()
			cut, gone, _ := x.fl.state()
			switch {
			case gone:
				return statusClient
			case cut:
				f.metrics.cut(CutStreamEnded)
			default:
				f.metrics.upstreamError(tgt.Node)
			}
			return codeAborted
		}
	}
}

var streamBufs = newBufPool(32 << 10)

// isLeaseRefusal: a write a node refused unrun because it holds no lease
// for the tenant yet.
func isLeaseRefusal(resp *http.Response) bool {
	if resp.StatusCode != http.StatusServiceUnavailable {
		return false
	}
	v := resp.Header["Fenec-Refused"]
	return len(v) == 1 && v[0] == "lease"
}

// drainRefusal reads a refusal's (small) body so its connection can be
// kept.
func (f *Forwarder) drainRefusal(p *pool, pc *pconn, tgt Target, resp *http.Response) {
	n, err := io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if err != nil || !hasLength(resp) || n != resp.ContentLength && resp.Body != http.NoBody || resp.Close {
		pc.close()
		return
	}
	_ = pc.c.SetDeadline(time.Time{})
	p.put(pc, dialAddr(tgt.Addr), f.now(), f.cfg.MaxIdlePerNode)
}

func asMaxBytes(err error, target **http.MaxBytesError) bool { return errors.As(err, target) }
