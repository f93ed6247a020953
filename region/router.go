package region

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/audit"
	"github.com/fenec-go/fenec/internal/bodygap"
	"github.com/fenec-go/fenec/internal/connlimit"
	"github.com/fenec-go/fenec/internal/h1"
	"github.com/fenec-go/fenec/internal/reqpath"
	"github.com/fenec-go/fenec/lease"
	"github.com/fenec-go/fenec/region/copies"
	"github.com/fenec-go/fenec/region/failover"
	"github.com/fenec-go/fenec/region/forward"
	"github.com/fenec-go/fenec/region/lead"
	"github.com/fenec-go/fenec/region/leasing"
	"github.com/fenec-go/fenec/region/link"
	"github.com/fenec-go/fenec/region/nodeapi"
	"github.com/fenec-go/fenec/region/repair"
	"github.com/fenec-go/fenec/region/trust"
)

// startTimeout bounds the router's start: the directory coming up, the
// claim of the lead.
const startTimeout = 30 * time.Second

// Router is one fenec-shard: the forwarder below /t/, the control plane
// below /_shard/, /_metrics and /_health, over a directory kept current by
// a Watcher. NewRouter builds it, Start serves, Close stops it.
type Router struct {
	cfg Config
	log *slog.Logger
	// sides is the side this router owns for, and the checks of every
	// change against it (owner.go).
	sides sides

	ctx    context.Context // ends at Close: bounds every background job
	cancel context.CancelFunc
	wg     sync.WaitGroup // background jobs (recovering moves, serving)
	// sources are the moved tenants' source files still to be deleted.
	sources sourceDeletes

	member   *global.Embedded     // nil unless embedded
	dir      global.Directory     // the directory
	ownDir   bool                 // dir is closed by Close
	store    *global.Store        // unfenced reads
	watcher  *global.Watcher      // the in-memory copy
	unwatch  func()               // the cut trigger's subscription
	fwd      *forward.Forwarder   // /t/
	reg      *prometheus.Registry // every series of this router
	metrics  *controlMetrics
	nodes    *nodeapi.Client
	lead     *lead.Lead
	audit    *audit.Log
	metricsH http.Handler

	ln   net.Listener
	srv  *http.Server
	loop *h1.Server // serves the listener; srv is its fallback
	// conns bounds the client connections open (--max-conns,
	// --max-conns-per-addr): the loop and srv release each as it ends.
	conns *connlimit.Limiter
	id    string
	// trust is the router's certificate, the directory's key and
	// password, the router token and its back-off (package region/trust,
	// wired in trust.go).
	trust *trust.Trust

	// failover fails nodes over, by hand or on a lapsed lease, and ends
	// the restores running here on a node it fails over (package
	// region/failover, wired in failover.go).
	failover *failover.Failover

	// opMu serialises the changes that must not interleave on the leader:
	// a placement choosing a node against that node's removal.
	opMu sync.Mutex
	// repair places and makes tenants' voting copies, and has failed-over
	// nodes' copies follow again and owed copies made (package
	// region/repair, wired in repair.go).
	repair *repair.Repairer
	// copies places tenants' copies in other regions (read copies,
	// survival) and points read copies at their primary (shard_copies.go).
	copies *copies.Copies
	// leasing grants nodes their leases while this router leads
	// (--auto-failover) and asks refused writes again (package
	// region/leasing, wired in leases.go); clock is the monotonic clock
	// it decides by, which the handoff's steps read too.
	leasing      *leasing.Leasing
	leaseTr      *leasing.HTTPTransport
	leaseUnwatch func()
	clock        lease.Clock
	// link is a region's leading router's link to the global directory
	// (package region/link, wired in link.go); handoffs the global tier's
	// steps of regions' handoffs (handoff_global.go). One of them is set.
	link     *link.Link
	handoffs *globalHandoffs

	// closing is set as Close begins: /_ready answers 503 from then.
	closing atomic.Bool

	closeOnce sync.Once
	closeErr  error
}

// NewRouter checks cfg and returns a router that is not started yet.
func NewRouter(cfg Config) (*Router, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Prefix == "" {
		cfg.Prefix = global.DefaultPrefix
	}
	rt := &Router{cfg: cfg, log: log}
	rt.sides = sides{regional: len(cfg.GlobalURLs) > 0 || cfg.Global != nil, region: cfg.Region,
		view: func() *global.View {
			if rt.watcher == nil {
				return nil
			}
			return rt.watcher.View()
		},
		term: func() uint64 {
			_, term := rt.lead.Status()
			return term
		}}
	return rt, nil
}

