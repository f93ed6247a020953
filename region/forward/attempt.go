package forward

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"time"

	"github.com/fenec-go/fenec/internal/forwarded"
	"github.com/fenec-go/fenec/internal/rawtcp"
	"github.com/fenec-go/fenec/internal/tlsx"
)

// One request's attempts, once its body is read and its node looked up:
// forward runs them in turn, deciding after each whether the request may
// be sent again and where (afterFailure), and attempt is one of them —
// a pooled or fresh connection to the node, the request written, the
// node's answer head read and passed back (answer.go).

// result is how one attempt ended.
type result uint8

const (
	resDone      result = iota // answered; code says how
	resGone                    // the client went away
	resCut                     // cut by a failover: resend to the new target
	resCutFail                 // cut after a non-replayable write was sent whole
	resRedirect                // the tenant is placed elsewhere now
	resUnsent                  // failed before it was wholly sent
	resNoAnswer                // sent whole; the connection ended before an answer
	resDialFail                // the node refused or could not be reached
	resTimeout                 // the upstream timeout passed
	resRefused                 // 503 Fenec-Refused: lease; nothing ran
	resUntrusted               // the node's record is not to be used (Target.Refused)
	resDeclined                // a read copy declined the read, or failed it: ask the primary
)

// forward runs attempts until one answers or the rules say stop, and
// returns the status recorded.
func (f *Forwarder) forward(w http.ResponseWriter, x *exchange, tgt Target) int {
	rs := retryState{}
	var ls leaseState
	for attempts := 0; attempts < maxAttempts; attempts++ {
		res, code, next := f.attempt(w, x, tgt, rs.fresh, f.interceptRefusal(x, &ls))
		switch res {
		case resDone:
			return code
		case resGone:
			return statusClient
		case resCut, resRedirect:
			if res == resCut {
				f.metrics.cut(CutResent)
			}
			tgt, rs = next, retryState{}
		case resCutFail:
			f.metrics.cut(CutFailed502)
			answerID(w, x.id())
			code := writeError(w, ErrMayHaveRun, true)
			f.log.Warn("request cut by a failover after it was sent", "request_id", x.id(), "tenant", x.tenant,
				"node", tgt.Node, "status", code, "outcome_unknown", true)
			return code
		case resUntrusted:
			return f.failed(w, x, tgt.Node, ErrUntrustedNode)
		case resRefused:
			if !f.afterRefusal(x, tgt, &ls) {
				return statusClient
			}
			rs.fresh = false
			attempts-- // asking again after a refusal is bounded by time
		default:
			if x.r.Context().Err() != nil {
				// The client left, and the attempt failed with it (a dial
				// its context ended): the client's, not the node's.
				return statusClient
			}
			f.metrics.upstreamError(tgt.Node)
			if u := f.lostNow(x, tgt.Node); u != nil {
				return f.unavailable(w, x, u) // recorded lost as it was tried
			}
			var stop error
			node := tgt.Node
			if tgt, stop = f.afterFailure(x, res, tgt, &rs); stop != nil {
				return f.failed(w, x, node, stop)
			}
		}
	}
	return f.failed(w, x, tgt.Node, ErrUnreachable)
}

// retryState is the one retry on a fresh connection a target allows.
type retryState struct {
	retried bool // the retry was spent
	fresh   bool // the next attempt dials rather than takes a pooled connection
}

// afterFailure applies the retry rules to an attempt that met no answer:
// it returns where to try next, or the error to answer with.
func (f *Forwarder) afterFailure(x *exchange, res result, tgt Target, rs *retryState) (Target, error) {
	switch res {
	case resDialFail:
		// Refused or unreachable: not a 502 if the tenant has meanwhile
		// been placed elsewhere (a failover landing as it was dialled).
		if moved, ok := f.place.Lookup(x.tenant); ok && moved.Node != tgt.Node {
			*rs = retryState{}
			return moved, nil
		}
		return tgt, ErrUnreachable
	case resTimeout:
		return tgt, ErrUpstreamTimeout
	case resNoAnswer:
		if !x.replayable {
			return tgt, ErrMayHaveRun
		}
	}
	if rs.retried {
		if res == resUnsent {
			return tgt, ErrNotSent
		}
		return tgt, ErrUnreachable
	}
	f.log.Debug("resend on a fresh connection", "node", tgt.Node, "sent_whole", res == resNoAnswer)
	*rs = retryState{retried: true, fresh: true}
	if moved, ok := f.place.Lookup(x.tenant); ok {
		tgt = moved
	}
	return tgt, nil
}

