// Package dnsstub is a DNS server on loopback UDP for tests: it answers A
// queries for the names it is told, NXDOMAIN for every other name, and
// nothing at all for a name made silent — a resolver slow to refuse a name
// whose machine is gone.
package dnsstub

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Server is one stub DNS server; the test's cleanup stops it.
type Server struct {
	conn   *net.UDPConn
	mu     sync.Mutex
	names  map[string]netip.Addr // lower case, no trailing dot
	silent map[string]bool
	// dropped counts queries left unanswered for a silenced name.
	dropped atomic.Int64
	wg      sync.WaitGroup
}

// New starts a server on 127.0.0.1 and stops it when tb ends.
func New(tb testing.TB) *Server {
	tb.Helper()
	s, err := Start()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// Start starts a server on 127.0.0.1 outside a test (a benchmark
// program's); Close stops it.
func Start() (*Server, error) {
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	s := &Server{conn: conn, names: map[string]netip.Addr{}, silent: map[string]bool{}}
	s.wg.Go(s.serve)
	return s, nil
}

// Close stops the server and waits for it. Safe to call twice.
func (s *Server) Close() {
	s.conn.Close()
	s.wg.Wait()
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.conn.LocalAddr().String() }

// Set answers name with ip (IPv4) from now on.
func (s *Server) Set(name string, ip netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name = canon(name)
	s.names[name] = ip
	delete(s.silent, name)
}

// Dropped counts the queries left unanswered for silenced names.
func (s *Server) Dropped() int64 { return s.dropped.Load() }

// Silence answers nothing for name from now on.
func (s *Server) Silence(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.silent[canon(name)] = true
}

func canon(name string) string { return strings.TrimSuffix(strings.ToLower(name), ".") }

func (s *Server) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := s.conn.ReadFromUDP(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if out, ok := s.answer(buf[:n]); ok {
			s.conn.WriteToUDP(out, from)
		}
	}
}

const (
	typeA   = 1
	classIN = 1
)

// answer builds the reply to one query: false when it gets none (a
// silent name, or a message that is no query it understands).
func (s *Server) answer(q []byte) ([]byte, bool) {
	if len(q) < 12 || q[2]&0x80 != 0 || binary.BigEndian.Uint16(q[4:]) != 1 {
		return nil, false
	}
	var labels []string
	i := 12
	for {
		if i >= len(q) {
			return nil, false
		}
		l := int(q[i])
		i++
		if l == 0 {
			break
		}
		if l > 63 || i+l > len(q) {
			return nil, false
		}
		labels = append(labels, string(q[i:i+l]))
		i += l
	}
	if i+4 > len(q) {
		return nil, false
	}
	qtype, qclass := binary.BigEndian.Uint16(q[i:]), binary.BigEndian.Uint16(q[i+2:])
	question := q[12 : i+4]
	name := canon(strings.Join(labels, "."))

	s.mu.Lock()
	ip, known := s.names[name]
	silent := s.silent[name]
	s.mu.Unlock()
	if silent {
		s.dropped.Add(1)
		return nil, false
	}
	rcode := uint16(0)
	answers := 0
	switch {
	case !known:
		rcode = 3 // NXDOMAIN
	case qtype == typeA && qclass == classIN && ip.Is4():
		answers = 1
	}
	out := make([]byte, 12, 12+len(question)+16)
	copy(out, q[:2])                                                                     // id
	binary.BigEndian.PutUint16(out[2:], 0x8000|0x0400|uint16(q[2]&0x01)<<8|0x0080|rcode) // QR AA RD RA
	binary.BigEndian.PutUint16(out[4:], 1)
	binary.BigEndian.PutUint16(out[6:], uint16(answers))
	out = append(out, question...)
	if answers == 1 {
		a := ip.As4()
		out = append(out, 0xC0, 12) // the name: a pointer to the question's
		out = binary.BigEndian.AppendUint16(out, typeA)
		out = binary.BigEndian.AppendUint16(out, classIN)
		out = binary.BigEndian.AppendUint32(out, 0) // TTL: look again every time
		out = binary.BigEndian.AppendUint16(out, 4)
		out = append(out, a[:]...)
	}
	return out, true
}