// Run serves cfg until ctx ends (or the embedded member fails), then
// closes the router.
func Run(ctx context.Context, cfg Config) error {
	rt, err := NewRouter(cfg)
	if err != nil {
		return err
	}
	if err := rt.Start(ctx); err != nil {
		return err
	}
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-rt.memberErr():
		runErr = fmt.Errorf("directory member stopped: %w", runErr)
	}
	if err := rt.Close(); runErr == nil {
		runErr = err
	}
	return runErr
}

// memberErr receives the embedded member's failure (never, when none).
func (rt *Router) memberErr() <-chan error {
	if rt.member == nil {
		return nil
	}
	return rt.member.Err()
}

// Start opens the directory, starts watching it, claims the lead unless
// standby, and serves. ctx bounds the start only. On error everything
// begun is closed again.
func (rt *Router) Start(ctx context.Context) error {
	rt.ctx, rt.cancel = context.WithCancel(context.Background())
	sctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := rt.start(sctx); err != nil {
		_ = rt.Close()
		return err
	}
	return nil
}

func (rt *Router) start(ctx context.Context) error {
	if err := rt.wireTrust(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", rt.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	ln = rt.trust.Listen(ln)
	rt.ln = ln
	rt.id = rt.cfg.ID
	if rt.id == "" {
		rt.id = defaultID(ln.Addr())
	}
	rt.log = rt.log.With("router", rt.id)
	rt.trust.Named(rt.id, rt.log)
	if rt.audit, err = audit.Open(rt.cfg.Audit, audit.Options{Mode: 0o640}); err != nil {
		return err
	}
	if err := rt.trust.ProbeGlobal(ctx); err != nil {
		return err
	}
	if err := rt.openDirectory(ctx); err != nil {
		return err
	}
	if err := rt.trust.CheckDirectory(ctx, rt.dir); err != nil {
		return err
	}
	if err := rt.wire(); err != nil {
		return err
	}
	if rt.sides.mirroring() {
		if err := rt.wireLink(); err != nil {
			return err
		}
	} else {
		rt.handoffs = &globalHandoffs{rt: rt, givenSeen: map[string]time.Duration{}}
		rt.wg.Go(func() { rt.handoffs.run(rt.ctx) })
	}
	rt.repair.Start(rt.ctx)
	if !rt.cfg.Standby {
		leading, err := rt.lead.Claim(ctx)
		if err != nil {
			return err
		}
		if leading {
			if !rt.sides.mirroring() {
				rt.trust.SealClearNodes(ctx, rt.dir) // a region's copy is sealed as its link writes it
			}
			rt.recoverInBackground()
		}
	}
	rt.serve()
	return nil
}

// wire builds what runs over the open directory: the store, the watcher,
// the lead, the forwarder over the watcher's placements, the metrics, and
// the cut trigger.
func (rt *Router) wire() error {
	var err error
	rt.store = global.NewStore(rt.dir)
	rt.watcher = global.StartWatcher(rt.ctx, rt.dir, rt.log)
	rt.nodes = nodeapi.New(rt.cfg.NodeTimeout, rt.cfg.Forward.Resolver)
	rt.trust.Secure(rt.nodes.Transport())
	rt.lead = lead.New(lead.Deps{ID: rt.id, Name: rt.sides.dirName(), Store: rt.store, View: rt.watcher.View, Ready: rt.watcher.Ready, Now: rt.now, Log: rt.log})
	rt.wireRepair()
	rt.wireCopies()
	rt.wireFailover()
	rt.reg = prometheus.NewRegistry()
	rt.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	fc := rt.cfg.Forward
	if rt.sides.mirroring() {
		fc.Region = rt.cfg.Region
	}
	if rt.fwd, err = forward.New(fc, viewPlacements{w: rt.watcher, near: rt.cfg.Near, region: rt.sides.leasedRegion()}, rt.reg, rt.log); err != nil {
		return err
	}
	if rt.metrics, err = newControlMetrics(rt.reg, rt.watcher, rt.lead); err != nil {
		return err
	}
	conns, lowered, limit := rt.cfg.Conns.Clamped()
	if lowered {
		rt.log.Warn("--max-conns lowered to leave descriptors for the router's connections to its nodes and directory",
			"max_conns", conns.Total, "descriptor_limit", limit, "asked", rt.cfg.Conns.Total)
	}
	rt.conns = connlimit.New(conns, "fenec_router")
	for _, c := range rt.conns.Collectors(true) {
		if err := rt.reg.Register(c); err != nil {
			return err
		}
	}
	rt.metricsH = promhttp.HandlerFor(rt.reg, promhttp.HandlerOpts{Registry: rt.reg})
	rt.unwatch = rt.watcher.OnTenantChange(cutOnFailover(rt.watcher, rt.fwd, rt.log))
	return rt.wireLeasing()
}

// serve starts serving on the router's listener, on a goroutine Close
// waits for. The data path runs in the router's own loop (package h1),
// which hands anything else, connection and all, to the net/http server.
func (rt *Router) serve() {
	rt.srv = &http.Server{
		Handler:           rt,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(rt.log.Handler(), slog.LevelWarn),
		ConnState: func(c net.Conn, st http.ConnState) {
			if st == http.StateClosed || st == http.StateHijacked {
				rt.conns.Release(c)
			}
		},
	}
	rt.loop = &h1.Server{Handler: rt.fwd, Fallback: rt.srv, Prefix: "/t/",
		ReadHeaderTimeout: rt.srv.ReadHeaderTimeout, IdleTimeout: rt.srv.IdleTimeout,
		WriteGap: rt.cfg.Forward.BodyTimeout, Log: rt.log, ConnDone: rt.conns.Release}
	serve, ln := rt.loop.Serve, rt.conns.Listener(rt.ln)
	rt.wg.Go(func() {
		if err := serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			rt.log.Error("serve", "err", err)
		}
	})
	rt.wg.Go(func() { rt.trust.ReloadLoop(rt.ctx) })
	rt.log.Info("router serving", "addr", rt.ln.Addr().String(), "standby", rt.cfg.Standby, "region", rt.cfg.Region, "tls", rt.cfg.TLS.On())
}

