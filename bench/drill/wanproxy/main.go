// Command wanproxy is the drill's wide-area link where the kernel has no
// netem: run in a container's network namespace (nsenter -t PID -n), it
// takes the connections iptables redirects to it (the container's
// connections to another region's containers: REDIRECT in the nat table's
// OUTPUT chain), dials each one's original address from the same
// namespace, and passes the bytes on both ways, each chunk held -delay
// after it was read: a round trip of twice the delay, as a netem delay on
// both sides would give. A connection is held a round trip before its
// dial, as a SYN and its answer across the link would be. Its own dials
// carry -mark, which the redirect rule leaves alone.
//
// Unlike netem it cannot refuse a connection: the kernel has accepted it
// before the proxy dials. A dial that fails or takes longer than
// -dial-timeout (fenec's own dial bound, 1 s) resets the connection
// instead, so a client dialling a dead address sees its connection reset
// about that long after, where through netem its dial would time out.
//
// It is not fenec and imports nothing of it; bench/drill/wan.go starts one
// per container and stops it.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// soOriginalDst is SO_ORIGINAL_DST (linux/netfilter_ipv4.h): the address
// a redirected connection was sent to.
const soOriginalDst = 80

func main() {
	listen := flag.String("listen", "127.0.0.1:17999", "where the redirected connections arrive")
	delay := flag.Duration("delay", 25*time.Millisecond, "one way's delay")
	mark := flag.Int("mark", 0x7e, "the firewall mark on this proxy's own dials")
	dialTimeout := flag.Duration("dial-timeout", time.Second, "how long a dial may take before the connection is reset")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *listen, *delay, *mark, *dialTimeout); err != nil {
		fmt.Fprintln(os.Stderr, "wanproxy:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, listen string, delay time.Duration, mark int, dialTimeout time.Duration) error {
	ln, err := net.Listen("tcp4", listen)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	go func() { <-ctx.Done(); ln.Close() }()
	dialer := net.Dialer{Timeout: dialTimeout, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_MARK, mark) })
		return errors.Join(err, serr)
	}}
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Go(func() { serve(ctx, c.(*net.TCPConn), &dialer, delay) })
	}
}

// serve carries one redirected connection to where it was sent.
func serve(ctx context.Context, in *net.TCPConn, dialer *net.Dialer, delay time.Duration) {
	defer in.Close()
	to, err := originalDst(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wanproxy:", err)
		return
	}
	if to == in.LocalAddr().String() {
		// Not redirected: sent to the proxy itself, which would dial
		// itself again and again.
		in.SetLinger(0)
		return
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(2 * delay): // the SYN and its answer
	}
	c, err := dialer.DialContext(ctx, "tcp4", to)
	if err != nil {
		in.SetLinger(0) // closed with a reset, as near a refusal as an accepted connection gets
		return
	}
	out := c.(*net.TCPConn)
	defer out.Close()
	stop := context.AfterFunc(ctx, func() { in.Close(); out.Close() })
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { pipe(out, in, delay) })
	pipe(in, out, delay)
	wg.Wait()
}

// chunk is what one read took, and when.
type chunk struct {
	b  []byte
	at time.Time
}

// pipe copies src to dst, each chunk written delay after it was read;
// at src's end it closes dst's writing side.
func pipe(dst, src *net.TCPConn, delay time.Duration) {
	q := make(chan chunk, 4096)
	go func() {
		defer close(q)
		for {
			b := make([]byte, 32<<10)
			n, err := src.Read(b)
			if n > 0 {
				q <- chunk{b: b[:n], at: time.Now()}
			}
			if err != nil {
				return
			}
		}
	}()
	failed := false
	for c := range q {
		if failed {
			continue // drain, so the reader ends
		}
		if wait := time.Until(c.at.Add(delay)); wait > 0 {
			time.Sleep(wait)
		}
		if _, err := dst.Write(c.b); err != nil {
			failed = true
			src.CloseRead()
		}
	}
	dst.CloseWrite()
}

// originalDst is the address a redirected connection was sent to.
func originalDst(c *net.TCPConn) (string, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return "", err
	}
	var addr string
	var serr error
	err = raw.Control(func(fd uintptr) {
		// A sockaddr_in read into the IPv6 multicast request's 16 bytes,
		// the one getsockopt of that size the syscall package offers.
		m, err := syscall.GetsockoptIPv6Mreq(int(fd), syscall.IPPROTO_IP, soOriginalDst)
		if err != nil {
			serr = fmt.Errorf("the redirected address: %w", err)
			return
		}
		port := binary.BigEndian.Uint16(m.Multiaddr[2:4])
		ip := net.IPv4(m.Multiaddr[4], m.Multiaddr[5], m.Multiaddr[6], m.Multiaddr[7])
		addr = net.JoinHostPort(ip.String(), fmt.Sprint(port))
	})
	return addr, errors.Join(err, serr)
}
