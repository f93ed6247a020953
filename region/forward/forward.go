package forward

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenec-go/fenec/internal/bodygap"
	"github.com/fenec-go/fenec/internal/httptoken"
	"github.com/fenec-go/fenec/internal/netx"
	"github.com/fenec-go/fenec/wire"
)

// Target is where a tenant is served: the node's name and address.
type Target struct {
	Node string // the node's name in the directory
	Addr string // "host:port" or "http://host:port"
	// Token is the node's admin token. The forwarder sends its proof
	// (package forwarded) beside the client's address on every request,
	// so the node counts a client's bad tokens against that client and
	// not against the router; "" sends neither.
	Token string
	// Refused, when set, says why the node's record must not be used (its
	// token's seal did not open): nothing is sent there, and the request
	// is answered 502 (ErrUntrustedNode).
	Refused error
	// Unavailable, when set, says the node is recorded lost with the
	// tenant still on it: the request is answered 503 at once
	// (unavailable.go), unless a read copy near the router answers it.
	Unavailable *Unavailable
}

// Placements is the forwarder's view of the directory. The control plane
// implements it over its in-memory copy, kept current by a watch.
type Placements interface {
	// Lookup names the node serving tenant.
	Lookup(tenant string) (Target, bool)
	// Ready reports whether placements have arrived at all; until then an
	// unknown tenant is 503, not 404.
	Ready() bool
}

// maxAttempts bounds the attempts of one request however many cuts,
// redirects and retries it meets.
const maxAttempts = 8

// Forwarder is the http.Handler for /t/<tenant>/...: it sends each request
// to the tenant's node byte for byte and passes the answer back.
//
// Wiring, for the control plane: New over its Placements and the
// router's registry; mount it on "/t/"; SetLeaseRetry once leasing runs;
// call Cut(node, {tenant: new target}) as soon as the directory shows
// tenants failed over off node (on every router, leading or not; never for
// a move); Close on shutdown. It is the whole of /t/: mounted with no
// middleware, it arms the body timeout itself and gives every answer an
// X-Request-Id — the client's when sane, passed on to the node, which
// answers with it; else one made for the node, or, for an answer of the
// router's own, made then.
type Forwarder struct {
	cfg     Config
	place   Placements
	copies  CopyPlacements // place, if it names read copies too (near.go)
	log     *slog.Logger
	metrics *forwardMetrics
	near    *nearMetrics
	lost    map[string]prometheus.Counter // unavailable answers, by reason
	budget  *bodyBudget
	pools   pools
	dial    dialFunc
	now     func() time.Time
	// unknown is the refusal of a tenant no placement names.
	unknown error

	lease atomic.Pointer[leaseRetryBox]
	// proofs maps an admin token to its proof, made once per token.
	proofs sync.Map

	ctx       context.Context // ends when Close is called
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// New returns a forwarder over place, registering its metrics with
// reg (nil: not registered) and logging to log (nil: discarded). Close it.
func New(cfg Config, place Placements, reg prometheus.Registerer, log *slog.Logger) (*Forwarder, error) {
	return newForwarder(cfg, place, reg, log, nil, nil)
}

// newForwarder lets tests hold a dial open or move the clock (nil: the
// real ones).
func newForwarder(cfg Config, place Placements, reg prometheus.Registerer, log *slog.Logger, dial dialFunc, now func() time.Time) (*Forwarder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newForwardMetrics(reg)
	if err != nil {
		return nil, err
	}
	nm, err := newNearMetrics(reg)
	if err != nil {
		return nil, err
	}
	lost, err := newUnavailableMetrics(reg)
	if err != nil {
		return nil, err
	}
	if dial == nil {
		dial = netx.Dialer(cfg.Resolver, 30*time.Second).DialContext
	}
	if now == nil {
		now = time.Now
	}
	f := &Forwarder{cfg: cfg, place: place, log: log, metrics: m, near: nm, lost: lost, dial: dial, now: now,
		budget: newBodyBudget(cfg.MaxBodyMemory, cfg.MaxBodyMemoryPerAddr)}
	if reg != nil {
		if err := reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fenec_router_body_bytes",
			Help: "Bytes of request bodies the router holds now, against --max-body-memory.",
		}, func() float64 { return float64(f.budget.Held()) })); err != nil {
			return nil, err
		}
	}
	f.copies, _ = place.(CopyPlacements)
	f.unknown = ErrUnknownTenant
	if cfg.Region != "" {
		f.unknown = ErrUnknownInRegion
	}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.wg.Go(f.reapLoop)
	return f, nil
}

// Close stops the idle reaper and closes every idle connection. Requests
// in flight finish on their own connections. Safe to call twice.
func (f *Forwarder) Close() error {
	f.closeOnce.Do(func() {
		f.cancel()
		f.wg.Wait()
		f.pools.close()
	})
	return nil
}