// openDirectory opens the configured directory: the one given, an existing
// cluster, or an embedded member started here.
func (rt *Router) openDirectory(ctx context.Context) error {
	switch {
	case rt.cfg.Directory != nil:
		rt.dir = rt.trust.Seal(rt.cfg.Directory)
		return nil
	case len(rt.cfg.DirectoryURLs) > 0:
		d, err := global.OpenEtcd(ctx, rt.cfg.DirectoryURLs, rt.cfg.Prefix, rt.trust.EtcdOptions(rt.cfg.DirectoryURLs)...)
		if err != nil {
			return fmt.Errorf("open directory: %w", err)
		}
		if d, err = rt.trust.CloseDirectory(ctx, d, rt.cfg.DirectoryURLs); err != nil {
			return fmt.Errorf("close directory: %w", err)
		}
		rt.dir, rt.ownDir = rt.trust.Seal(d), true
		return nil
	}
	ecfg := rt.cfg.Etcd
	if ecfg.Log == nil && rt.cfg.Logger != nil {
		ecfg.Log = rt.log.With("part", "etcd") // the member's lines in the router's format
	}
	m, err := global.StartEmbedded(ctx, ecfg)
	if err != nil {
		return fmt.Errorf("start directory member: %w", err)
	}
	rt.member = m
	if err := m.WaitReady(ctx); err != nil {
		return fmt.Errorf("directory member: %w", err)
	}
	d, err := m.Open(ctx, rt.cfg.Prefix, rt.trust.EtcdOptions(m.ClientURLs())...)
	if err != nil {
		return fmt.Errorf("open directory: %w", err)
	}
	if d, err = rt.trust.CloseDirectory(ctx, d, m.ClientURLs()); err != nil {
		return fmt.Errorf("close directory: %w", err)
	}
	rt.dir, rt.ownDir = rt.trust.Seal(d), true
	return nil
}

// Addr is the address the router serves on ("" before Start).
func (rt *Router) Addr() string {
	if rt.ln == nil {
		return ""
	}
	return rt.ln.Addr().String()
}

// ID is the router's name in the leader record.
func (rt *Router) ID() string { return rt.id }

// DirectoryURLs are the client URLs of the router's embedded member (nil
// when it embeds none), for other routers to use with --directory.
func (rt *Router) DirectoryURLs() []string {
	if rt.member == nil {
		return nil
	}
	return rt.member.ClientURLs()
}

// Leading reports whether this router takes changes.
func (rt *Router) Leading() bool {
	if rt.lead == nil {
		return false
	}
	ok, _ := rt.lead.Status()
	return ok
}

