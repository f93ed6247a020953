package forward

import (
	"bufio"
	"bytes"
	"net/http"
	"net/textproto"

	"github.com/fenec-go/fenec/internal/httptoken"
	"github.com/fenec-go/fenec/wire"
)

// maxHeadBytes bounds a node's answer head.
const maxHeadBytes = 64 << 10

// span locates one header line's key and value in head.lines.
type span struct{ k0, k1, v0, v1 int32 }

// head is a node's answer head, read without net/http's allocations: the
// header lines are gathered into one reused buffer and turned into one
// string, which every key and value is a slice of.
type head struct {
	status  int
	length  int64 // Content-Length, or -1
	chunked bool  // Transfer-Encoding: chunked
	close   bool  // the node closes the connection after this answer
	noBody  bool  // HEAD, 1xx, 204, 304
	refused bool  // 503 with Fenec-Refused: lease
	lines   []byte
	spans   []span
	conn    int // index in spans of the Connection header, or -1
}

// read reads the final answer head (interim 1xx answers are skipped).
func (h *head) read(br *bufio.Reader, method string) error {
	for {
		if err := h.readOne(br, method); err != nil {
			return err
		}
		switch {
		case h.status == http.StatusSwitchingProtocols:
			return ErrBadAnswer
		case h.status >= 100 && h.status < 200:
			continue
		}
		return nil
	}
}

func (h *head) readOne(br *bufio.Reader, method string) error {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return err
	}
	http10, err := h.statusLine(line)
	if err != nil {
		return err
	}
	h.length, h.chunked, h.close, h.refused = -1, false, http10, false
	h.lines, h.spans, h.conn = h.lines[:0], h.spans[:0], -1
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			if err == bufio.ErrBufferFull {
				return ErrBadAnswer
			}
			return err
		}
		line = trimEOL(line)
		if len(line) == 0 {
			break
		}
		if err := h.headerLine(line, http10); err != nil {
			return err
		}
		if len(h.lines) > maxHeadBytes {
			return ErrBadAnswer
		}
	}
	h.noBody = method == http.MethodHead || h.status < 200 || h.status == 204 || h.status == 304
	if h.chunked {
		h.length = -1
	}
	return nil
}

// statusLine parses "HTTP/1.x NNN reason".
func (h *head) statusLine(line []byte) (http10 bool, err error) {
	line = trimEOL(line)
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return false, ErrBadAnswer
	}
	if line[7] != '0' && line[7] != '1' {
		return false, ErrBadAnswer
	}
	code := 0
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return false, ErrBadAnswer
		}
		code = code*10 + int(c-'0')
	}
	if code < 100 || (len(line) > 12 && line[12] != ' ') {
		return false, ErrBadAnswer
	}
	h.status = code
	return line[7] == '0', nil
}

// headerLine records one "Key: value" line and notes the framing headers.
func (h *head) headerLine(line []byte, http10 bool) error {
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 || line[0] == ' ' || line[0] == '\t' {
		return ErrBadAnswer
	}
	key := line[:colon]
	for _, c := range key {
		if !httptoken.IsTokenByte(c) {
			return ErrBadAnswer
		}
	}
	val := bytes.TrimSpace(line[colon+1:])
	switch {
	case bytes.EqualFold(key, []byte("Content-Length")):
		n, ok := httptoken.Decimal(val, 18)
		if !ok || h.length >= 0 && h.length != n {
			return ErrBadAnswer
		}
		h.length = n
	case bytes.EqualFold(key, []byte("Transfer-Encoding")):
		if !bytes.EqualFold(val, []byte("chunked")) {
			return ErrBadAnswer
		}
		h.chunked = true
	case bytes.EqualFold(key, []byte("Connection")):
		h.conn = len(h.spans)
		if httptoken.HasToken(val, "close") {
			h.close = true
		} else if http10 && httptoken.HasToken(val, "keep-alive") {
			h.close = false
		}
	case bytes.EqualFold(key, []byte(wire.HeaderRefused)):
		h.refused = h.status == http.StatusServiceUnavailable && string(val) == wire.RefusedLease
	}
	k0 := int32(len(h.lines))
	h.lines = append(h.lines, key...)
	v0 := int32(len(h.lines))
	h.lines = append(h.lines, val...)
	h.spans = append(h.spans, span{k0, v0, v0, int32(len(h.lines))})
	return nil
}

// fill copies the head's end-to-end headers into dst: one string for all
// of them, one slice backing every value.
func (h *head) fill(dst http.Header) {
	if len(h.spans) == 0 {
		return
	}
	s := string(h.lines)
	vals := make([]string, len(h.spans))
	var conn string
	if h.conn >= 0 {
		sp := h.spans[h.conn]
		conn = s[sp.v0:sp.v1]
	}
	for i, sp := range h.spans {
		key := s[sp.k0:sp.k1]
		if !httptoken.Canonical(key) {
			key = textproto.CanonicalMIMEHeaderKey(key)
		}
		if hopByHop(key) || conn != "" && namedByConnection(key, []string{conn}) {
			continue
		}
		if h.chunked && key == "Content-Length" {
			continue
		}
		vals[i] = s[sp.v0:sp.v1]
		if h.seenBefore(s, i, key) {
			dst[key] = append(dst[key], vals[i])
			continue
		}
		// The node's value replaces one set before (a middleware's).
		dst[key] = vals[i : i+1 : i+1]
	}
}

// seenBefore reports whether a header line before the i-th has key.
func (h *head) seenBefore(s string, i int, key string) bool {
	for _, sp := range h.spans[:i] {
		if k := s[sp.k0:sp.k1]; len(k) == len(key) && (k == key || textproto.CanonicalMIMEHeaderKey(k) == key) {
			return true
		}
	}
	return false
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
		if n := len(b); n > 0 && b[n-1] == '\r' {
			b = b[:n-1]
		}
	}
	return b
}
