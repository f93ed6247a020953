package forward

import (
	"errors"
	"flag"
	"io"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/httptoken"
)

func TestParseTarget(t *testing.T) {
	cases := []struct {
		raw    string
		tenant string
		rt     route
		err    error
	}{
		{"/t/acme/query", "acme", routeQuery, nil},
		{"/t/acme/batch", "acme", routeBatch, nil},
		{"/t/acme/orders?total=gt.10", "acme", routeRest, nil},
		{"/t/acme/orders/changes?since=3", "acme", routeChanges, nil},
		{"/t/acme/_changes?since=3&wait=100", "acme", routeChanges, nil},
		{"/t/acme/_health", "acme", routeOther, nil},
		{"/t/acme/_replication?since=1", "acme", routeOther, nil},
		{"/t/acme", "acme", routeOther, nil},
		{"/t/acme?x", "acme", routeOther, nil},
		{"/t/a_b-9/query", "a_b-9", routeQuery, nil},
		{"/t/ACME/query", "", routeOther, ErrBadTenant},
		{"/t/%61cme/query", "", routeOther, ErrBadTenant},
		{"/t//query", "", routeOther, ErrBadTenant},
		{"/t/", "", routeOther, ErrBadTenant},
		{"/x/acme/query", "", routeOther, ErrBadTarget},
		{"http://host/t/acme/query", "", routeOther, ErrBadTarget},
		{"/t/" + string(make([]byte, 65)), "", routeOther, ErrBadTenant},
	}
	for _, tc := range cases {
		tenant, rt, err := parseTarget(tc.raw)
		if tenant != tc.tenant || rt != tc.rt || !errors.Is(err, tc.err) {
			t.Errorf("parseTarget(%q) = %q, %v, %v; want %q, %v, %v", tc.raw, tenant, rt, err, tc.tenant, tc.rt, tc.err)
		}
	}
}

func TestHeaderRules(t *testing.T) {
	conn := []string{"keep-alive, X-Secret", "x-other"}
	for k, want := range map[string]bool{
		"X-Secret": true, "X-Other": true, "Keep-Alive": true, "Proxy-Authorization": true,
		"Te": true, "Trailer": true, "Upgrade": true, "Transfer-Encoding": true, "Connection": true,
		"Host": true, "Content-Length": true, "Expect": true,
		"Authorization": false, "Fenec-Wait": false, "Idempotency-Key": false, "X-Secretive": false,
	} {
		if got := skipRequestHeader(k, conn); got != want {
			t.Errorf("skipRequestHeader(%q) = %v", k, got)
		}
	}
	for addr, want := range map[string]string{"127.0.0.1:80": "127.0.0.1", "[::1]:9": "::1", "pipe": "pipe"} {
		if got := clientIP(addr); got != want {
			t.Errorf("clientIP(%q) = %q", addr, got)
		}
	}
	for id, want := range map[string]bool{"abc-1.2": true, "": false, "has space": false, "é": false} {
		if got := SaneRequestID(id); got != want {
			t.Errorf("SaneRequestID(%q) = %v", id, got)
		}
	}
	for s, want := range map[string]int64{"0": 0, "5000": 5000, "-1": -1, "1e3": -1, "": -1} {
		got, ok := httptoken.Decimal(s, 12) // Fenec-Wait's reading
		if !ok {
			got = -1
		}
		if got != want {
			t.Errorf("Fenec-Wait %q read as %d", s, got)
		}
	}
}

func TestForwardConfig(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []func(*Config){
		func(c *Config) { c.UpstreamTimeout = 0 },
		func(c *Config) { c.IdleTimeout = -1 },
		func(c *Config) { c.DialTimeout = 0 },
		func(c *Config) { c.DialTimeout = 2 * c.UpstreamTimeout },
		func(c *Config) { c.MaxBodyBytes = 0 },
		func(c *Config) { c.BodyTimeout = 0 },
		func(c *Config) { c.MaxIdlePerNode = -1 },
		func(c *Config) { c.Resolver = "10.0.0.2" }, // no port
	}
	for i, mut := range bad {
		c := DefaultConfig()
		mut(&c)
		if err := c.Validate(); !errors.Is(err, ErrBadConfig) {
			t.Errorf("case %d: %v", i, err)
		}
	}
	c := DefaultConfig()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.AddFlags(fs)
	if err := fs.Parse([]string{"--upstream-timeout", "4", "--idle-timeout", "0.5", "--body-timeout", "7"}); err != nil {
		t.Fatal(err)
	}
	if c.UpstreamTimeout != 4*time.Second || c.IdleTimeout != 500*time.Millisecond || c.BodyTimeout != 7*time.Second {
		t.Fatalf("flags gave %v %v %v", c.UpstreamTimeout, c.IdleTimeout, c.BodyTimeout)
	}
	if err := fs.Parse([]string{"--idle-timeout", "soon"}); err == nil {
		t.Fatal("bad seconds accepted")
	}
}