// Close stops serving, waits for the background jobs, and closes the
// forwarder, the watcher, the directory and the member. Safe to call twice.
func (rt *Router) Close() error {
	rt.closing.Store(true)
	rt.closeOnce.Do(func() {
		var errs []error
		if rt.cancel != nil {
			rt.cancel()
		}
		if rt.leasing != nil {
			rt.leasing.Close() // its failovers may start jobs of the router's
		}
		if rt.failover != nil {
			rt.failover.Close() // its waits for held tenants
		}
		if rt.repair != nil {
			rt.repair.Close()
		}
		if rt.loop != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := rt.loop.Shutdown(ctx); err != nil {
				_ = rt.loop.Close()
			}
			cancel()
		} else if rt.ln != nil {
			_ = rt.ln.Close()
		}
		rt.wg.Wait()
		if rt.unwatch != nil {
			rt.unwatch()
		}
		if rt.leaseUnwatch != nil {
			rt.leaseUnwatch()
		}
		if rt.leaseTr != nil {
			rt.leaseTr.Close()
		}
		if rt.fwd != nil {
			errs = append(errs, rt.fwd.Close())
		}
		if rt.watcher != nil {
			errs = append(errs, rt.watcher.Close())
		}
		if rt.nodes != nil {
			rt.nodes.Close()
		}
		if rt.ownDir && rt.dir != nil {
			errs = append(errs, rt.dir.Close())
		}
		if rt.member != nil {
			errs = append(errs, rt.member.Close())
		}
		errs = append(errs, rt.audit.Close())
		rt.closeErr = errors.Join(errs...)
	})
	return rt.closeErr
}

// now is the time the audit log records.
func (rt *Router) now() time.Time { return time.Now().UTC() }

// ServeHTTP routes the router's paths; every answer carries X-Request-Id.
// /t/ is the forwarder's whole (the request's id, the body timeout): the
// router's own loop hands it there straight, and so does this, for a
// request that reached the net/http server (package h1's Fallback).
func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/t/") {
		rt.fwd.ServeHTTP(w, r)
		return
	}
	rw := &idWriter{ResponseWriter: w}
	if v := r.Header["X-Request-Id"]; len(v) == 1 && forward.SaneRequestID(v[0]) {
		rw.id[0] = v[0]
	} else {
		rw.id[0] = makeRequestID()
		r.Header["X-Request-Id"] = rw.id[:]
	}
	id := rw.id[0]
	// A body nobody reads is cut after the body timeout too.
	bodygap.Arm(rw, r, rt.cfg.Forward.BodyTimeout)
	p := r.URL.Path
	if _, err := reqpath.Segments(r); err != nil {
		cpError(rw, err)
		return
	}
	switch {
	case p == "/_shard/leases" && rt.leasing != nil: // {"leasing": false} without --auto-failover
		if rt.authorize(rw, r) {
			serveLeases(rw, r, rt.leasing)
		}
	case strings.HasPrefix(p, "/_shard/"):
		rt.serveShard(rw, r.WithContext(nodeapi.WithRequestID(r.Context(), id)))
	case p == "/_metrics":
		if rt.authorize(rw, r) {
			rt.metricsH.ServeHTTP(rw, r)
		}
	case p == "/_ready":
		rt.ready(rw, r)
	case p == "/_health":
		leading, term := rt.lead.Status()
		cpJSON(rw, http.StatusOK, map[string]any{
			"ok": true, "router": rt.id, "leading": leading, "term": term,
			"ready": viewPlacements{w: rt.watcher}.Ready(),
		})
	default:
		cpError(rw, ErrNoRoute)
	}
}

// ready answers 200 once the router holds its directory (its copy has
// arrived), 503 with Retry-After before that and once Close has begun. No
// token: it is for a health checker.
func (rt *Router) ready(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		w.Header().Set("Allow", "GET, HEAD")
		cpError(w, ErrMethod)
	case rt.closing.Load():
		cpError(w, ErrStopping)
	case !viewPlacements{w: rt.watcher}.Ready():
		cpError(w, ErrNotReady)
	default:
		cpJSON(w, http.StatusOK, map[string]any{"ready": true})
	}
}

// makeRequestID returns 16 random hex digits (an id, not a secret).
func makeRequestID() string {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], rand.Uint64())
	return hex.EncodeToString(b[:])
}

// idWriter adds X-Request-Id to an answer of the control plane's that
// lacks it.
type idWriter struct {
	http.ResponseWriter
	id    [1]string // the request's id, as a header's values (no copy made)
	wrote bool
}

func (w *idWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		if h := w.ResponseWriter.Header(); len(h["X-Request-Id"]) == 0 {
			h["X-Request-Id"] = w.id[:]
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *idWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Flush passes a stream's flush on.
func (w *idWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *idWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
