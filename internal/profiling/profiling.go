package profiling

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/fenec-go/fenec/internal/netx"
)

// ErrNotLoopback refuses an address a remote host could reach.
var ErrNotLoopback = errors.New("profiles are served on a loopback address only (127.0.0.1:PORT, [::1]:PORT or localhost:PORT)")

// Server serves /debug/pprof/ until Close.
type Server struct {
	ln  net.Listener
	srv *http.Server
	wg  sync.WaitGroup

	closeOnce sync.Once
}

// Start listens on addr (loopback only; port 0 picks one) and serves the
// profiles there on a goroutine Close waits for.
func Start(addr string, log *slog.Logger) (*Server, error) {
	if !netx.LoopbackAddr(addr) {
		return nil, fmt.Errorf("pprof %q: %w", addr, ErrNotLoopback)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pprof listen: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	s := &Server{ln: ln, srv: &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}}
	s.wg.Go(func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("pprof serve", "err", err)
		}
	})
	log.Info("profiles served", "addr", ln.Addr().String())
	return s, nil
}

// Addr is where the profiles are served.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops serving, ending profiles in progress, and waits. Safe to
// call twice.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		err = s.srv.Close()
		s.wg.Wait()
	})
	return err
}
