// Command fenec-drill-resolver is the drill's slow resolver: a DNS server
// that passes every query on to another (Docker's, at 127.0.0.11:53 inside
// a container) and passes back every answer that found something, and
// never answers one that did not (NXDOMAIN, SERVFAIL, REFUSED): a removed
// container's name hangs until its asker gives up, as it does on a resolver
// that is slow to refuse it. Pointing fenec's routers and nodes at it
// (--resolver) shows that a node whose name hangs holds up only the calls
// to that node.
//
// It is a tool of the drill, not part of fenec.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "0.0.0.0:5353", "`ADDR` to answer DNS on (UDP and TCP)")
	upstream := flag.String("upstream", "127.0.0.11:53", "the DNS server `ADDR` to pass queries on to")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := serve(ctx, *listen, *upstream); err != nil {
		fmt.Fprintln(os.Stderr, "fenec-drill-resolver:", err)
		os.Exit(1)
	}
}

// upstreamWait bounds one query passed on.
const upstreamWait = 2 * time.Second

// serve answers on UDP and TCP until ctx ends.
func serve(ctx context.Context, listen, upstream string) error {
	pc, err := net.ListenPacket("udp", listen)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		pc.Close()
		return err
	}
	log.Printf("passing DNS on %s to %s; names it does not know are never answered", listen, upstream)
	var wg sync.WaitGroup
	wg.Go(func() { serveUDP(pc, upstream) })
	wg.Go(func() { serveTCP(ln, upstream) })
	<-ctx.Done()
	pc.Close()
	ln.Close()
	wg.Wait()
	return nil
}

func serveUDP(pc net.PacketConn, upstream string) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		buf := make([]byte, 4096)
		n, addr, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		wg.Go(func() {
			if ans, ok := ask("udp", upstream, buf[:n]); ok {
				pc.WriteTo(ans, addr)
			}
		})
	}
}

func serveTCP(ln net.Listener, upstream string) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		wg.Go(func() {
			defer c.Close()
			for {
				q, err := readTCP(c)
				if err != nil {
					return
				}
				if ans, ok := ask("tcp", upstream, q); ok {
					if writeTCP(c, ans) != nil {
						return
					}
				}
			}
		})
	}
}

// ask passes one query on and returns its answer, unless it found nothing.
func ask(network, upstream string, q []byte) ([]byte, bool) {
	c, err := net.DialTimeout(network, upstream, upstreamWait)
	if err != nil {
		return nil, false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(upstreamWait))
	var ans []byte
	if network == "tcp" {
		if writeTCP(c, q) != nil {
			return nil, false
		}
		if ans, err = readTCP(c); err != nil {
			return nil, false
		}
	} else {
		if _, err := c.Write(q); err != nil {
			return nil, false
		}
		buf := make([]byte, 65535)
		n, err := c.Read(buf)
		if err != nil {
			return nil, false
		}
		ans = buf[:n]
	}
	if len(ans) < 12 || ans[3]&0x0f != 0 { // RCODE: anything but NOERROR found nothing
		return nil, false
	}
	return ans, true
}

func readTCP(r io.Reader) ([]byte, error) {
	var n [2]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint16(n[:]))
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

func writeTCP(w io.Writer, b []byte) error {
	if len(b) > 65535 {
		return errors.New("message too long")
	}
	out := binary.BigEndian.AppendUint16(nil, uint16(len(b)))
	_, err := w.Write(append(out, b...))
	return err
}
