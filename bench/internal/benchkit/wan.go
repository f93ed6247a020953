package benchkit

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// WANLink is a wide-area link in front of one address: a TCP proxy that
// hands every chunk it reads on delay after it arrived, each way. Chunks
// are delayed side by side, as on a real link, not one after another: a
// feed of many small frames takes delay once, not once a frame, which a
// proxy that sleeps before each write would charge it.
type WANLink struct {
	ln     net.Listener
	target string
	delay  time.Duration
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // guarded by mu: every open connection, both sides
	closed bool                  // guarded by mu
}

// chunk is bytes read from one side and when they may be sent on.
type chunk struct {
	b   []byte
	due time.Time
}

// StartWAN listens on listen and passes every connection to target with
// delay added each way.
func StartWAN(listen, target string, delay time.Duration) (*WANLink, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	w := &WANLink{ln: ln, target: target, delay: delay, conns: map[net.Conn]struct{}{}}
	w.wg.Go(w.accept)
	return w, nil
}

func (w *WANLink) Addr() string { return w.ln.Addr().String() }

// Close stops accepting, closes every connection and waits for the
// link's goroutines. Safe to call twice.
func (w *WANLink) Close() {
	w.mu.Lock()
	w.closed = true
	for c := range w.conns {
		c.Close()
	}
	w.mu.Unlock()
	w.ln.Close()
	w.wg.Wait()
}

// track records c as open; false once the link is closed (c is closed).
func (w *WANLink) track(c net.Conn) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		c.Close()
		return false
	}
	w.conns[c] = struct{}{}
	return true
}

func (w *WANLink) forget(c net.Conn) {
	w.mu.Lock()
	delete(w.conns, c)
	w.mu.Unlock()
	c.Close()
}

func (w *WANLink) accept() {
	for {
		c, err := w.ln.Accept()
		if err != nil {
			return
		}
		if !w.track(c) {
			return
		}
		w.wg.Go(func() { w.serve(c) })
	}
}

// serve dials the target for client c and passes bytes both ways.
func (w *WANLink) serve(c net.Conn) {
	defer w.forget(c)
	up, err := net.DialTimeout("tcp", w.target, 5*time.Second)
	if err != nil || !w.track(up) {
		return
	}
	defer w.forget(up)
	var wg sync.WaitGroup
	wg.Go(func() { w.pass(up, c) })
	wg.Go(func() { w.pass(c, up) })
	wg.Wait()
}

// pass copies src to dst through the delay: one goroutine reads and
// stamps each chunk, another sends it when due.
func (w *WANLink) pass(dst, src net.Conn) {
	line := make(chan chunk, 4096)
	var wg sync.WaitGroup
	var readErr error // the reader's last, read after wg.Wait
	wg.Go(func() {
		defer close(line)
		buf := make([]byte, 64<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				line <- chunk{b: append([]byte(nil), buf[:n]...), due: time.Now().Add(w.delay)}
			}
			if err != nil {
				readErr = err
				return
			}
		}
	})
	ok := true
	for ch := range line {
		if !ok {
			continue // dst failed: drain, so the reader ends
		}
		time.Sleep(time.Until(ch.due))
		if _, err := dst.Write(ch.b); err != nil {
			ok = false
			src.Close()
		}
	}
	wg.Wait()
	// src ended: end dst's side the same way, once what was on its way
	// has gone (a half close for src's own end, else a close).
	if tc, isTCP := dst.(*net.TCPConn); isTCP && ok && errors.Is(readErr, io.EOF) {
		_ = tc.CloseWrite()
		return
	}
	dst.Close()
}
