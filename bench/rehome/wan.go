package main

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// link is a wide-area link in front of one address: every chunk read on
// either side is written on delay after it arrived, chunks in flight side
// by side (a stream of many takes the delay once, not once a chunk).
type link struct {
	ln     net.Listener
	target string
	delay  time.Duration
	wg     sync.WaitGroup

	mu     sync.Mutex
	open   map[net.Conn]bool // guarded by mu: both sides of every connection
	closed bool              // guarded by mu
}

// timed is bytes read and when they may go on.
type timed struct {
	b   []byte
	due time.Time
}

// startLink listens on listen and passes every connection to target,
// delay added each way.
func startLink(listen, target string, delay time.Duration) (*link, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	l := &link{ln: ln, target: target, delay: delay, open: map[net.Conn]bool{}}
	l.wg.Go(l.accept)
	return l, nil
}

// close stops the link and waits for its goroutines. Safe twice.
func (l *link) close() {
	l.mu.Lock()
	l.closed = true
	for c := range l.open {
		c.Close()
	}
	l.mu.Unlock()
	l.ln.Close()
	l.wg.Wait()
}

// keep records c as open; false (c closed) once the link is closed.
func (l *link) keep(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		c.Close()
		return false
	}
	l.open[c] = true
	return true
}

func (l *link) drop(c net.Conn) {
	l.mu.Lock()
	delete(l.open, c)
	l.mu.Unlock()
	c.Close()
}

func (l *link) accept() {
	for {
		c, err := l.ln.Accept()
		if err != nil || !l.keep(c) {
			return
		}
		l.wg.Go(func() {
			defer l.drop(c)
			up, err := net.DialTimeout("tcp", l.target, 5*time.Second)
			if err != nil || !l.keep(up) {
				return
			}
			defer l.drop(up)
			var both sync.WaitGroup
			both.Go(func() { l.carry(up, c) })
			both.Go(func() { l.carry(c, up) })
			both.Wait()
		})
	}
}

// carry copies src to dst, each chunk held until it is due.
func (l *link) carry(dst, src net.Conn) {
	q := make(chan timed, 4096)
	var rd sync.WaitGroup
	var rerr error // read after rd.Wait
	rd.Go(func() {
		defer close(q)
		buf := make([]byte, 64<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				q <- timed{b: append([]byte(nil), buf[:n]...), due: time.Now().Add(l.delay)}
			}
			if err != nil {
				rerr = err
				return
			}
		}
	})
	ok := true
	for t := range q {
		if !ok {
			continue
		}
		time.Sleep(time.Until(t.due))
		if _, err := dst.Write(t.b); err != nil {
			ok = false
			src.Close()
		}
	}
	rd.Wait()
	if tc, isTCP := dst.(*net.TCPConn); isTCP && ok && errors.Is(rerr, io.EOF) {
		_ = tc.CloseWrite()
		return
	}
	dst.Close()
}
