package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/fenec-go/fenec/internal/audit"
	"github.com/fenec-go/fenec/internal/badtoken"
	"github.com/fenec-go/fenec/internal/bodygap"
	"github.com/fenec-go/fenec/internal/reqpath"
	"github.com/fenec-go/fenec/wire"
)

// call is one request on its way through the node.
type call struct {
	s     *Server
	w     *respWriter
	r     *http.Request
	id    string       // X-Request-Id
	log   *slog.Logger // carries request_id
	route string       // metrics label: a route's name, never a tenant
	t     *tenant      // for data and per-tenant admin routes, once acquired
	ask   readAsk      // what a data request asks of its answer's freshness (staleness.go)
	ans   *answerHold  // what its answer holds of the node's budget (answer.go), once charged
}

// respWriter remembers the status for metrics and logs, and bounds how
// long a client may leave an answer untaken. Every request starts with
// the connection's write deadline gap ahead (the body timeout: the
// server's WriteTimeout sets it as it reads the head). Once an answer is
// long (more than quietAnswer bytes, or flushed: a stream, an image), the
// deadline is moved on before its writes, so a client that stops reading
// holds the handler, and the tenant it holds, no longer than gap, while
// one that keeps reading is never cut for the answer's size. A small
// answer is written by the server after the handler returns, and finish
// gives that write gap too when the handler ran long.
type respWriter struct {
	http.ResponseWriter
	status int

	gap     time.Duration
	body    bool // the request declared a body, which the handler may leave unread
	written int64
	movedAt time.Time // when the deadline was last set: the request's start, then by moveDeadline

	mu       sync.Mutex               // guards rc, cut, finished
	rc       *http.ResponseController // made once the deadline is moved
	cut      bool                     // cutSoon was called: the deadline moves no further
	finished bool                     // the handler returned: the connection is no longer its
}

// quietAnswer is how much of an answer goes out without a write deadline:
// what net/http holds, unsent, until the handler returns (its buffer
// before it picks a length or chunks), so no write of it inside the
// handler can wait on the client. Past it, a write may flush to the socket
// and wait there.
const quietAnswer = 2 << 10

// writeStep bounds one write under the deadline, so a large answer is
// given it anew every so many bytes rather than once for the whole.
const writeStep = 64 << 10

