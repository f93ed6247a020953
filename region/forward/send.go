package forward

import (
	"net"
	"sync/atomic"
)

// sendConn is what a pooled connection's writer writes to. Armed, its next
// write is a request's last: where the connection is a plain socket
// (sendSocket), that write is made with a system call of its own inside the
// connection's read wait, so that the wait for the answer is set up before
// the request leaves and the read that follows finds the answer there. A
// read straight after a write otherwise first finds nothing, one system
// call a request spent on learning that the node has not answered yet.
type sendConn struct {
	c      net.Conn
	sock   sendSocket
	armed  bool
	whole  *atomic.Bool // set as the armed write is wholly sent
	p      []byte       // the armed write's bytes, while it runs
	n      int          // how many of them went
	err    error        // how the armed write failed
	wrote  bool         // the armed write ran (the wait that follows is for the answer)
	sendFn func(fd uintptr) bool
}

func (s *sendConn) init(c, raw net.Conn) {
	s.c = c
	if c == raw { // not under TLS: the socket carries the request's bytes as they are
		s.sock.init(raw)
	}
	s.sendFn = s.send
}

// arm makes the next write the request's last; whole is set once it is all
// sent, before the answer is waited for.
func (s *sendConn) arm(whole *atomic.Bool) {
	s.armed, s.whole = true, whole
}

func (s *sendConn) Write(p []byte) (int, error) {
	if !s.armed || !s.sock.ok() {
		s.armed = false
		return s.c.Write(p)
	}
	s.armed = false
	s.p, s.n, s.err, s.wrote = p, 0, nil, false
	// The wait ends when the answer can be read, the deadline passes or
	// the connection is closed (a cut, the client gone): the read after it
	// meets the same and answers by the usual rules.
	_ = s.sock.waitAfter(s.sendFn)
	n, err := s.n, s.err
	s.p = nil
	if err == nil && n < len(p) { // the socket's buffer filled: the rest as usual
		m, werr := s.c.Write(p[n:])
		n, err = n+m, werr
	}
	if err == nil {
		s.whole.Store(true)
	}
	return n, err
}

// send is run by the read wait: first to write (false: now wait), then
// once the socket is readable (true: done).
func (s *sendConn) send(fd uintptr) bool {
	if s.wrote {
		return true
	}
	s.wrote = true
	for s.n < len(s.p) {
		m, err := s.sock.write(fd, s.p[s.n:])
		switch {
		case err == errAgain:
			return true // the rest goes through the connection's own writes
		case err != nil:
			s.err = err
			return true
		}
		s.n += m
	}
	s.whole.Store(true)
	return false
}
