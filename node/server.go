package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenec-go/fenec/engine"
	"github.com/fenec-go/fenec/internal/audit"
	"github.com/fenec-go/fenec/internal/connlimit"
	"github.com/fenec-go/fenec/internal/tlsx"
)

// Server is one running node. New builds it, Start listens, Close shuts
// it down gracefully; tests use it in-process on 127.0.0.1:0.
type Server struct {
	cfg     Config
	log     *slog.Logger
	reg     *registry
	guard   *guard
	audit   *audit.Log
	metrics *metrics
	lease   *nodeLease
	// conns bounds the client connections open (--max-conns,
	// --max-conns-per-addr); connState releases each as it ends.
	conns *connlimit.Limiter
	// answers bounds what answers hold at once (--max-answer-memory);
	// answersRefused counts the reads it refused (answer.go).
	answers        *answerBudget
	answersRefused atomic.Int64
	// id is the node's own (identity.go), kept in its directory.
	id string
	// absDir is the directory's absolute path, which no answer shows.
	absDir string
	tls    *tlsx.Source           // the node's certificate and CA bundle, reloaded
	tok    atomic.Pointer[tokens] // the tokens in use (tokens.go)
	// syncAlways: writes are answered once synced and sent to the
	// replicas following them.
	syncAlways bool

	// stopped is cancelled as Close begins: held requests answer, streams
	// end, new requests are refused 503. stopping is its Done channel, for
	// the selects; the context serves what waits on one (a stream's cut:
	// cutWhenGone).
	stopped  context.Context
	stop     context.CancelFunc
	stopping <-chan struct{}

	// open is set once Start has begun serving and following: /_ready.
	open atomic.Bool

	// oldFeeds (tests) has the node serve replication feeds as a node from
	// before probes and read copies did: no Fenec-Feed-Features, role not
	// read, a frame other than an ack ending the feed.
	oldFeeds atomic.Bool

	mu      sync.Mutex // guards ln, srv, started
	ln      net.Listener
	srv     *http.Server
	started bool

	wg        sync.WaitGroup // the serving goroutine
	serveErr  chan error     // cap 1: why serving stopped early
	closeOnce sync.Once
	closeErr  error
}

// New checks cfg and builds a server over its directory (created if
// missing). It does not listen yet.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if err := privateDir(cfg.Dir); err != nil {
		return nil, err
	}
	id, err := loadID(cfg.Dir)
	if err != nil {
		return nil, err
	}
	absDir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("tenant dir: %w", err)
	}
	mode, every, _ := cfg.syncMode()
	auditLog, err := audit.Open(cfg.Audit, audit.Options{})
	if err != nil {
		return nil, err
	}
	opts := engine.Options{Sync: mode, SyncEvery: every, Logger: log}
	nl, err := newNodeLease(cfg)
	if err != nil {
		auditLog.Close()
		return nil, err
	}
	s := &Server{
		cfg:        cfg,
		log:        log,
		reg:        newRegistry(cfg.Dir, opts, cfg.MaxMemory, cfg.IdleClose, cfg.Resolver, log),
		guard:      newGuard(time.Now, cfg.AdminToken),
		audit:      auditLog,
		lease:      nl,
		id:         id,
		absDir:     absDir,
		syncAlways: mode == engine.SyncAlways,
		serveErr:   make(chan error, 1),
		answers:    &answerBudget{limit: cfg.MaxAnswerMemory},
	}
	s.stopped, s.stop = context.WithCancel(context.Background())
	s.stopping = s.stopped.Done()
	s.reg.removeStaged()
	if s.tls, err = loadTLS(cfg, log, s.reg); err != nil {
		s.reg.close()
		auditLog.Close()
		return nil, err
	}
	s.metrics = newMetrics(s.reg, nl)
	s.metrics.answers(s.answers, &s.answersRefused)
	conns, lowered, limit := cfg.Conns.Clamped()
	if lowered {
		log.Warn("--max-conns lowered to leave descriptors for the tenant files and the node's own connections",
			"max_conns", conns.Total, "descriptor_limit", limit, "asked", cfg.Conns.Total)
	}
	s.conns = connlimit.New(conns, "fenec_node")
	s.conns.KeepForPeers()
	s.guard.proven = s.conns.Trust
	s.metrics.reg.MustRegister(s.conns.Collectors(false)...)
	s.reg.onStatements = s.countStatements
	s.reg.stmtTime = cfg.MaxStatementTime
	s.reg.stmtCause = fmt.Errorf("%w (%s), and nothing it did landed: give the get a limit, index (@hash, @sorted) a field the where compares, or narrow the where, then send it again",
		ErrStatementTime, cfg.MaxStatementTime)
	s.reg.stopping = s.stopping
	s.reg.leaseGate = nl.gate
	nl.steps.caughtUp = func(name, replica string) bool {
		t := s.reg.peek(name)
		return t != nil && t.copyCaughtUp(replica)
	}
	s.reg.setReplToken(cfg.ReplicationToken)
	s.reg.replicaOf = cfg.ReplicaOf
	s.tok.Store(&tokens{admin: cfg.AdminToken, data: cfg.HTTPToken, repl: cfg.ReplicationToken})
	s.reg.keepAlive = cfg.KeepAlive
	s.reg.freshEvery, s.reg.clock = cfg.FreshnessInterval, nl.clock
	return s, nil
}

