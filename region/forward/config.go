package forward

import (
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/fenec-go/fenec/internal/flagx"
	"github.com/fenec-go/fenec/wire"
)

// Config bounds the forwarding path.
type Config struct {
	// UpstreamTimeout bounds a whole forwarded request, from its arrival
	// to the end of its answer (a subscription's stream once begun is not
	// bounded). --upstream-timeout, default 60 s.
	UpstreamTimeout time.Duration
	// IdleTimeout drops a pooled node connection idle this long; keep it
	// below the node's own idle timeout (60 s). --idle-timeout, default 50 s.
	IdleTimeout time.Duration
	// DialTimeout bounds connecting to a node, so that a node gone answers
	// 502 fast. Default 1 s.
	DialTimeout time.Duration
	// MaxBodyBytes bounds a request body; bodies are buffered whole so any
	// resend replays them byte for byte. The buffer grows with the bytes
	// received, never with the length a head declares. Default 64 MiB.
	MaxBodyBytes int64
	// MaxBodyMemory bounds the bytes of request bodies held at once, in
	// all, and MaxBodyMemoryPerAddr those of one client address (an IPv6
	// one by its /64): a body whose buffer would grow past either is
	// answered 503 or 429 with Retry-After and its connection closed
	// (budget.go). 0: no bound. --max-body-memory and
	// --max-body-memory-per-addr (MiB), defaults 512 MiB and 192 MiB.
	MaxBodyMemory        int64
	MaxBodyMemoryPerAddr int64
	// BodyTimeout cuts a request body that sends no byte for this long
	// (408, the connection closed): the gap between bytes, not the whole.
	// The router's loop bounds a write to a client the same way
	// (h1.Server.WriteGap). --body-timeout, default 30 s.
	BodyTimeout time.Duration
	// MaxIdlePerNode bounds the idle connections kept per node. Default 128.
	MaxIdlePerNode int
	// TLS makes the config of a new connection to a node addressed
	// https:// (given the host:port dialled); nil: the system's roots
	// verify the node, and no client certificate is shown. The router passes its tlsx.Source's Client: the
	// node is verified against the router's CA bundle and must be named
	// as dialled, the router's certificate is shown for mutual TLS, and
	// sessions are resumed.
	TLS func(hostport string) *tls.Config
	// Resolver is the DNS server (host:port) node names are looked up
	// with, by every connection the router makes to a node (forwarding,
	// grants, admin calls); empty: the system's way. --resolver.
	Resolver string
	// Region is the region a region's router serves; empty on the global
	// tier's routers. A region's routers know only its own tenants and
	// those homed elsewhere with a copy in it, so a tenant they do not
	// know is refused as ErrUnknownInRegion, which says where else it may
	// live. Not a flag: the router sets it.
	Region string
	// CopyWait is how long a read copy near the router may wait for what
	// a read asks (its Fenec-After, or a proof of its Fenec-Max-Staleness)
	// before it declines and the read goes to the primary: a bounded read
	// costs at most this more than one sent to the primary straight away.
	// --copy-wait (ms), default 250.
	CopyWait time.Duration
}

// DefaultConfig returns the defaults API.md names.
func DefaultConfig() Config {
	return Config{
		UpstreamTimeout:      60 * time.Second,
		IdleTimeout:          50 * time.Second,
		DialTimeout:          time.Second,
		MaxBodyBytes:         64 << 20,
		MaxBodyMemory:        512 << 20,
		MaxBodyMemoryPerAddr: 192 << 20,
		BodyTimeout:          30 * time.Second,
		MaxIdlePerNode:       128,
		CopyWait:             250 * time.Millisecond,
	}
}

