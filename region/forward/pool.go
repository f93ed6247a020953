package forward

import (
	"bufio"
	"context"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/fenec-go/fenec/internal/rawtcp"
)

// pconn is one kept-alive connection to a node with its buffers.
type pconn struct {
	c         net.Conn
	br        *bufio.Reader
	bw        *bufio.Writer // writes to sw
	sw        sendWriter
	idleSince time.Time // set as it goes back to the pool
	peek      peeker    // non-blocking look at a pooled connection
}

// newPconn wraps c, which runs over raw: the same connection, or the TCP
// connection under TLS, which is what a look at the socket needs.
func newPconn(c, raw net.Conn) *pconn {
	pc := &pconn{
		c:  c,
		br: bufio.NewReaderSize(c, 8<<10),
	}
	pc.sw.c = c
	pc.sw.rc, _ = c.(*rawtcp.Conn)
	pc.bw = bufio.NewWriterSize(&pc.sw, 16<<10)
	pc.peek.init(raw)
	return pc
}

// sendWriter is the connection as requests are written to it.
type sendWriter struct {
	c      net.Conn
	rc     *rawtcp.Conn // c, when its writes can wait for the answer
	writes int          // writes since the request began
	sent   func() bool  // set for the request's last write: see send
}

func (sw *sendWriter) Write(p []byte) (int, error) {
	sw.writes++
	if sw.sent != nil && sw.writes == 1 && sw.rc != nil {
		return sw.rc.WriteAwait(p, sw.sent)
	}
	return sw.c.Write(p)
}

// send writes out the request buffered in bw. A request wholly in the
// buffer goes in one write, which on a plain TCP connection also waits for
// the answer's first bytes (rawtcp.Conn.WriteAwait), calling sent once the
// request is written: the answer's first read then finds bytes rather
// than coming back empty before the wait. A request that overflowed the
// buffer had bytes written before, and a node may have answered them
// already (refusing the body unread): its last write waits for nothing.
func (pc *pconn) send(sent func() bool) error {
	pc.sw.sent = sent
	err := pc.bw.Flush()
	pc.sw.sent, pc.sw.writes = nil, 0
	return err
}

// usable reports whether a pooled connection can carry a request: nothing
// buffered and nothing waiting on the socket (EOF or data means the node
// closed it for its silence, or sent what no request asked for).
func (pc *pconn) usable() bool {
	if pc.br.Buffered() > 0 {
		return false
	}
	return pc.peek.quietNow()
}

func (pc *pconn) close() { _ = pc.c.Close() }

// pool holds one node's idle connections and the requests in flight to it.
type pool struct {
	node string

	mu     sync.Mutex
	addr   string   // guarded by mu: where the node is dialled
	idle   []*pconn // guarded by mu: most recently used last
	closed bool     // guarded by mu
	head   *flight  // guarded by mu: requests in flight to this node
}

// dialAddr turns a directory address ("host:port", "http://host:port/"
// or "https://host:port/") into what a pool dials: host:port, or
// https://host:port for a node served over TLS.
func dialAddr(addr string) string {
	addr = strings.TrimPrefix(addr, "http://")
	return strings.TrimSuffix(addr, "/")
}

// splitAddr splits a pool's address into the host:port to dial and
// whether to speak TLS over it.
func splitAddr(addr string) (hostport string, secure bool) {
	return strings.CutPrefix(addr, "https://")
}

// recentUse is how recently a pooled connection must have ended an
// exchange for a replayable request to take it without a look at its
// socket. The node drops a connection for its silence only after its idle
// timeout (60 s), so one used this recently is closed under such a
// request only by the node stopping; that request may then run twice,
// which replayable requests allow: the send meets no answer and goes
// again on a fresh connection (afterFailure).
const recentUse = time.Second