func (w *respWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *respWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.written+int64(len(b)) <= quietAnswer || w.gap <= 0 {
		w.written += int64(len(b))
		return w.ResponseWriter.Write(b)
	}
	var done int
	for done < len(b) {
		w.moveDeadline()
		k, err := w.ResponseWriter.Write(b[done:min(len(b), done+writeStep)])
		done += k
		w.written += int64(k)
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// Flush sends what is buffered; FlushError says whether it went.
func (w *respWriter) Flush() { _ = w.FlushError() }

func (w *respWriter) FlushError() error {
	w.moveDeadline()
	return http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *respWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// moveDeadline sets the write deadline gap from now, unless it was set
// less than a quarter of gap ago (a write starting now has at least three
// quarters of it) or a cut was asked.
func (w *respWriter) moveDeadline() {
	if w.gap <= 0 {
		return
	}
	now := time.Now()
	if now.Sub(w.movedAt) < w.gap/4 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cut || w.finished {
		return
	}
	w.setLocked(now, w.gap)
}

// setLocked sets the write deadline d from now; w.mu is held.
func (w *respWriter) setLocked(now time.Time, d time.Duration) {
	if w.rc == nil {
		w.rc = http.NewResponseController(w.ResponseWriter)
	}
	if err := w.rc.SetWriteDeadline(now.Add(d)); err != nil {
		w.gap = 0 // a connection that takes no deadline (a test's recorder)
		return
	}
	w.movedAt = now
}

// cutSoon gives the answer grace to be taken and no more: the tenant it
// serves is going, or the node is stopping. A client that reads gets the
// stream's last event; one that stopped is cut, and what the handler
// holds is let go. Safe from any goroutine; nothing once the handler is
// done.
func (w *respWriter) cutSoon(grace time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.finished {
		return
	}
	w.cut = true
	if w.rc == nil {
		w.rc = http.NewResponseController(w.ResponseWriter)
	}
	_ = w.rc.SetWriteDeadline(time.Now().Add(grace))
}

// finish ends the handler's hold on the connection. What the server
// writes after it — a small answer whole, the end of a long one — is
// bounded by the deadline in force, moved gap ahead if a quarter of it
// passed since it was set (a handler that ran long); a cut's stands. With
// a request body, the server may first read what the handler left of it,
// which waits up to a gap (package bodygap), so the deadline is two gaps
// ahead. The next request on the connection starts with its own
// (WriteTimeout).
func (w *respWriter) finish() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.finished = true
	if w.cut || w.gap <= 0 {
		return
	}
	switch now := time.Now(); {
	case w.body:
		w.setLocked(now, 2*w.gap)
	case now.Sub(w.movedAt) >= w.gap/4:
		w.setLocked(now, w.gap)
	}
}

// streamGrace is how long a stream is given to take its last event once
// its tenant goes or the node stops (cutWhenGone).
const streamGrace = 2 * time.Second

// cutWhenGone has c's answer, a stream of c.t's, cut streamGrace after its
// tenant goes or the node starts stopping (respWriter.cutSoon): a stream's
// handler waits on those between events, but one blocked in a write to a
// client that stopped reading would hold the tenant, and the removal or
// shutdown waiting on it, until the body timeout. It returns what lets the
// watch go, for the handler to defer.
func (c *call) cutWhenGone() (release func()) {
	cut := func() { c.w.cutSoon(streamGrace) }
	gone := context.AfterFunc(c.t.ctx, cut)
	stop := context.AfterFunc(c.s.stopped, cut)
	return func() { gone(); stop() }
}

// ServeHTTP is the node's one entry: request id, path checks, routing,
// metrics.
func (s *Server) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := requestID(r.Header.Get("X-Request-Id"))
	rw.Header().Set("X-Request-Id", id)
	body := r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
	c := &call{s: s, w: &respWriter{ResponseWriter: rw, gap: s.cfg.BodyTimeout, body: body, movedAt: start}, r: r, id: id, route: "unknown"}
	c.log = s.log.With("request_id", id)
	// A body nobody reads is cut after the body timeout too; one read is
	// read through c.body.
	bodygap.Arm(rw, r, s.cfg.BodyTimeout)
	defer func() {
		if c.ans != nil {
			c.ans.release()
		}
		if c.w.status == 0 {
			c.w.WriteHeader(http.StatusOK)
		}
		c.w.finish()
		s.metrics.duration.WithLabelValues(c.route).Observe(time.Since(start).Seconds())
		s.metrics.countError(c.w.status)
		c.log.Debug("request", "method", r.Method, "route", c.route, "status", c.w.status,
			"ms", time.Since(start).Milliseconds())
	}()
	select {
	case <-s.stopping:
		c.fail(ErrShuttingDown)
		return
	default:
	}
	segs, err := splitPath(r)
	if err != nil {
		c.fail(err)
		return
	}
	switch {
	case len(segs) == 1 && segs[0] == "_health":
		c.route = "health"
		c.health()
	case len(segs) == 1 && segs[0] == "_ready":
		c.route = "ready"
		c.ready()
	case len(segs) == 1 && segs[0] == "_metrics":
		c.route = "metrics"
		c.serveMetrics()
	case len(segs) >= 1 && segs[0] == "_admin":
		c.admin(segs[1:])
	case len(segs) >= 2 && segs[0] == "t":
		rw.Header().Set(wire.HeaderNode, s.id) // which node answered, through any router
		c.data(segs[1], segs[2:])
	default:
		c.fail(ErrNoRoute)
	}
}

// splitPath checks the raw path and splits it into segments, as
// reqpath does on every server: nothing in a path may name a file outside
// the directory, nor be read two ways.
func splitPath(r *http.Request) ([]string, error) {
	return reqpath.Segments(r) // its errors wrap ErrBadPath, the node's too
}

// requestID keeps the client's id if it is sane (1..128 printable ASCII),
// else makes a new random one.
func requestID(got string) string {
	if n := len(got); n > 0 && n <= 128 {
		ok := true
		for i := 0; i < n; i++ {
			if got[i] < 0x21 || got[i] > 0x7e {
				ok = false
				break
			}
		}
		if ok {
			return got
		}
	}
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// fail answers err by the status table.
func (c *call) fail(err error) { c.failWith(err, nil) }

// failWith answers err with named fields beside "error".
func (c *call) failWith(err error, fields map[string]any) {
	if err, ok := c.declined(err); ok {
		c.decline(err, 0, false)
		return
	}
	err = c.s.pathless(c.stoppedAnswer(err))
	status := writeError(c.w, err, fields)
	if status >= 500 && status != 503 && status != 504 && status != 507 {
		c.log.Error("request failed", "route", c.route, "status", status, "err", err)
	}
}

// pathless is err as a client may read it: no answer shows where the
// node keeps its files (the node's log does).
func (s *Server) pathless(err error) error {
	if d := s.absDir; d != "" && strings.Contains(err.Error(), d) {
		return &fileError{err: err, msg: strings.ReplaceAll(err.Error(), d, "<dir>")}
	}
	return err
}

// method refuses the request unless its method is one of want.
func (c *call) method(want ...string) bool {
	for _, m := range want {
		if c.r.Method == m {
			return true
		}
	}
	c.w.Header().Set("Allow", strings.Join(want, ", "))
	c.fail(fmt.Errorf("%w: %s", ErrMethod, c.r.Method))
	return false
}

// authorize checks the request's token against want, the token of
// surface s (no check when want is empty); refusals are answered, counted
// toward the client's back-off on that surface and audited.
func (c *call) authorize(s surface, want, tenant string) bool {
	if want == "" {
		return true
	}
	err := c.s.guard.checkEither(c.r, s, want, c.s.tokens().previous(want))
	if err == nil {
		if s == surfaceReplication {
			c.s.conns.Trust(c.r.RemoteAddr) // a copy of this node's tenants
		}
		return true
	}
	c.fail(err)
	c.s.auditf(c, auditRefused, tenant, err.Error())
	return false
}

// auditf records one audit line about c: a change whole, a refusal
// counted against its client (package audit).
func (s *Server) auditf(c *call, what, tenant, detail string) {
	who, via := s.guard.who(c.r)
	e := audit.Entry{Who: who, Via: via, What: what, Tenant: tenant, RequestID: c.id, Status: c.w.status, Detail: detail}
	var err error
	if what == auditRefused {
		err = s.audit.Refused(badtoken.ClientKey(who), e)
	} else {
		err = s.audit.Record(e)
	}
	if err != nil {
		c.log.Error("audit", "err", err)
	}
}

// auditRefused is the what of a refusal of a credential (a token, a
// client certificate): counted, not written a line each.
const auditRefused = "refused"

// queryValues parses the query string; a malformed one (a stray ';', a
// bad escape) is refused rather than half read.
func (c *call) queryValues() (url.Values, error) {
	q, err := url.ParseQuery(c.r.URL.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("%w: query string: %v", ErrBadRequest, err)
	}
	return q, nil
}

// body is the request's body, cut once it sends no byte for the body
// timeout (an error wrapping ErrBodyStalled).
func (c *call) body() io.Reader {
	return stalled{bodygap.Reader(c.w, c.r.Body, c.s.cfg.BodyTimeout)}
}

// stalled turns the gap's error into the node's.
type stalled struct{ r io.Reader }

func (s stalled) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if errors.Is(err, bodygap.ErrStalled) {
		err = fmt.Errorf("%w (%v)", ErrBodyStalled, err)
	}
	return n, err
}

// readBody reads the whole body up to the node's limit: 413 past it, 408
// for one that stopped arriving, 400 for one that cannot be read (chunked
// garbage).
func (c *call) readBody() ([]byte, error) {
	body := http.MaxBytesReader(c.w, io.NopCloser(c.body()), c.s.cfg.MaxBody)
	b, err := io.ReadAll(body)
	var mb *http.MaxBytesError
	switch {
	case errors.As(err, &mb):
		return nil, fmt.Errorf("%w: limit %d bytes", ErrBodyTooLarge, c.s.cfg.MaxBody)
	case errors.Is(err, ErrBodyStalled):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("%w: read body: %v", ErrBadRequest, err)
	}
	return b, nil
}

func (c *call) health() {
	if c.method(http.MethodGet, http.MethodHead) {
		writeRaw(c.w, http.StatusOK, []byte(`{"ok":true}`))
	}
}

// ready answers 200 once the node serves and has started following its
// copies' primaries, 503 before (and while it shuts down: ServeHTTP refuses
// every request then). No token: it is for a health checker.
func (c *call) ready() {
	if !c.method(http.MethodGet, http.MethodHead) {
		return
	}
	if !c.s.open.Load() {
		c.fail(ErrStarting)
		return
	}
	writeRaw(c.w, http.StatusOK, []byte(`{"ready":true}`))
}

// serveMetrics answers Prometheus text; it needs the admin token if one
// is set, else the data token if one is set.
func (c *call) serveMetrics() {
	tok := c.s.tokens()
	want, surf := tok.admin, surfaceAdmin
	if want == "" {
		want, surf = tok.data, surfaceData
	}
	if !c.method(http.MethodGet) || !c.authorize(surf, want, "") {
		return
	}
	c.s.metrics.handler().ServeHTTP(c.w, c.r)
}
