package dnsstub

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"
)

func resolverAt(addr string) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
}

// Go's own resolver reads the stub's answers: an address for a name set,
// a refusal for any other, and nothing for a silenced name until the
// caller's context ends.
func TestStub(t *testing.T) {
	s := New(t)
	r := resolverAt(s.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.Set("node.fenec.test", netip.MustParseAddr("127.0.0.7"))
	ips, err := r.LookupNetIP(ctx, "ip4", "node.fenec.test")
	if err != nil || len(ips) != 1 || ips[0] != netip.MustParseAddr("127.0.0.7") {
		t.Fatalf("lookup: %v %v", ips, err)
	}
	var dnsErr *net.DNSError
	if _, err := r.LookupNetIP(ctx, "ip4", "other.fenec.test"); !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Fatalf("unknown name: %v", err)
	}
	s.Silence("node.fenec.test")
	sctx, scancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer scancel()
	if ips, err := r.LookupNetIP(sctx, "ip4", "node.fenec.test"); err == nil {
		t.Fatalf("a silenced name answered %v", ips)
	}
	if sctx.Err() == nil {
		t.Fatal("a silenced name was refused before the caller gave up")
	}
	if s.Dropped() == 0 {
		t.Fatal("no query for the silenced name was counted")
	}
}