func (f *Forwarder) reapLoop() {
	every := max(f.cfg.IdleTimeout/4, 10*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-t.C:
			f.pools.reap(f.now(), f.cfg.IdleTimeout)
		}
	}
}

// exchange is one request's state across its attempts; pooled.
type exchange struct {
	r        *http.Request
	tenant   string
	route    route
	start    time.Time
	deadline time.Time
	// fullDeadline is the request's own while deadline bounds an attempt
	// at a read copy (toCopy) to the copy's wait and the dial bound.
	fullDeadline time.Time
	copyUntil    time.Time // the end of the copy's wait (Fenec-Copy-Wait)
	toCopy       bool      // this attempt goes to a read copy near the router
	bounded      bool      // the read states a bound: its answer says who served it
	body         *bytes.Buffer
	key          string // the client address the body is charged to
	charged      int64  // the body budget's bytes this body holds
	hadLength    bool   // the client framed a body (Content-Length or chunked)
	replayable   bool   // GET, HEAD, OPTIONS or a keyed write
	wait         int64  // Fenec-Wait in ms, or -1
	sends        int    // attempts that began writing
	sentWhole    bool   // the last attempt was wholly sent
	requestID    []byte
	idBuf        [16]byte
	scratch      [24]byte
	fl           flight
	goneFn       func()      // x.fl.clientGone, made once per exchange
	sentFn       func() bool // x.fl.tryEnterSent, made once too
	hd           head
	lr           io.LimitedReader
	cw           clientWriter
}

var exchangePool = sync.Pool{New: func() any {
	x := &exchange{body: new(bytes.Buffer)}
	x.goneFn = x.fl.clientGone
	x.sentFn = x.fl.tryEnterSent
	return x
}}

func (x *exchange) release() {
	x.r = nil
	x.requestID = nil
	x.key, x.charged = "", 0
	if x.body.Cap() > 256<<10 {
		x.body = new(bytes.Buffer)
	}
	x.body.Reset()
	x.fl.reset()
	x.lr = io.LimitedReader{}
	exchangePool.Put(x)
}

// ServeHTTP forwards one request below /t/<tenant>/.
func (f *Forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := f.now()
	bodygap.Arm(w, r, f.cfg.BodyTimeout) // a body refused unread is cut too
	tenant, rt, err := parseTarget(r.RequestURI)
	if err == nil && replicationFeed(r.URL.Path) {
		err = ErrReplicationFeed
	}
	if err != nil {
		f.finish(w, r, rt, start, f.refuse(w, r, tenant, err))
		return
	}
	if !f.place.Ready() {
		f.finish(w, r, rt, start, f.refuse(w, r, tenant, ErrNotReady))
		return
	}
	tgt, ok := f.place.Lookup(tenant)
	if !ok {
		f.finish(w, r, rt, start, f.refuse(w, r, tenant, f.unknown))
		return
	}
	x := exchangePool.Get().(*exchange)
	x.r, x.tenant, x.route, x.start = r, tenant, rt, start
	x.deadline = start.Add(f.cfg.UpstreamTimeout)
	x.sends, x.sentWhole = 0, false
	if err := f.readBody(w, x); err != nil {
		f.uncharge(x)
		x.release()
		if err == ErrBodyStalled || err == ErrBodyMemory || err == ErrBodyMemoryAddr {
			w.Header().Set("Connection", "close") // what is left of it is never read
		}
		f.finish(w, r, rt, start, f.refuse(w, r, tenant, err))
		return
	}
	x.classify()
	stop := context.AfterFunc(r.Context(), x.goneFn)
	code := f.forwardNear(w, x, tgt)
	f.uncharge(x)
	// A hook already started may still touch the flight: leave that
	// exchange to the collector rather than hand it to another request.
	if stop() {
		x.release()
	}
	f.finish(w, r, rt, start, code)
}

// finish records the request, and logs it under its id at debug level;
// an aborted code (aborted) is recorded as the status its answer began
// with and ends the client's connection mid-answer so that a cut-short
// answer never looks whole.
func (f *Forwarder) finish(w http.ResponseWriter, r *http.Request, rt route, start time.Time, code int) {
	took := f.now().Sub(start)
	if f.log.Enabled(r.Context(), slog.LevelDebug) {
		f.log.Debug("request", "request_id", r.Header.Get("X-Request-Id"), "method", r.Method,
			"target", r.URL.Path, "status", code, "ms", took.Milliseconds())
	}
	if code < 0 {
		f.metrics.observe(rt, -code, took.Seconds())
		panic(http.ErrAbortHandler)
	}
	f.metrics.observe(rt, code, took.Seconds())
}

