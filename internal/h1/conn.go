package h1

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"sync/atomic"
	"time"
)

// HeadBytes is the longest head the loop reads itself; a longer one goes
// to the fallback with the connection (net/http allows 1 MB). It is the
// read buffer's size: with the write buffer's, a connection holds 8 KB, as
// one of net/http's does.
const HeadBytes = 4 << 10

// maxDiscard is how much of a body its handler left unread is read and
// dropped to keep the connection; past it the connection is closed.
const maxDiscard = 256 << 10

// A connection's state, for Shutdown: idle ones are closed at once.
const (
	stateIdle int32 = iota
	stateActive
)

// conn is one client connection served by the loop. Everything in it
// belongs to its goroutine, but for state (read by Shutdown) and what the
// hang-up watch touches (see watch).
type conn struct {
	s      *Server
	nc     net.Conn
	br     *bufio.Reader
	bw     *bufio.Writer
	remote string
	tls    *tls.ConnectionState // a TLS connection's, once its handshake is done
	state  atomic.Int32

	ctx    context.Context // ends when the client is gone or the loop ends
	cancel context.CancelFunc
	tmpl   *http.Request // a request with ctx, copied into req for each request
	req    http.Request
	hdr    http.Header
	u      url.URL
	vals   []string // backing for one value per header line
	body   body
	w      response

	timer    *time.Timer   // the hang-up watch, made on first use
	armed    bool          // the watch was started for this request
	aborting atomic.Bool   // the watch's read is being ended on purpose
	watched  chan struct{} // the watch's read returned
	deadline time.Time     // the read deadline set last (zero: none)
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{
		s:       s,
		nc:      nc,
		br:      bufio.NewReaderSize(nc, HeadBytes),
		bw:      bufio.NewWriterSize(&gapWriter{nc: nc, gap: s.WriteGap}, 4<<10),
		remote:  nc.RemoteAddr().String(),
		hdr:     http.Header{},
		watched: make(chan struct{}, 1),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.tmpl = (&http.Request{}).WithContext(c.ctx)
	c.w.c = c
	c.w.hdr = http.Header{}
	c.body.c = c
	return c
}

// gapWriter is the connection as answers are written to it: each write
// finds the connection's write deadline at least three quarters of gap
// ahead (moved on once a quarter has passed since it was set), so a write
// waits on a client that takes nothing for gap at most. The loop writes
// from the serving goroutine alone; net/http, serving a handed-over
// connection, may write from another in turn, hence the atomic.
type gapWriter struct {
	nc      net.Conn
	gap     time.Duration
	movedAt atomic.Int64 // since monoStart, when the deadline was last set; 0: never
}

// monoStart is the origin gapWriter measures from: durations since it
// follow the monotonic clock, whatever the wall clock does.
var monoStart = time.Now()

func (g *gapWriter) Write(p []byte) (int, error) {
	now := time.Since(monoStart)
	if m := time.Duration(g.movedAt.Load()); m == 0 || now-m >= g.gap/4 {
		_ = g.nc.SetWriteDeadline(time.Now().Add(g.gap))
		g.movedAt.Store(int64(now))
	}
	return g.nc.Write(p)
}

// serve runs the connection's requests until it closes, is handed over,
// or the server shuts down.
func (c *conn) serve() {
	handed := false
	defer func() {
		c.cancel()
		if c.timer != nil {
			c.timer.Stop()
		}
		if !handed {
			_ = c.nc.Close()
			c.s.connDone(c.nc)
		}
		c.s.track(c, false)
	}()
	if !c.handshake() {
		return
	}
	for {
		c.state.Store(stateIdle)
		if c.s.shutting.Load() {
			return
		}
		c.idleDeadline()
		if _, err := c.br.Peek(1); err != nil {
			return
		}
		c.state.Store(stateActive)
		n, ok, err := c.readHead()
		if err != nil {
			return
		}
		if !ok {
			handed = c.handOver()
			return
		}
		if !c.run(n) {
			return
		}
	}
}

// handshake runs a TLS connection's handshake under the header timeout
// and keeps its state for the requests; a plain connection has none.
func (c *conn) handshake() bool {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return true
	}
	_ = tc.SetDeadline(time.Now().Add(c.s.ReadHeaderTimeout))
	if err := tc.HandshakeContext(c.ctx); err != nil {
		var rh tls.RecordHeaderError
		switch {
		case errors.As(err, &rh) && rh.Conn != nil && looksLikeHTTP(rh.RecordHeader[:]):
			// Plain HTTP to a TLS listener: say so, as net/http does.
			_ = rh.Conn.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = io.WriteString(rh.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
		case errors.Is(err, io.EOF):
			// Connected and left (a TCP health check): nothing to say.
		default:
			c.s.Log.Warn("tls handshake", "remote", c.remote, "err", err)
		}
		return false
	}
	_ = tc.SetDeadline(time.Time{})
	st := tc.ConnectionState()
	c.tls = &st
	return true
}

// looksLikeHTTP reports whether the first bytes a TLS listener got are
// an HTTP method's.
func looksLikeHTTP(hdr []byte) bool {
	for _, m := range []string{"GET /", "HEAD ", "POST ", "PUT /", "OPTIO", "DELET", "PATCH"} {
		if string(hdr) == m {
			return true
		}
	}
	return false
}

// readHead waits for a whole head in the buffer and parses it into req;
// ok is false when the loop does not take it (n is then meaningless).
func (c *conn) readHead() (n int, ok bool, err error) {
	timed := false
	defer func() {
		if timed {
			c.setReadDeadline(time.Time{}) // a body is not bound by it
		}
	}()
	for {
		buf, _ := c.br.Peek(c.br.Buffered())
		end, bare := headEnd(buf)
		if bare {
			return 0, false, nil
		}
		if end > 0 {
			return end, c.parse(buf[:end]), nil
		}
		if len(buf) >= HeadBytes {
			return 0, false, nil
		}
		if !timed {
			timed = true // most heads come whole with their first byte
			c.setReadDeadline(time.Now().Add(c.s.ReadHeaderTimeout))
		}
		if _, err := c.br.Peek(len(buf) + 1); err != nil {
			return 0, false, err // cut short or too slow: closed unanswered
		}
	}
}

// idleDeadline bounds the wait for the next request by the idle timeout,
// give or take a quarter of it (at most a second): a deadline is not set
// again for every request on a busy connection.
func (c *conn) idleDeadline() {
	now := time.Now()
	slack := min(time.Second, c.s.IdleTimeout/4)
	if c.deadline.IsZero() || c.deadline.Before(now.Add(c.s.IdleTimeout-slack)) {
		c.setReadDeadline(now.Add(c.s.IdleTimeout))
	}
}

// setReadDeadline sets the connection's read deadline and notes it.
func (c *conn) setReadDeadline(t time.Time) {
	c.deadline = t
	_ = c.nc.SetReadDeadline(t)
}

// handOver gives the connection, with the bytes read and not used, to the
// fallback server.
func (c *conn) handOver() bool {
	pending, _ := c.br.Peek(c.br.Buffered())
	_ = c.nc.SetDeadline(time.Time{})
	rc := &replayConn{Conn: c.nc, pending: append([]byte(nil), pending...), tls: c.tls}
	rc.gw.nc, rc.gw.gap = c.nc, c.s.WriteGap
	c.s.give(rc)
	return true
}

// run serves one parsed request whose head is n bytes; false ends the
// connection.
func (c *conn) run(n int) (keep bool) {
	_, _ = c.br.Discard(n)
	r := &c.req
	c.w.reset(r.Method == http.MethodHead, r.Close || c.s.shutting.Load())
	defer func() {
		if v := recover(); v != nil {
			keep = false
			if v != http.ErrAbortHandler {
				buf := make([]byte, 16<<10)
				buf = buf[:runtime.Stack(buf, false)]
				c.s.Log.Error("handler panic", "remote", c.remote, "uri", r.RequestURI, "panic", v, "stack", string(buf))
			}
			c.disarm()
			_ = c.bw.Flush()
		}
	}()
	if c.body.n == 0 {
		c.arm()
	}
	c.s.Handler.ServeHTTP(&c.w, r)
	c.disarm()
	if c.ctx.Err() != nil {
		return false // the client hung up
	}
	if !c.w.finish() {
		_ = c.bw.Flush() // what was sent, then the end: never looks whole
		return false
	}
	if c.body.n > 0 && !c.discardBody() {
		c.w.closeAfter = true
	}
	if c.br.Buffered() == 0 || c.w.closeAfter {
		if err := c.bw.Flush(); err != nil {
			return false
		}
	}
	return !c.w.closeAfter
}

// discardBody reads what the handler left of the body, if little, under
// the header timeout.
func (c *conn) discardBody() bool {
	if c.body.n > maxDiscard {
		return false
	}
	c.setReadDeadline(time.Now().Add(c.s.ReadHeaderTimeout))
	m, err := c.br.Discard(int(c.body.n))
	c.body.n -= int64(m)
	return err == nil
}

// arm starts the hang-up watch's timer for the running request: its body
// is wholly read, so the next byte the connection gives is past it.
func (c *conn) arm() {
	c.aborting.Store(false)
	if c.timer == nil {
		c.timer = time.AfterFunc(c.s.HangupAfter, c.watch)
	} else {
		c.timer.Reset(c.s.HangupAfter)
	}
	c.armed = true
}

// watch runs once the request has run for HangupAfter: it waits for the
// connection's next byte. An end or an error means the client is gone and
// ends the request's context; a byte (a request sent behind this one)
// stays buffered for the loop. The loop ends the wait (disarm) by moving
// the read deadline into the past.
//
// The idle deadline may pass while a long request runs: that is no
// hang-up, and the watch goes on without a deadline. (If disarm moved it
// meanwhile, aborting is already set when the watch looks again.)
func (c *conn) watch() {
	defer func() { c.watched <- struct{}{} }()
	for {
		_, err := c.br.Peek(1)
		switch {
		case err == nil || c.aborting.Load():
			return
		case isTimeout(err):
			_ = c.nc.SetReadDeadline(time.Time{})
			if c.aborting.Load() {
				return
			}
		default:
			c.cancel()
			return
		}
	}
}

// disarm stops the watch before the loop touches the reader again.
func (c *conn) disarm() {
	if !c.armed {
		return
	}
	c.armed = false
	if c.timer.Stop() {
		return // it never fired
	}
	c.aborting.Store(true)
	_ = c.nc.SetReadDeadline(aLongTimeAgo)
	<-c.watched
	c.setReadDeadline(time.Time{})
}

var aLongTimeAgo = time.Unix(1, 0)

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// body reads a request's body of a declared length from the connection.
type body struct {
	c *conn
	n int64 // bytes left
}

func (b *body) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	m, err := b.c.br.Read(p)
	b.n -= int64(m)
	if b.n == 0 {
		b.c.arm()
		return m, io.EOF
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return m, err
}

func (b *body) Close() error { return nil }

// Arrived reports whether what is left of the body is in the buffer
// already, so reading it cannot wait (package bodygap sets no deadline).
func (b *body) Arrived() bool { return b.n <= int64(b.c.br.Buffered()) }

// replayConn is a handed-over connection: its reads return the bytes the
// loop had read and not used, then the connection's own.
type replayConn struct {
	net.Conn
	pending []byte
	tls     *tls.ConnectionState // nil on plain TCP
	gw      gapWriter            // its writes: bounded as the loop's are
}

func (rc *replayConn) Write(p []byte) (int, error) { return rc.gw.Write(p) }

func (rc *replayConn) Read(p []byte) (int, error) {
	if len(rc.pending) > 0 {
		n := copy(p, rc.pending)
		rc.pending = rc.pending[n:]
		return n, nil
	}
	return rc.Conn.Read(p)
}