// Validate checks each field and how they fit together.
func (c Config) Validate() error {
	switch {
	case c.UpstreamTimeout <= 0:
		return fmt.Errorf("%w: upstream timeout must be positive", ErrBadConfig)
	case c.IdleTimeout <= 0:
		return fmt.Errorf("%w: idle timeout must be positive", ErrBadConfig)
	case c.DialTimeout <= 0:
		return fmt.Errorf("%w: dial timeout must be positive", ErrBadConfig)
	case c.DialTimeout > c.UpstreamTimeout:
		return fmt.Errorf("%w: dial timeout above the upstream timeout", ErrBadConfig)
	case c.MaxBodyBytes <= 0:
		return fmt.Errorf("%w: max body bytes must be positive", ErrBadConfig)
	case c.MaxBodyMemory < 0 || c.MaxBodyMemoryPerAddr < 0:
		return fmt.Errorf("%w: body memory bounds must not be negative", ErrBadConfig)
	case c.MaxBodyMemoryPerAddr > 0 && c.MaxBodyMemoryPerAddr <= c.MaxBodyBytes,
		c.MaxBodyMemory > 0 && c.MaxBodyMemory-c.MaxBodyMemory/reserveShare <= c.MaxBodyBytes:
		return fmt.Errorf("%w: body memory bounds must be above the largest body (%d MiB; the bound in all by an eighth more, kept for small bodies), or no request that large could be taken", ErrBadConfig, c.MaxBodyBytes>>20)
	case c.MaxBodyMemory > 0 && c.MaxBodyMemoryPerAddr > c.MaxBodyMemory:
		return fmt.Errorf("%w: one address's body memory above the router's in all", ErrBadConfig)
	case c.BodyTimeout <= 0:
		return fmt.Errorf("%w: body timeout must be positive", ErrBadConfig)
	case c.MaxIdlePerNode < 0:
		return fmt.Errorf("%w: max idle connections per node must not be negative", ErrBadConfig)
	case c.CopyWait < 0 || c.CopyWait > wire.MaxCopyWaitMS*time.Millisecond:
		return fmt.Errorf("%w: copy wait must be 0 to %d ms", ErrBadConfig, wire.MaxCopyWaitMS)
	case c.CopyWait >= c.UpstreamTimeout:
		return fmt.Errorf("%w: copy wait must be below the upstream timeout, or a read a copy declines has no time left for its primary", ErrBadConfig)
	}
	if c.Resolver != "" {
		if _, _, err := net.SplitHostPort(c.Resolver); err != nil {
			return fmt.Errorf("%w: resolver %q must be host:port: %v", ErrBadConfig, c.Resolver, err)
		}
	}
	return nil
}

// AddFlags registers --upstream-timeout, --idle-timeout and
// --body-timeout (seconds), --max-body-memory and
// --max-body-memory-per-addr (MiB), --copy-wait (ms) and --resolver.
func (c *Config) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Resolver, "resolver", c.Resolver, "look node names up at the DNS server `HOST:PORT` (default: the system's way)")
	fs.Var((*flagx.Seconds)(&c.UpstreamTimeout), "upstream-timeout", "bound on a forwarded request, in seconds")
	fs.Var((*flagx.Seconds)(&c.IdleTimeout), "idle-timeout", "drop a pooled node connection idle this many seconds")
	fs.Var((*mebibytes)(&c.MaxBodyMemory), "max-body-memory", "MiB of request bodies the router holds at once; a body past it is answered 503 (0: no bound)")
	fs.Var((*mebibytes)(&c.MaxBodyMemoryPerAddr), "max-body-memory-per-addr", "MiB of request bodies held at once for one client address, an IPv6 one by its /64; a body past it is answered 429 (0: no bound; clients behind a proxy share its address)")
	fs.Var((*millis)(&c.CopyWait), "copy-wait", "milliseconds a read copy near this router (--near) may wait for a read's Fenec-After or staleness bound before the read goes to the primary")
	fs.Var((*flagx.Seconds)(&c.BodyTimeout), "body-timeout", "cut a request body that sends no byte for this many seconds (408), and an answer whose write waits this long on a client taking no byte")
}

// millis is a flag of whole milliseconds over a duration.
type millis time.Duration

func (m *millis) String() string { return strconv.FormatInt(time.Duration(*m).Milliseconds(), 10) }

func (m *millis) Set(v string) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > wire.MaxCopyWaitMS {
		return fmt.Errorf("%q: want whole milliseconds, 0 to %d", v, wire.MaxCopyWaitMS)
	}
	*m = millis(time.Duration(n) * time.Millisecond)
	return nil
}

// mebibytes is a flag of whole MiB over a byte count.
type mebibytes int64

func (m *mebibytes) String() string { return strconv.FormatInt(int64(*m)>>20, 10) }

func (m *mebibytes) Set(v string) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > 1<<23 {
		return fmt.Errorf("%q: want whole MiB, 0 for no bound", v)
	}
	*m = mebibytes(n << 20)
	return nil
}
