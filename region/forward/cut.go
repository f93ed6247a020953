package forward

import (
	"context"
	"net"
	"sync"
)

// phase is where a request to a node stands, which decides what a cut
// does with it.
type phase uint8

const (
	phaseNone       phase = iota
	phaseConnecting       // taking a pooled connection or dialling
	phaseSending          // writing the head and body
	phaseSent             // wholly sent, waiting for the answer's head
	phaseAnswer           // an answer with a length has begun: left alone
	phaseStream           // a subscription is being copied: ended by a cut
)

var phaseNames = [...]string{"none", "connecting", "sending", "sent", "answer", "stream"}

func (p phase) String() string { return phaseNames[p] }

// flight is one request's current attempt at a node. The forwarding
// goroutine owns it; Cut and the client-gone hook reach in under mu to end
// the attempt (cancel the dial, close the connection) and leave a verdict
// the owner reads when its I/O fails.
type flight struct {
	prev, next *flight // guarded by the pool's mu while registered
	tenant     string  // set by the owner before registering

	mu         sync.Mutex
	phase      phase              // guarded by mu
	conn       net.Conn           // guarded by mu: the attempt's connection
	cancelDial context.CancelFunc // guarded by mu: set while dialling
	cut        bool               // guarded by mu: a failover cut this attempt
	to         Target             // guarded by mu: where a cut sends it
	gone       bool               // guarded by mu: the client went away
}

// begin readies the flight for an attempt; the owner calls it before
// registering, when nothing else can reach the flight.
func (fl *flight) begin(tenant string) {
	fl.mu.Lock()
	fl.tenant = tenant
	fl.phase = phaseConnecting
	fl.conn = nil
	fl.cancelDial = nil
	fl.cut = false
	fl.to = Target{}
	fl.mu.Unlock()
}

// reset clears the flight for another request; only its owner, with no
// hook left that could reach it, calls it.
func (fl *flight) reset() {
	fl.mu.Lock()
	fl.prev, fl.next, fl.tenant = nil, nil, ""
	fl.phase, fl.conn, fl.cancelDial = phaseNone, nil, nil
	fl.cut, fl.to, fl.gone = false, Target{}, false
	fl.mu.Unlock()
}

// enter moves the attempt to ph (and records its connection, if given);
// it reports false when the attempt was cut or its client left meanwhile.
func (fl *flight) enter(ph phase, c net.Conn) bool {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.enterLocked(ph, c)
}

// enterLocked is enter with mu held.
func (fl *flight) enterLocked(ph phase, c net.Conn) bool {
	if fl.cut || fl.gone {
		return false
	}
	fl.phase = ph
	if c != nil {
		fl.conn = c
	}
	return true
}

// tryEnterSent is enter(phaseSent, nil) for a caller that must not wait
// on mu: one inside the connection's own read (rawtcp.Conn.WriteAwait's
// written), which holds a reference on the socket that Close, called
// under mu by a cut or a client gone, waits to see released. Whoever holds
// mu then is ending the attempt or looking at it; false either way, and
// the caller goes on without the wait (its owner enters the phase after).
func (fl *flight) tryEnterSent() bool {
	if !fl.mu.TryLock() {
		return false
	}
	defer fl.mu.Unlock()
	return fl.enterLocked(phaseSent, nil)
}

// setDial records the dial's cancel; false when already cut or gone.
func (fl *flight) setDial(cancel context.CancelFunc) bool {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.cut || fl.gone {
		return false
	}
	fl.cancelDial = cancel
	return true
}

// letGo takes the attempt's connection out of the flight's reach as the
// connection goes back to the pool: from then on no cut and no client
// gone can close it under the request that takes it next. false: the
// attempt was stopped first (the connection is closed), so it must not be
// pooled.
func (fl *flight) letGo() bool {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	fl.conn = nil
	return !fl.cut && !fl.gone
}

func (fl *flight) clearDial() {
	fl.mu.Lock()
	fl.cancelDial = nil
	fl.mu.Unlock()
}

// state reads the verdict the attempt ended with.
func (fl *flight) state() (cut, gone bool, to Target) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.cut, fl.gone, fl.to
}

// clientGone is run when the client's context ends: it stops whatever the
// attempt is doing.
func (fl *flight) clientGone() {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	fl.gone = true
	fl.stopLocked()
}

func (fl *flight) stopLocked() {
	if fl.cancelDial != nil {
		fl.cancelDial()
	}
	if fl.conn != nil {
		_ = fl.conn.Close()
	}
}

// register adds fl to the node's in-flight list.
func (p *pool) register(fl *flight) {
	p.mu.Lock()
	fl.prev = nil
	fl.next = p.head
	if p.head != nil {
		p.head.prev = fl
	}
	p.head = fl
	p.mu.Unlock()
}

// unregister takes fl off the list; after it returns no Cut can reach fl.
func (p *pool) unregister(fl *flight) {
	p.mu.Lock()
	if fl.prev != nil {
		fl.prev.next = fl.next
	} else if p.head == fl {
		p.head = fl.next
	}
	if fl.next != nil {
		fl.next.prev = fl.prev
	}
	fl.prev, fl.next = nil, nil
	p.mu.Unlock()
}

// Cut ends what is in flight to node for exactly the tenants named (each
// mapped to its new target), as a failover off node demands. A request
// still connecting, still sending, or sent and awaiting its answer is
// stopped at once (its dial cancelled, its connection closed) and its own
// goroutine answers it by the rules: not wholly sent, a read, or a keyed
// write goes to the new target; another write is answered 502 "may have
// run"; a subscription ends. A request whose answer had begun is left to
// the node, as is everything for other tenants. Requests for other nodes
// are not looked at. Cut does not wait for the requests it ends.
func (f *Forwarder) Cut(node string, tenants map[string]Target) {
	p := f.pools.lookup(node)
	if p == nil || len(tenants) == 0 {
		return
	}
	var ended, left int
	p.mu.Lock()
	for fl := p.head; fl != nil; fl = fl.next {
		to, ok := tenants[fl.tenant]
		if !ok {
			continue
		}
		fl.mu.Lock()
		switch {
		case fl.cut || fl.gone:
		case fl.phase == phaseAnswer:
			left++
		case fl.phase != phaseNone:
			fl.cut = true
			fl.to = to
			fl.stopLocked()
			ended++
		}
		fl.mu.Unlock()
	}
	p.mu.Unlock()
	for range left {
		f.metrics.cut(CutLeft)
	}
	if ended+left > 0 {
		f.log.Info("cut requests to failed-over node", "node", node, "tenants", len(tenants), "ended", ended, "left", left)
	}
}

// inFlight lists the phases of what is in flight to node for tenant
// (tests use it to wait for a request to reach a phase).
func (f *Forwarder) inFlight(node, tenant string) []phase {
	p := f.pools.lookup(node)
	if p == nil {
		return nil
	}
	var out []phase
	p.mu.Lock()
	for fl := p.head; fl != nil; fl = fl.next {
		if fl.tenant != tenant {
			continue
		}
		fl.mu.Lock()
		out = append(out, fl.phase)
		fl.mu.Unlock()
	}
	p.mu.Unlock()
	return out
}
