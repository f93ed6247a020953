// Package connlimit bounds the client connections a server holds open at
// once: all of them (--max-conns) and those of one address
// (--max-conns-per-addr; an IPv6 address by its /64, which one client
// holds whole). Without a bound, a stranger opening connections and
// keeping them open takes a server's memory and descriptors from every
// other client, and from the server itself: a router's connections to its
// nodes and its directory, a node's tenant files.
//
// Listener wraps the server's listener: a connection past a bound is
// answered at once, never reaching the server — 503 past the total, 429
// past the address's share, each with Retry-After and a JSON error that
// says what to do — and closed. The server calls Release as each
// connection it was given ends, whichever way it ends; the count is the
// server's own bookkeeping, so an accepted connection is never wrapped and
// the server's fast paths see the connection they expect.
package connlimit

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenec-go/fenec/internal/badtoken"
)

// Limits are the bounds; 0 is no bound.
type Limits struct {
	Total   int // connections open at once
	PerAddr int // connections open at once from one address
}

// Why a connection was refused, as metrics label it.
const (
	ReasonTotal   = "total"   // the server held Total
	ReasonAddress = "address" // the address held PerAddr
)

// Refusals in flight at most: a refusal past them is closed unanswered,
// so a flood of connections past a bound costs the server a close each.
const maxRefusing = 32

// refuseWithin bounds one refusal: its answer written, and what the
// client sent read and dropped (so that closing does not reset the
// connection before the client read the answer). A variable so that a
// test can make it longer than itself.
var refuseWithin = time.Second

// refuseDrain is the most a refusal reads of what the client sent.
const refuseDrain = 64 << 10

// Limiter counts a server's open connections against its Limits.
type Limiter struct {
	lim     Limits
	prefix  string
	refused *prometheus.CounterVec // by reason

	mu      sync.Mutex
	open    int                 // guarded by mu
	by      map[string]int      // guarded by mu: open connections by address key
	trusted map[string]struct{} // guarded by mu: address keys PerAddr spares
	peers   int                 // guarded by mu: of Total, what only trusted addresses may take

	rmu      sync.Mutex
	refusing map[net.Conn]struct{} // guarded by rmu
	closed   bool                  // guarded by rmu: no refusal starts
	wg       sync.WaitGroup        // refusals in flight
}

// New returns a Limiter of lim. Its series are named after prefix
// (Collectors).
func New(lim Limits, prefix string) *Limiter {
	l := &Limiter{lim: lim, by: map[string]int{}, trusted: map[string]struct{}{}, refusing: map[net.Conn]struct{}{}, prefix: prefix}
	l.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: prefix + "_refused_connections_total",
		Help: "Client connections answered and closed as they came: total (503, the server held --max-conns), address (429, the address held --max-conns-per-addr).",
	}, []string{"reason"})
	l.refused.WithLabelValues(ReasonTotal)
	l.refused.WithLabelValues(ReasonAddress)
	return l
}

// Collectors are the Limiter's series: connections refused by reason,
// and, with open, the connections open (<prefix>_open_connections) for a
// server that does not count them itself.
func (l *Limiter) Collectors(open bool) []prometheus.Collector {
	cs := []prometheus.Collector{l.refused}
	if open {
		cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: l.prefix + "_open_connections",
			Help: "Client connections open.",
		}, func() float64 { return float64(l.Open()) }))
	}
	return cs
}

// Open is how many connections the server holds now.
func (l *Limiter) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// key is what an address's connections are counted against.
func key(a net.Addr) string {
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return badtoken.ClientKey(host)
}

// admit counts a connection from a in, or says why it is refused.
func (l *Limiter) admit(a net.Addr) (reason string) {
	k := key(a)
	l.mu.Lock()
	defer l.mu.Unlock()
	_, trusted := l.trusted[k]
	switch {
	case l.lim.Total > 0 && l.open >= l.lim.Total:
		return ReasonTotal
	case l.lim.Total > 0 && !trusted && l.open >= l.lim.Total-l.peers:
		return ReasonTotal
	case l.lim.PerAddr > 0 && l.by[k] >= l.lim.PerAddr && !trusted:
		return ReasonAddress
	}
	l.open++
	l.by[k]++
	return ""
}

// maxTrusted bounds the addresses Trust keeps: a server's routers and
// copies are a handful, and proving is what it takes to be one.
const maxTrusted = 4096

// Trust spares host's connections (a remote host, as a request's
// RemoteAddr names it, port or none) the address bound from now on: the
// server calls it once a request from host proved itself one of its own
// peers — a router's proof of the admin token, a copy's replication
// token — so that a stranger's connections never crowd out its routers'.
// They still count against the total.
func (l *Limiter) Trust(host string) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	k := badtoken.ClientKey(host)
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.trusted[k]; ok || len(l.trusted) >= maxTrusted {
		return
	}
	l.trusted[k] = struct{}{}
}

// KeepForPeers keeps an eighth of Total (at least one connection) for
// trusted addresses alone: however many strangers fill the rest, a
// server's own peers can still open the connections their work needs —
// a router its lease renewals, a copy its follow.
func (l *Limiter) KeepForPeers() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lim.Total > 1 {
		l.peers = max(l.lim.Total/8, 1)
	}
}