// attempt sends the request once to tgt and, if an answer comes, passes it
// back. next is where a cut or a redirect sends it.
func (f *Forwarder) attempt(w http.ResponseWriter, x *exchange, tgt Target, fresh, intercept bool) (res result, code int, next Target) {
	if tgt.Refused != nil {
		f.log.Warn("node record not used", "node", tgt.Node, "err", tgt.Refused)
		return resUntrusted, 0, next
	}
	p := f.pools.get(tgt.Node, dialAddr(tgt.Addr))
	fl := &x.fl
	fl.begin(x.tenant)
	p.register(fl)
	defer p.unregister(fl)
	// Registered first, looked up again second: a Cut either finds this
	// attempt, or ran after the placements moved and the lookup sees it.
	// (A read copy is no placement: nothing redirects from it.)
	if now, ok := f.place.Lookup(x.tenant); ok && !x.toCopy && now.Node != tgt.Node {
		if cut, _, to := fl.state(); cut {
			return resCut, 0, to
		}
		return resRedirect, 0, now
	}
	x.sentWhole = false
	pc, res := f.connect(x, p, fresh)
	if pc == nil {
		if res == resCut {
			_, _, next = fl.state()
		}
		return res, 0, next
	}
	if !fl.enter(phaseSending, pc.c) {
		pc.close()
		return f.ended(fl, false, x)
	}
	x.sends++
	x.writeRequest(pc.bw, f.now(), f.proof(tgt.Token))
	if err := pc.send(x.sentFn); err != nil {
		if r, c, n := f.ended(fl, false, x); r != resDone {
			pc.close()
			return r, c, n
		}
		if isTimeout(err) {
			pc.close()
			return resTimeout, 0, next
		}
		if f.earlyAnswer(x, pc) {
			if x.toCopy && declinedByCopy(&x.hd) {
				pc.close()
				return resDeclined, 0, next
			}
			if intercept && x.hd.refused {
				pc.close()
				return resRefused, 0, next
			}
			return f.answer(w, x, p, pc, tgt)
		}
		pc.close()
		if r, c, n := f.ended(fl, false, x); r != resDone {
			return r, c, n
		}
		return resUnsent, 0, next
	}
	x.sentWhole = true
	if !fl.enter(phaseSent, nil) {
		pc.close()
		return f.ended(fl, true, x)
	}
	if err := x.hd.read(pc.br, x.r.Method); err != nil {
		pc.close()
		if r, c, n := f.ended(fl, true, x); r != resDone {
			return r, c, n
		}
		if isTimeout(err) {
			return resTimeout, 0, next
		}
		return resNoAnswer, 0, next
	}
	if x.toCopy {
		if declinedByCopy(&x.hd) {
			f.drainRefusal(fl, p, pc, tgt, &x.hd)
			return resDeclined, 0, next
		}
		// The copy answers: its answer has the request's whole time.
		x.deadline = x.fullDeadline
		_ = pc.c.SetDeadline(x.deadline)
	}
	if intercept && x.hd.refused {
		f.drainRefusal(fl, p, pc, tgt, &x.hd)
		return resRefused, 0, next
	}
	return f.answer(w, x, p, pc, tgt)
}

// proof is the proof of a node's admin token the forwarder sends it
// (package forwarded), made once per token.
func (f *Forwarder) proof(token string) string {
	if token == "" {
		return ""
	}
	if p, ok := f.proofs.Load(token); ok {
		return p.(string)
	}
	p := forwarded.Proof(token)
	f.proofs.Store(token, p)
	return p
}