// takeIdle pops the most recent idle connection that is still usable,
// closing the ones idle longer than idleTimeout or closed by the node, and
// gives it deadline. A connection back in the pool less than recentUse ago
// is taken without the look at its socket (a system call) when trust is
// set: the request it is for may be sent twice.
func (p *pool) takeIdle(now time.Time, idleTimeout time.Duration, deadline time.Time, trust bool) *pconn {
	for {
		p.mu.Lock()
		n := len(p.idle)
		if n == 0 {
			p.mu.Unlock()
			return nil
		}
		pc := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		idle := now.Sub(pc.idleSince)
		if idle <= idleTimeout {
			// The look (a read) is bounded by the request's deadline, not
			// one left from the connection's last exchange.
			_ = pc.c.SetDeadline(deadline)
			if trust && idle < recentUse && pc.br.Buffered() == 0 || pc.usable() {
				return pc
			}
		}
		pc.close()
	}
}

// put returns a connection whose exchange ended cleanly.
func (p *pool) put(pc *pconn, addr string, now time.Time, maxIdle int) {
	pc.idleSince = now
	p.mu.Lock()
	if p.closed || addr != p.addr || len(p.idle) >= maxIdle {
		p.mu.Unlock()
		pc.close()
		return
	}
	p.idle = append(p.idle, pc)
	p.mu.Unlock()
}

// reap closes the connections idle longer than idleTimeout.
func (p *pool) reap(now time.Time, idleTimeout time.Duration) {
	p.mu.Lock()
	keep := p.idle[:0]
	var drop []*pconn
	for _, pc := range p.idle {
		if now.Sub(pc.idleSince) > idleTimeout {
			drop = append(drop, pc)
		} else {
			keep = append(keep, pc)
		}
	}
	clear(p.idle[len(keep):])
	p.idle = keep
	p.mu.Unlock()
	for _, pc := range drop {
		pc.close()
	}
}

// setAddrLocked points the pool at a new address, dropping idle connections
// to the old one.
func (p *pool) setAddrLocked(addr string) []*pconn {
	if p.addr == addr {
		return nil
	}
	p.addr = addr
	old := p.idle
	p.idle = nil
	return old
}

// closeIdle drops every idle connection and refuses any given back.
func (p *pool) closeIdle() {
	p.mu.Lock()
	p.closed = true
	old := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, pc := range old {
		pc.close()
	}
}

// idleCount is the number of idle connections (tests and stats).
func (p *pool) idleCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// pools is the forwarder's set of per-node pools.
type pools struct {
	mu     sync.RWMutex
	byNode map[string]*pool // guarded by mu
	closed bool             // guarded by mu
}

// get returns the node's pool, pointed at addr.
func (ps *pools) get(node, addr string) *pool {
	ps.mu.RLock()
	p := ps.byNode[node]
	ps.mu.RUnlock()
	if p != nil {
		p.mu.Lock()
		same := p.addr == addr
		p.mu.Unlock()
		if same {
			return p
		}
	}
	ps.mu.Lock()
	p = ps.byNode[node]
	if p == nil {
		p = &pool{node: node, addr: addr, closed: ps.closed}
		if ps.byNode == nil {
			ps.byNode = make(map[string]*pool)
		}
		ps.byNode[node] = p
	}
	ps.mu.Unlock()
	p.mu.Lock()
	old := p.setAddrLocked(addr)
	p.mu.Unlock()
	for _, pc := range old {
		pc.close()
	}
	return p
}

// lookup returns the node's pool if there is one.
func (ps *pools) lookup(node string) *pool {
	ps.mu.RLock()
	defer ps.mu.RUnlock()
	return ps.byNode[node]
}

func (ps *pools) all() []*pool {
	ps.mu.RLock()
	defer ps.mu.RUnlock()
	out := make([]*pool, 0, len(ps.byNode))
	for _, p := range ps.byNode {
		out = append(out, p)
	}
	return out
}

func (ps *pools) reap(now time.Time, idleTimeout time.Duration) {
	for _, p := range ps.all() {
		p.reap(now, idleTimeout)
	}
}

func (ps *pools) close() {
	ps.mu.Lock()
	ps.closed = true
	ps.mu.Unlock()
	for _, p := range ps.all() {
		p.closeIdle()
	}
}

// dialFunc dials a node; tests replace it to hold a dial open.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)
