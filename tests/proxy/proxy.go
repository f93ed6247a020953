package proxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy forwards TCP connections from 127.0.0.1:<port> to a target.
type Proxy struct {
	ln   net.Listener
	done chan struct{} // closed by Close
	wg   sync.WaitGroup
	once sync.Once

	mu     sync.Mutex
	target string             // guarded by mu: where new connections go
	delay  time.Duration      // guarded by mu: added to every chunk, each way
	open   chan struct{}      // guarded by mu: closed while traffic may pass
	links  map[*link]struct{} // guarded by mu
	closed bool               // guarded by mu
	total  int                // guarded by mu: connections accepted
}

// link is one client connection and, once dialled, its node connection.
type link struct {
	client net.Conn
	mu     sync.Mutex
	node   net.Conn // guarded by mu
}

// New starts a proxy in front of target; tb.Cleanup closes it.
func New(tb testing.TB, target string) *Proxy {
	tb.Helper()
	return NewOn(tb, "127.0.0.1:0", target)
}

// NewOn is New listening on listen (host:port; another loopback address,
// such as 127.0.0.2, gives one node a second proxy on the same port that
// a name looked up elsewhere reaches).
func NewOn(tb testing.TB, listen, target string) *Proxy {
	tb.Helper()
	p, err := Start(listen, target)
	if err != nil {
		tb.Fatalf("proxy listen: %v", err)
	}
	tb.Cleanup(p.Close)
	return p
}

// Start starts a proxy listening on listen in front of target outside a
// test (a benchmark program's); Close stops it.
func Start(listen, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	open := make(chan struct{})
	close(open)
	p := &Proxy{target: target, ln: ln, done: make(chan struct{}), open: open, links: map[*link]struct{}{}}
	p.wg.Go(p.acceptLoop)
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Retarget sends connections made from now on to target (a node
// restarted elsewhere); connections already made stay where they are.
func (p *Proxy) Retarget(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
}

// Accepted is how many connections the proxy has accepted so far.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total
}

// Cut stops every byte in both directions on every connection, old and
// new, and closes nothing: a network cut, not a reset. New connections are
// accepted and hang. What was on its way is held and passes on Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default:
	}
}

// SetDelay holds every chunk that passes, each way, for d before it is
// sent on (a round trip grows by 2d): a link across a wide-area network.
// Order is kept. 0 ends the delay.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

func (p *Proxy) delayOf() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.delay
}

// Heal lets traffic pass again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}

// Reset closes every connection, both sides, with a TCP reset.
func (p *Proxy) Reset() {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.reset()
	}
}

// Close stops accepting, closes every connection and waits for the
// proxy's goroutines. Safe to call twice.
func (p *Proxy) Close() {
	p.once.Do(func() {
		p.mu.Lock()
		p.closed = true
		links := make([]*link, 0, len(p.links))
		for l := range p.links {
			links = append(links, l)
		}
		p.mu.Unlock()
		close(p.done)
		_ = p.ln.Close()
		for _, l := range links {
			l.close()
		}
		p.wg.Wait()
	})
}

// pass waits until traffic may pass; false when the proxy is closing.
func (p *Proxy) pass() bool {
	p.mu.Lock()
	open := p.open
	p.mu.Unlock()
	select {
	case <-open:
		return true
	case <-p.done:
		return false
	}
}

func (p *Proxy) acceptLoop() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		l := &link{client: c}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = c.Close()
			return
		}
		p.links[l] = struct{}{}
		p.total++
		p.mu.Unlock()
		p.wg.Go(func() { p.serve(l) })
	}
}

func (p *Proxy) drop(l *link) {
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
	l.close()
}

// serve dials the target once traffic may pass and copies both ways.
func (p *Proxy) serve(l *link) {
	defer p.drop(l)
	if !p.pass() {
		return
	}
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	d := net.Dialer{Timeout: 5 * time.Second}
	node, err := d.Dial("tcp", target)
	if err != nil {
		l.reset()
		return
	}
	if !l.setNode(node) {
		_ = node.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(l, node, l.client) })
	wg.Go(func() { p.pipe(l, l.client, node) })
	wg.Wait()
}

// pipe copies src to dst, holding each chunk (and the end) while cut.
func (p *Proxy) pipe(l *link, dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if d := p.delayOf(); d > 0 {
			select {
			case <-time.After(d):
			case <-p.done:
				return
			}
		}
		if !p.pass() {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				l.close()
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
					return
				}
			}
			l.close()
			return
		}
	}
}

func (l *link) setNode(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.node == nil && l.client != nil {
		l.node = c
		return true
	}
	return false
}

func (l *link) conns() (client, node net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.client, l.node
}

func (l *link) close() {
	client, node := l.conns()
	_ = client.Close()
	if node != nil {
		_ = node.Close()
	}
}

func (l *link) reset() {
	client, node := l.conns()
	for _, c := range []net.Conn{client, node} {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		if c != nil {
			_ = c.Close()
		}
	}
}
