package main

import (
	"io"
	"net"
	"sync"
)

// proxy passes TCP connections from a loopback port to a target until it
// is cut; from then on it passes no byte either way and closes nothing,
// as a network that dropped every packet would.
type proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu    sync.Mutex
	cond  *sync.Cond // signalled when cutOn or closed change
	cutOn bool       // guarded by mu
	done  bool       // guarded by mu
	conns []net.Conn // guarded by mu
}

func newProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, target: target}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Go(p.accept)
	return p, nil
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) cut() {
	p.mu.Lock()
	p.cutOn = true
	p.mu.Unlock()
}

// close stops the proxy, closing every connection, and waits for its
// goroutines.
func (p *proxy) close() {
	p.mu.Lock()
	p.done = true
	for _, c := range p.conns {
		c.Close()
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.done {
			p.mu.Unlock()
			c.Close()
			up.Close()
			return
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(up, c) })
		p.wg.Go(func() { p.pipe(c, up) })
	}
}

// pipe copies src to dst, holding each chunk while the proxy is cut.
func (p *proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.pass() {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err == io.EOF {
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
			}
			return
		}
	}
}

// pass waits while the proxy is cut; false once it is closed.
func (p *proxy) pass() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.cutOn && !p.done {
		p.cond.Wait()
	}
	return !p.done
}
