// Package rawtcp makes the reads and writes of a TCP connection without
// telling the Go scheduler they are system calls.
//
// A socket the runtime's poller holds is non-blocking: a read or write on
// it returns at once, with bytes or EAGAIN, and the poller parks the
// goroutine until the socket is ready. net.Conn still makes each such call
// as a blocking system call would be made (entersyscall and exitsyscall
// around it), and on a process whose processors all went idle between
// requests — a proxy waiting on its clients and its nodes — that entry
// wakes the runtime's monitor thread (sysmon) from its deep sleep, which
// then polls every 20 µs for the next millisecond. On a small machine
// serving keyed reads, that thread's wake-ups and sleeps were an eighth of
// the router's CPU.
//
// A Conn here makes the same calls as raw system calls inside the
// connection's syscall.RawConn: the poller, deadlines, Close ending a
// blocked read, and the errors a net.Conn returns stay as they were. Only
// read and write change; everything else is the *net.TCPConn's.
package rawtcp

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// Conn is a *net.TCPConn whose Read and Write are raw system calls.
type Conn struct {
	*net.TCPConn
	raw syscall.RawConn

	rmu     sync.Mutex // one Read at a time owns rbuf, rn and rerr
	rbuf    []byte
	rn      int
	rerr    error
	readFn  func(fd uintptr) bool
	wmu     sync.Mutex // one Write at a time owns wbuf, wn and werr
	wbuf    []byte
	wn      int
	werr    error
	writeFn func(fd uintptr) bool
	// WriteAwait's state, owned like wbuf by the Write lock.
	awaitFn  func(fd uintptr) bool
	awaiting bool        // the bytes are written: the next call means readable
	then     func() bool // WriteAwait's written
}

// Wrap returns c as a Conn when it is a plain TCP connection and raw calls
// can be made on it here, and c itself otherwise (and always under -race:
// raceBuild).
func Wrap(c net.Conn) net.Conn {
	if raceBuild {
		return c
	}
	return wrap(c)
}

// wrap is Wrap whatever the build.
func wrap(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok || !supported {
		return c
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	rc := &Conn{TCPConn: tc, raw: raw}
	rc.readFn = rc.read
	rc.writeFn = rc.write
	rc.awaitFn = rc.writeThenWait
	return rc
}

// Read reads as net.Conn's Read does.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.rbuf, c.rn, c.rerr = p, 0, nil
	err := c.raw.Read(c.readFn)
	n, rerr := c.rn, c.rerr
	c.rbuf, c.rerr = nil, nil
	switch {
	case err != nil:
		return 0, c.opError("read", err)
	case rerr != nil:
		return 0, c.opError("read", rerr)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (c *Conn) read(fd uintptr) bool {
	for {
		n, errno := sysRead(fd, c.rbuf)
		switch errno {
		case 0:
			c.rn = n
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false // the poller waits for the socket
		}
		c.rerr = os.NewSyscallError("read", errno)
		return true
	}
}

// Write writes as net.Conn's Write does: all of p, or an error.
func (c *Conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeLocked(p)
}

// writeLocked is Write with the write lock held.
func (c *Conn) writeLocked(p []byte) (int, error) {
	c.wbuf, c.wn, c.werr = p, 0, nil
	var err error
	if len(p) > 0 {
		err = c.raw.Write(c.writeFn)
	}
	n, werr := c.wn, c.werr
	c.wbuf, c.werr = nil, nil
	switch {
	case err != nil:
		return n, c.opError("write", err)
	case werr != nil:
		return n, c.opError("write", werr)
	}
	return n, nil
}

// write is Write's step inside the connection's write: false while the
// socket has no room (the poller waits).
func (c *Conn) write(fd uintptr) bool { return !c.writeOut(fd) }

// writeOut writes what is left of wbuf from wn on; full reports that the
// socket took no more (EAGAIN) before its end. Any other error is kept in
// werr.
func (c *Conn) writeOut(fd uintptr) (full bool) {
	for c.wn < len(c.wbuf) {
		n, errno := sysWrite(fd, c.wbuf[c.wn:])
		switch errno {
		case 0:
			c.wn += n
			continue
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return true
		}
		c.werr = os.NewSyscallError("write", errno)
		return false
	}
	return false
}

// WriteAwait writes p as Write does and then waits, without reading, for
// the connection to have something to read — the reply to what p asks —
// or its read deadline to pass or the connection to close. A reader of the
// reply then finds it at its first read. written, if not nil, is called
// once p is wholly written and before the wait; false skips the wait. It
// runs inside the connection's read, whose hold on the socket Close waits
// to see released: it must not wait on anything a closer may hold. No
// other Write on the connection goes ahead until WriteAwait returns.
//
// It saves the read a reply's wait would otherwise begin with: the
// poller waits only after a read came back empty (EAGAIN), because a
// readiness it saw before that read was prepared for is forgotten. Here
// the wait is prepared first and the write made inside it, so a reply,
// however quick, can only arrive after, and the first read is not needed.
//
// Bytes already unread on the socket when it is called may not end the
// wait: call it on a connection with nothing to read. A socket that takes
// only part of p at once gets the rest as Write gives it, and no wait is
// made. Whether the wait ended with a reply, a deadline or a close is not
// reported: the reader's first read says it.
func (c *Conn) WriteAwait(p []byte, written func() bool) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if len(p) == 0 {
		return 0, nil
	}
	c.wbuf, c.wn, c.werr, c.awaiting, c.then = p, 0, nil, false, written
	err := c.raw.Read(c.awaitFn)
	n, werr, wrote := c.wn, c.werr, c.awaiting
	c.wbuf, c.werr, c.awaiting, c.then = nil, nil, false, nil
	switch {
	case werr != nil:
		return n, c.opError("write", werr)
	case wrote:
		return n, nil // whatever ended the wait, the reader meets it again
	case err != nil:
		return n, c.opError("write", err) // nothing written: closed, or past the read deadline
	}
	m, err := c.writeLocked(p[n:]) // the socket was full: the rest as Write does
	return n + m, err
}

// writeThenWait is WriteAwait's step inside the connection's read: first
// the write, then (returning false) the poller's wait, then (called again
// once readable) done.
func (c *Conn) writeThenWait(fd uintptr) bool {
	if c.awaiting {
		return true
	}
	if c.writeOut(fd) || c.werr != nil {
		return true // full: WriteAwait writes the rest; or failed
	}
	c.awaiting = true
	return c.then != nil && !c.then()
}

// opError dresses err as net.Conn's own errors are dressed.
func (c *Conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// Listener returns ln with every plain TCP connection it accepts wrapped
// (a listener under TLS: the handshake and records ride on raw calls too)
// and holding at most NotSentLowat bytes unsent in the kernel.
func Listener(ln net.Listener) net.Listener { return listener{ln} }

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		limitNotSent(tc)
	}
	return Wrap(c), nil
}

// NotSentLowat is how many bytes an accepted connection keeps queued in
// the kernel and not yet sent (TCP_NOTSENT_LOWAT, Linux): a write beyond
// it waits until the client's reading lets the queue drain below it. A
// server's write then waits on its client's own pace, not on megabytes of
// send buffer draining first (the kernel otherwise wakes a writer only
// once a third of a buffer grown to 4 MB has gone), so a write deadline
// measures the client's silence, and a slow client pins 128 KB of kernel
// memory rather than megabytes. Bytes in flight are not counted: a fast
// link's window is not held to it.
const NotSentLowat = 128 << 10
