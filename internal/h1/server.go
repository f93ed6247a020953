package h1

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Server serves HTTP/1.1 on a listener: requests it can frame strictly go
// through its own loop to Handler, the rest to Fallback.
type Server struct {
	// Handler serves the requests the loop takes. It must not keep the
	// request, its header or the writer after it returns: they are reused
	// for the connection's next request.
	Handler http.Handler
	// Fallback serves every connection handed over. Its Handler should be
	// the same as Handler; Serve starts it and Shutdown stops it. Serve
	// also sets its ConnContext and wraps its Handler so that a request
	// on a handed-over TLS connection has its TLS state, as on any other.
	Fallback *http.Server
	// Prefix is what a request target must start with for the loop to
	// take it ("/t/"; "" takes every origin-form target).
	Prefix string
	// ReadHeaderTimeout bounds reading a head once its first byte came;
	// IdleTimeout bounds the wait for the next request on a kept
	// connection. Zero: 10 s and 2 min.
	ReadHeaderTimeout, IdleTimeout time.Duration
	// HangupAfter is how long a request runs before its connection is
	// watched for the client hanging up (its context then ends). Zero: 10 ms.
	HangupAfter time.Duration
	// WriteGap bounds how long a write of an answer waits on a client that
	// takes no byte: every write finds the connection's write deadline at
	// least three quarters of it ahead, so a client that stops reading is
	// cut, and one reading a long answer or a stream steadily never is.
	// A connection handed over to Fallback keeps the bound. Zero: 30 s.
	WriteGap time.Duration
	// Log records handler panics (nil: discarded).
	Log *slog.Logger
	// ConnDone, if set, is called once for each connection accepted that
	// ends without reaching Fallback: served by the loop to its end, or
	// closed as the server shuts down. Fallback's ConnState reports the
	// connections handed over to it.
	ConnDone func(net.Conn)

	mu       sync.Mutex
	conns    map[*conn]struct{} // guarded by mu: connections the loop serves
	ln       net.Listener       // guarded by mu
	handover *handoverListener  // guarded by mu
	shutting atomic.Bool
	wg       sync.WaitGroup // the accept loop's connections and the fallback
	done     chan struct{}  // closed when every connection of the loop ended
}

// defaults fills the zero settings.
func (s *Server) defaults() {
	if s.ReadHeaderTimeout <= 0 {
		s.ReadHeaderTimeout = 10 * time.Second
	}
	if s.IdleTimeout <= 0 {
		s.IdleTimeout = 2 * time.Minute
	}
	if s.HangupAfter <= 0 {
		s.HangupAfter = 10 * time.Millisecond
	}
	if s.WriteGap <= 0 {
		s.WriteGap = 30 * time.Second
	}
	if s.Log == nil {
		s.Log = slog.New(slog.DiscardHandler)
	}
}

// Serve accepts connections on ln until Shutdown or Close, and returns
// http.ErrServerClosed then (another error if accepting failed).
func (s *Server) Serve(ln net.Listener) error {
	s.defaults()
	s.mu.Lock()
	if s.shutting.Load() {
		s.mu.Unlock()
		_ = ln.Close()
		return http.ErrServerClosed
	}
	s.ln = ln
	s.conns = map[*conn]struct{}{}
	s.handover = newHandoverListener(ln.Addr())
	ho := s.handover
	s.mu.Unlock()
	s.Fallback.ConnContext = handedContext(s.Fallback.ConnContext)
	s.Fallback.Handler = handedTLS{s.Fallback.Handler}
	s.wg.Go(func() {
		if err := s.Fallback.Serve(ho); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.Log.Error("fallback server", "err", err)
		}
	})
	var pause time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.shutting.Load() {
				return http.ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of descriptors, or a peer gone before it was taken:
			// wait a little and go on, as net/http does.
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			time.Sleep(pause)
			continue
		}
		pause = 0
		c := newConn(s, nc)
		if !s.track(c, true) {
			_ = nc.Close()
			s.connDone(nc)
			continue
		}
		s.wg.Go(c.serve)
	}
}

// track adds or removes a connection; adding fails once shutting down.
func (s *Server) track(c *conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		if s.shutting.Load() {
			return false
		}
		s.conns[c] = struct{}{}
		return true
	}
	delete(s.conns, c)
	if len(s.conns) == 0 && s.done != nil {
		close(s.done)
		s.done = nil
	}
	return true
}