// Start listens on cfg.HTTP and serves in the background.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("node already started")
	}
	select {
	case <-s.stopping:
		return ErrNodeClosed
	default:
	}
	ln, err := net.Listen("tcp", s.cfg.HTTP)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	ln = s.conns.Listener(s.listen(ln))
	s.ln, s.started = ln, true
	s.srv = &http.Server{
		Handler:           s,
		IdleTimeout:       s.cfg.IdleTimeout,
		ReadHeaderTimeout: 10 * time.Second,
		// Every answer's writes start gap-bounded; a long one's moves on
		// as it goes (respWriter).
		WriteTimeout: s.cfg.BodyTimeout,
		ErrorLog:     slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		ConnState:    s.connState,
	}
	srv := s.srv
	s.wg.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.serveErr <- err
		}
	})
	s.wg.Go(s.reloadLoop)
	s.log.Info("node serving", "addr", ln.Addr().String(), "dir", s.cfg.Dir, "tls", s.cfg.TLS.On())
	if err := s.reg.startFollowers(); err != nil {
		s.log.Error("start followers", "err", err)
	}
	s.open.Store(true)
	return nil
}

// Addr is the address the node listens on ("" before Start).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Done is closed once Close has begun.
func (s *Server) Done() <-chan struct{} { return s.stopping }

// connState counts open client connections.
func (s *Server) connState(c net.Conn, st http.ConnState) {
	switch st {
	case http.StateNew:
		s.metrics.conns.Inc()
	case http.StateClosed, http.StateHijacked:
		s.metrics.conns.Dec()
		s.conns.Release(c)
	}
}

// Close shuts the node down: it stops taking requests, answers held
// requests, ends streams, waits for the requests running, then syncs,
// checkpoints and closes every open tenant. Safe to call twice.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.shutdown() })
	return s.closeErr
}

func (s *Server) shutdown() error {
	s.open.Store(false)
	s.stop()
	var errs []error
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		if err := srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop http: %w", err))
			srv.Close()
		}
		cancel()
	}
	s.wg.Wait()
	if err := s.reg.close(); err != nil {
		errs = append(errs, err)
	}
	if err := s.audit.Close(); err != nil {
		errs = append(errs, err)
	}
	s.log.Info("node stopped", "err", errors.Join(errs...))
	return errors.Join(errs...)
}

// Run serves cfg until ctx ends, then shuts down gracefully. It returns
// nil after a clean shutdown.
func Run(ctx context.Context, cfg Config) error {
	engine.AdviseHugePages(cfg.HugePages)
	s, err := New(cfg)
	if err != nil {
		return err
	}
	if err := s.Start(); err != nil {
		s.Close()
		return err
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-s.serveErr:
	}
	return errors.Join(serveErr, s.Close())
}

// privateDir makes the tenant directory, or makes it its owner's alone
// (0700) whatever its mode was: tenant files, their side files and the
// node's id are then reached by no other user, whatever mode a file was
// given before.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("tenant dir: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("tenant dir: %w", err)
	}
	return nil
}
