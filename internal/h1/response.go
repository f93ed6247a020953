package h1

import (
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fenec-go/fenec/internal/httptoken"
)

// bufferBody is how much of an answer without a Content-Length is held to
// send it with one; past it, or at a Flush, the answer is chunked.
const bufferBody = 4 << 10

// response is the loop's http.ResponseWriter, one per connection, reset
// for each request. Its head goes out with the first bytes of the body.
type response struct {
	c          *conn
	hdr        http.Header
	status     int
	wrote      bool  // WriteHeader was called (a final status)
	committed  bool  // the head is in the connection's writer
	head       bool  // the request was HEAD: no body goes out
	length     int64 // the Content-Length the handler set, or -1
	written    int64 // body bytes the handler wrote
	chunked    bool
	closeAfter bool
	pending    []byte // body held until the head can say its length
	scratch    [20]byte
}

func (w *response) reset(head, closeAfter bool) {
	clear(w.hdr)
	w.status, w.wrote, w.committed, w.head = 0, false, false, head
	w.length, w.written, w.chunked, w.closeAfter = -1, 0, false, closeAfter
	w.pending = w.pending[:0]
}

func (w *response) Header() http.Header { return w.hdr }

func (w *response) WriteHeader(code int) {
	if w.wrote || code < 100 || code > 999 {
		return
	}
	if code < 200 && code != http.StatusSwitchingProtocols {
		w.informational(code)
		return
	}
	w.wrote, w.status = true, code
	if v := w.hdr["Content-Length"]; len(v) == 1 {
		if n, ok := httptoken.Decimal(v[0], 18); ok {
			w.length = n
		} else {
			delete(w.hdr, "Content-Length") // as net/http: a bad one is dropped
		}
	} else if len(v) > 1 {
		delete(w.hdr, "Content-Length")
	}
	if httptoken.HasToken(strings.Join(w.hdr["Connection"], ","), "close") {
		w.closeAfter = true
	}
}

// informational writes a 1xx head at once, as net/http does.
func (w *response) informational(code int) {
	w.statusLine(code)
	w.headerLines()
	_, _ = w.c.bw.WriteString("\r\n")
	_ = w.c.bw.Flush()
}

// bodyless: no body may follow this status.
func bodyless(code int) bool {
	return code == http.StatusNoContent || code == http.StatusNotModified || code < 200
}

func (w *response) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if bodyless(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	if w.length >= 0 && w.written+int64(len(p)) > w.length {
		return 0, http.ErrContentLength
	}
	w.written += int64(len(p))
	if w.head {
		return len(p), nil
	}
	if !w.committed {
		if w.length >= 0 {
			w.commit()
		} else if len(w.pending)+len(p) <= bufferBody {
			w.pending = append(w.pending, p...)
			return len(p), nil
		} else {
			w.startChunked()
		}
	}
	if w.chunked {
		return len(p), w.chunk(p)
	}
	return w.c.bw.Write(p)
}

// Flush sends the head and what the body has so far; an answer whose
// length is not known goes chunked from here.
func (w *response) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if !w.committed {
		if w.length < 0 && !w.head && !bodyless(w.status) {
			w.startChunked()
		} else {
			w.commit()
		}
	}
	_ = w.c.bw.Flush()
}

// SetReadDeadline and SetWriteDeadline serve http.ResponseController.
func (w *response) SetReadDeadline(t time.Time) error {
	w.c.setReadDeadline(t)
	return nil
}
func (w *response) SetWriteDeadline(t time.Time) error { return w.c.nc.SetWriteDeadline(t) }

// finish ends the answer once the handler returned; false if it is short
// of its Content-Length (the connection must then close) or failed.
func (w *response) finish() bool {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if !w.committed {
		if w.length < 0 && !bodyless(w.status) && (!w.head || w.written > 0) {
			w.length = w.written
		}
		w.commit()
	}
	switch {
	case w.chunked:
		_, err := w.c.bw.WriteString("0\r\n\r\n")
		return err == nil
	case w.head || bodyless(w.status):
		return true
	}
	return w.written == w.length
}