// earlyAnswerWait bounds the look for an answer a node sent before it
// read the whole body (and then closed).
const earlyAnswerWait = 100 * time.Millisecond

// earlyAnswer reports whether the node answered before the request was
// wholly sent — it refused it without reading the body (a bad token on a
// big batch), so it ran nothing — with an answer that can be passed back.
// The connection is not kept after it.
func (f *Forwarder) earlyAnswer(x *exchange, pc *pconn) bool {
	_ = pc.c.SetReadDeadline(minTime(f.now().Add(earlyAnswerWait), x.deadline))
	if err := x.hd.read(pc.br, x.r.Method); err != nil || !x.hd.noBody && x.hd.length < 0 {
		return false
	}
	x.hd.close = true
	_ = pc.c.SetReadDeadline(x.deadline)
	return true
}

// ended turns a cut or a client gone into the attempt's result; resDone
// means neither happened and the caller's own error stands.
func (f *Forwarder) ended(fl *flight, sentWhole bool, x *exchange) (result, int, Target) {
	cut, gone, to := fl.state()
	switch {
	case gone:
		return resGone, 0, Target{}
	case cut && (!sentWhole || x.replayable):
		return resCut, 0, to
	case cut:
		return resCutFail, 0, Target{}
	}
	return resDone, 0, Target{}
}

// connect takes a quiet pooled connection, or dials a fresh one bounded by
// the dial timeout, the request's deadline, a cut and the client; the
// connection has the request's deadline.
func (f *Forwarder) connect(x *exchange, p *pool, fresh bool) (*pconn, result) {
	now := f.now()
	if !fresh {
		if pc := p.takeIdle(now, f.cfg.IdleTimeout, x.deadline, x.replayable); pc != nil {
			return pc, resDone
		}
	}
	p.mu.Lock()
	addr := p.addr
	p.mu.Unlock()
	ctx, cancel := context.WithDeadline(x.r.Context(), minTime(now.Add(f.cfg.DialTimeout), x.deadline))
	defer cancel()
	if !x.fl.setDial(cancel) {
		r, _, _ := f.ended(&x.fl, false, x)
		return nil, r
	}
	hostport, secure := splitAddr(addr)
	raw, err := f.dial(ctx, "tcp", hostport)
	c := rawtcp.Wrap(raw) // its reads and writes wake no monitor thread
	if err == nil && secure {
		c, err = f.handshake(ctx, c, hostport)
	}
	x.fl.clearDial()
	if err != nil {
		if r, _, _ := f.ended(&x.fl, false, x); r != resDone {
			return nil, r
		}
		if !f.now().Before(x.deadline) {
			return nil, resTimeout
		}
		f.log.Debug("dial node", "node", p.node, "addr", addr, "err", err)
		return nil, resDialFail
	}
	pc := newPconn(c, raw)
	_ = pc.c.SetDeadline(x.deadline)
	return pc, resDone
}

// handshake runs TLS over raw, a connection just dialled to a node
// addressed https://, within ctx (the dial's bound); on an error raw is
// closed. The node's certificate must name the host dialled.
func (f *Forwarder) handshake(ctx context.Context, raw net.Conn, hostport string) (net.Conn, error) {
	var cfg *tls.Config
	if f.cfg.TLS != nil {
		cfg = f.cfg.TLS(hostport)
	} else {
		host, _, _ := net.SplitHostPort(hostport)
		cfg = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12, CipherSuites: tlsx.Suites}
	}
	tc := tls.Client(raw, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		if ctx.Err() == nil {
			f.log.Warn("tls handshake with node", "addr", hostport, "err", err)
		}
		return nil, err
	}
	return tc, nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	if ok && ne.Timeout() {
		return true
	}
	var oe *net.OpError
	return asOpError(err, &oe) && oe.Timeout()
}