// Release counts c out: the server calls it once for each connection the
// Listener gave it, as that connection ends.
func (l *Limiter) Release(c net.Conn) {
	k := key(c.RemoteAddr())
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open > 0 {
		l.open--
	}
	switch n := l.by[k]; {
	case n > 1:
		l.by[k] = n - 1
	case n == 1:
		delete(l.by, k)
	}
}

// Listener returns ln with the Limiter's bounds on the connections it
// gives. Closing it closes ln and ends the refusals in flight.
func (l *Limiter) Listener(ln net.Listener) net.Listener {
	return &listener{Listener: ln, l: l}
}

type listener struct {
	net.Listener
	l *Limiter
}

// Accept returns the next connection within the bounds; those past them
// are answered and closed on the way.
func (ln *listener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		reason := ln.l.admit(c.RemoteAddr())
		if reason == "" {
			return c, nil
		}
		ln.l.refused.WithLabelValues(reason).Inc()
		ln.l.refuse(c, reason)
	}
}

func (ln *listener) Close() error {
	err := ln.Listener.Close()
	ln.l.endRefusals()
	return err
}

// refuse answers c on a goroutine of its own, or closes it at once when
// maxRefusing are under way or the listener is closed.
func (l *Limiter) refuse(c net.Conn, reason string) {
	l.rmu.Lock()
	if l.closed || len(l.refusing) >= maxRefusing {
		l.rmu.Unlock()
		_ = c.Close()
		return
	}
	l.refusing[c] = struct{}{}
	l.wg.Add(1)
	l.rmu.Unlock()
	answer := l.answer(reason)
	go func() {
		defer l.wg.Done()
		defer func() {
			l.rmu.Lock()
			delete(l.refusing, c)
			l.rmu.Unlock()
			_ = c.Close()
		}()
		_ = c.SetDeadline(time.Now().Add(refuseWithin))
		if _, err := c.Write(answer); err != nil {
			return
		}
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(c, refuseDrain))
	}()
}

// endRefusals closes the refusals in flight and waits for them.
func (l *Limiter) endRefusals() {
	l.rmu.Lock()
	l.closed = true
	for c := range l.refusing {
		_ = c.Close()
	}
	l.rmu.Unlock()
	l.wg.Wait()
}

// answer is the whole HTTP answer to a connection refused for reason.
func (l *Limiter) answer(reason string) []byte {
	status, msg := "503 Service Unavailable", fmt.Sprintf(
		"this server holds as many client connections as it takes at once (--max-conns %d): "+
			"retry after Retry-After seconds, reusing one connection for many requests (keep-alive) "+
			"rather than opening more; an operator can raise --max-conns", l.lim.Total)
	if reason == ReasonAddress {
		status, msg = "429 Too Many Requests", fmt.Sprintf(
			"your address holds as many connections to this server as one address may (--max-conns-per-addr %d): "+
				"reuse the connections you have open (keep-alive) or close idle ones, and retry after Retry-After seconds; "+
				"clients behind one proxy share its address, and an operator can raise --max-conns-per-addr (0: no bound)",
			l.lim.PerAddr)
	}
	body, _ := json.Marshal(map[string]string{"error": msg})
	body = append(body, '\n')
	var id [12]byte
	rand.Read(id[:])
	return []byte("HTTP/1.1 " + status + "\r\n" +
		"Content-Type: application/json\r\n" +
		"X-Request-Id: " + hex.EncodeToString(id[:]) + "\r\n" +
		"Retry-After: 1\r\n" +
		"Connection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + string(body))
}

// AddFlags binds --max-conns and --max-conns-per-addr to l, its values
// the defaults.
func (l *Limits) AddFlags(fs *flag.FlagSet) {
	fs.Func("max-conns", fmt.Sprintf("client connections open at once; one past it is answered 503 and closed (0: no bound) (default %d)", l.Total), count(&l.Total))
	fs.Func("max-conns-per-addr", fmt.Sprintf("client connections open at once from one address, an IPv6 one by its /64; one past it is answered 429 and closed (0: no bound; clients behind a proxy share its address) (default %d)", l.PerAddr), count(&l.PerAddr))
}

// count parses a bound: a whole number, 0 or more.
func count(dst *int) func(string) error {
	return func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("%q: want a whole number, 0 for no bound", v)
		}
		*dst = n
		return nil
	}
}

// Clamped returns l with Total at most the process's descriptor limit
// less a reserve — a quarter of the limit, at least 64 — for what the
// server opens itself (tenant files, its connections to nodes, peers and
// the directory), and says whether it lowered it (limit is the
// descriptor limit then). A bound at or past the limit would let client
// connections take the descriptors the server's own work needs: its
// writes would fail, not its clients' connections.
func (l Limits) Clamped() (out Limits, lowered bool, limit uint64) {
	return l.clampTo(descriptorLimit())
}

func (l Limits) clampTo(limit uint64) (Limits, bool, uint64) {
	if limit == 0 {
		return l, false, 0
	}
	reserve := max(limit/4, 64)
	most := 1
	if limit > reserve+1 {
		most = int(min(limit-reserve, 1<<30))
	}
	if l.Total == 0 || l.Total > most {
		l.Total = most
		return l, true, limit
	}
	return l, false, limit
}