// startChunked sends the head for a chunked answer and the body held.
func (w *response) startChunked() {
	w.chunked = true
	w.commit()
	if len(w.pending) > 0 {
		_ = w.chunk(w.pending)
		w.pending = w.pending[:0]
	}
}

func (w *response) chunk(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	bw := w.c.bw
	bw.Write(strconv.AppendInt(w.scratch[:0], int64(len(p)), 16))
	bw.WriteString("\r\n")
	bw.Write(p)
	_, err := bw.WriteString("\r\n")
	return err
}

// commit writes the head (and a held body) into the connection's writer.
func (w *response) commit() {
	w.committed = true
	w.closeAfter = w.closeAfter || w.c.s.shutting.Load()
	bw := w.c.bw
	w.statusLine(w.status)
	if _, ok := w.hdr["Content-Type"]; !ok && len(w.pending) > 0 {
		w.hdr["Content-Type"] = []string{http.DetectContentType(w.pending)}
	}
	w.headerLines()
	if _, ok := w.hdr["Date"]; !ok {
		bw.WriteString("Date: ")
		bw.WriteString(httpDate())
		bw.WriteString("\r\n")
	}
	switch {
	case bodyless(w.status):
	case w.chunked:
		bw.WriteString("Transfer-Encoding: chunked\r\n")
	case w.length >= 0 && len(w.hdr["Content-Length"]) == 0:
		bw.WriteString("Content-Length: ")
		bw.Write(strconv.AppendInt(w.scratch[:0], w.length, 10))
		bw.WriteString("\r\n")
	}
	if w.closeAfter && len(w.hdr["Connection"]) == 0 {
		bw.WriteString("Connection: close\r\n")
	}
	bw.WriteString("\r\n")
	if len(w.pending) > 0 && !w.chunked {
		bw.Write(w.pending)
		w.pending = w.pending[:0]
	}
}

func (w *response) statusLine(code int) {
	bw := w.c.bw
	bw.WriteString("HTTP/1.1 ")
	bw.Write(strconv.AppendInt(w.scratch[:0], int64(code), 10))
	bw.WriteByte(' ')
	if text := http.StatusText(code); text != "" {
		bw.WriteString(text)
	} else {
		bw.WriteString("status code ")
		bw.Write(strconv.AppendInt(w.scratch[:0], int64(code), 10))
	}
	bw.WriteString("\r\n")
}

// headerLines writes the handler's headers, but for the framing ones the
// writer decides and any name that is not a token; CR and LF in a value
// become spaces, as net/http writes them.
func (w *response) headerLines() {
	bw := w.c.bw
	for k, vs := range w.hdr {
		if k == "Transfer-Encoding" || k == "Content-Length" && (w.chunked || bodyless(w.status)) || !validName(k) {
			continue
		}
		for _, v := range vs {
			bw.WriteString(k)
			bw.WriteString(": ")
			if strings.ContainsAny(v, "\r\n") {
				v = strings.NewReplacer("\r", " ", "\n", " ").Replace(v)
			}
			bw.WriteString(strings.TrimSpace(v))
			bw.WriteString("\r\n")
		}
	}
}

func validName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		if !httptoken.IsTokenByte(k[i]) {
			return false
		}
	}
	return true
}

// httpDate is the Date header's value, made once a second.
func httpDate() string {
	now := time.Now()
	sec := now.Unix()
	if d := dateCache.Load(); d != nil && d.sec == sec {
		return d.s
	}
	d := &cachedDate{sec: sec, s: now.UTC().Format(http.TimeFormat)}
	dateCache.Store(d)
	return d.s
}

type cachedDate struct {
	sec int64
	s   string
}

var dateCache atomic.Pointer[cachedDate]