// refuse answers err, a refusal of the router's own before anything was
// sent to a node; one of the router's (5xx) is logged under the request's
// id at warn level, a client's (4xx) at debug.
func (f *Forwarder) refuse(w http.ResponseWriter, r *http.Request, tenant string, err error) int {
	id := r.Header.Get("X-Request-Id")
	if !SaneRequestID(id) {
		var buf [16]byte
		id = string(newRequestID(&buf))
	}
	answerID(w, id)
	code := writeError(w, err, false)
	level := slog.LevelDebug
	if code >= 500 {
		level = slog.LevelWarn
	}
	f.log.Log(r.Context(), level, "request refused by the router", "request_id", id,
		"tenant", tenant, "status", code, "err", err)
	return code
}

// answerID puts the request's id on an answer the router writes itself; a
// node's answer carries the id it was sent, which replaces it.
func answerID(w http.ResponseWriter, id string) { w.Header()["X-Request-Id"] = []string{id} }

// failed answers err for x's request, which its node (tgt) did not
// answer, and logs it under the request's id at warn level: the node's
// log may hold no line of it.
func (f *Forwarder) failed(w http.ResponseWriter, x *exchange, node string, err error) int {
	unknown := x.sentWhole && !x.replayable
	answerID(w, x.id())
	code := writeError(w, err, unknown)
	f.log.Warn("request not answered by its node", "request_id", x.id(), "tenant", x.tenant, "node", node,
		"status", code, "outcome_unknown", unknown, "err", err)
	return code
}

// id is the request's X-Request-Id as sent to its node.
func (x *exchange) id() string {
	if x.requestID != nil {
		return string(x.requestID)
	}
	return x.r.Header.Get("X-Request-Id")
}

// aborted is the code of an answer that began with status and could not
// be finished: negative, so that no status is taken for it.
func aborted(status int) int { return -status }

// readBody buffers the client's body whole (bounded) for byte-for-byte
// replay. The buffer grows with the bytes that arrive, never with the
// length the head declares; each growth is charged to the body budget
// first (budget.go), so a body past the router's or its address's share
// is refused before more of it is read; and a body that sends no byte for
// the body timeout is cut (package bodygap).
func (f *Forwarder) readBody(w http.ResponseWriter, x *exchange) error {
	r := x.r
	_, x.hadLength = r.Header["Content-Length"]
	if r.ContentLength < 0 {
		x.hadLength = true // chunked: a body was framed, maybe empty
	}
	if r.ContentLength > f.cfg.MaxBodyBytes {
		return ErrBodyTooLarge
	}
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil
	}
	x.key = bodyKey(r.RemoteAddr)
	if err := f.charge(x, int64(x.body.Cap())); err != nil {
		return err
	}
	limit := f.cfg.MaxBodyBytes + 1
	x.lr = io.LimitedReader{R: bodygap.Reader(w, r.Body, f.cfg.BodyTimeout), N: limit}
	defer func() { x.lr = io.LimitedReader{} }()
	var err error
	for err == nil {
		if x.body.Available() == 0 {
			room := min(max(2*int64(x.body.Cap()), minBodyRoom), limit)
			if err := f.charge(x, room-int64(x.body.Cap())); err != nil {
				return err
			}
			grown := bytes.NewBuffer(make([]byte, x.body.Len(), room))
			copy(grown.Bytes(), x.body.Bytes())
			x.body = grown
		}
		b := x.body.AvailableBuffer()
		var n int
		n, err = x.lr.Read(b[:cap(b)])
		x.body.Write(b[:n])
		if int64(x.body.Len()) > f.cfg.MaxBodyBytes {
			return ErrBodyTooLarge
		}
	}
	switch {
	case err == io.EOF:
	case errors.Is(err, bodygap.ErrStalled):
		return ErrBodyStalled
	default:
		return ErrBodyRead
	}
	if r.ContentLength >= 0 && int64(x.body.Len()) != r.ContentLength {
		return ErrBodyRead
	}
	return nil
}

// charge takes n more bytes of the body budget for x's body.
func (f *Forwarder) charge(x *exchange, n int64) error {
	if err := f.budget.take(x.key, n, x.charged+n); err != nil {
		f.metrics.bodyRefused(err)
		return err
	}
	x.charged += n
	return nil
}

// uncharge gives back what x's body was charged.
func (f *Forwarder) uncharge(x *exchange) {
	f.budget.give(x.key, x.charged)
	x.charged = 0
}

// classify notes what the retry rules need: whether running the request
// twice is harmless, and a held request's wait.
func (x *exchange) classify() {
	h := x.r.Header
	switch x.r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		x.replayable = true
	default:
		x.replayable = len(h["Idempotency-Key"]) > 0
	}
	x.wait = -1
	if v := h[wire.HeaderWait]; len(v) == 1 {
		if ms, ok := httptoken.Decimal(v[0], 12); ok {
			x.wait = ms
		}
	}
	x.requestID = nil
	if v := h["X-Request-Id"]; len(v) == 1 && SaneRequestID(v[0]) {
		return
	}
	x.requestID = newRequestID(&x.idBuf)
}