// give hands a connection to the fallback server.
func (s *Server) give(nc net.Conn) {
	s.mu.Lock()
	ho := s.handover
	s.mu.Unlock()
	if !ho.give(nc) {
		_ = nc.Close()
		s.connDone(nc)
	}
}

// connDone reports a connection's end to ConnDone.
func (s *Server) connDone(nc net.Conn) {
	if s.ConnDone != nil {
		s.ConnDone(nc)
	}
}

// Shutdown stops accepting, closes idle connections, lets those serving a
// request finish it (then closes them), and shuts the fallback down, all
// within ctx; past it, what is left is closed.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutting.Store(true)
	s.mu.Lock()
	if s.ln != nil {
		_ = s.ln.Close()
	}
	var done chan struct{}
	if len(s.conns) > 0 {
		done = make(chan struct{})
		s.done = done
	}
	s.mu.Unlock()
	fallbackErr := make(chan error, 1)
	go func() { fallbackErr <- s.Fallback.Shutdown(ctx) }()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for done != nil {
		s.closeIdle()
		select {
		case <-done:
			done = nil
		case <-ctx.Done():
			s.closeAll()
			<-fallbackErr
			s.wait()
			return ctx.Err()
		case <-tick.C:
		}
	}
	err := <-fallbackErr
	s.wait()
	return err
}

// Close closes the listener and every connection at once.
func (s *Server) Close() error {
	s.shutting.Store(true)
	s.mu.Lock()
	if s.ln != nil {
		_ = s.ln.Close()
	}
	s.mu.Unlock()
	s.closeAll()
	err := s.Fallback.Close()
	s.wait()
	return err
}

// wait ends the handover listener and waits for every goroutine.
func (s *Server) wait() {
	s.mu.Lock()
	ho := s.handover
	s.mu.Unlock()
	if ho != nil {
		ho.Close()
	}
	s.wg.Wait()
}

func (s *Server) closeIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.state.Load() == stateIdle {
			_ = c.nc.Close()
		}
	}
}

func (s *Server) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		_ = c.nc.Close()
	}
}

// handoverListener is the fallback server's listener: it accepts the
// connections the loop gives it.
type handoverListener struct {
	addr   net.Addr
	ch     chan net.Conn
	mu     sync.Mutex
	closed bool // guarded by mu
	stop   chan struct{}
}

func newHandoverListener(addr net.Addr) *handoverListener {
	return &handoverListener{addr: addr, ch: make(chan net.Conn), stop: make(chan struct{})}
}

// give passes nc to the fallback's Accept; false once closed.
func (l *handoverListener) give(nc net.Conn) bool {
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return false
	}
	select {
	case l.ch <- nc:
		return true
	case <-l.stop:
		return false
	}
}

func (l *handoverListener) Accept() (net.Conn, error) {
	select {
	case nc := <-l.ch:
		return nc, nil
	case <-l.stop:
		return nil, net.ErrClosed
	}
}

func (l *handoverListener) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.stop)
	}
	return nil
}

func (l *handoverListener) Addr() net.Addr { return l.addr }

// tlsKey carries a handed-over connection's TLS state in its context.
type tlsKey struct{}

// handedContext notes a handed-over TLS connection's state in its
// context, after what next (the fallback's own ConnContext, if any) does.
func handedContext(next func(context.Context, net.Conn) context.Context) func(context.Context, net.Conn) context.Context {
	return func(ctx context.Context, nc net.Conn) context.Context {
		if next != nil {
			ctx = next(ctx, nc)
		}
		if rc, ok := nc.(*replayConn); ok && rc.tls != nil {
			ctx = context.WithValue(ctx, tlsKey{}, rc.tls)
		}
		return ctx
	}
}

// handedTLS gives a request on a handed-over TLS connection its state:
// net/http sees only the wrapper and leaves Request.TLS nil.
type handedTLS struct{ h http.Handler }

func (h handedTLS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if st, ok := r.Context().Value(tlsKey{}).(*tls.ConnectionState); ok && r.TLS == nil {
		r2 := *r
		r2.TLS = st
		r = &r2
	}
	h.h.ServeHTTP(w, r)
}
