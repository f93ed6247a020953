package node

import (
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/engine"
	"github.com/fenec-go/fenec/internal/tlsx"
)

func TestConfigFlags(t *testing.T) {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	cfg.AddFlags(fs)
	err := fs.Parse([]string{"--dir", "/d", "--http", "127.0.0.1:9", "--idle-close", "1.5",
		"--max-memory", "64", "--idle-timeout", "7", "--idempotency-ttl", "60", "--max-streams", "3",
		"--sync", "always", "--admin-token", "a", "--http-token", "h", "--audit", "/a.log", "--max-body", "10",
		"--body-timeout", "2.5", "--replica-wait", "0.75"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Dir != "/d" || cfg.IdleClose != 1500*time.Millisecond || cfg.MaxMemory != 64<<20 ||
		cfg.IdleTimeout != 7*time.Second || cfg.IdempotencyTTL != time.Minute || cfg.MaxStreams != 3 ||
		cfg.AdminToken != "a" || cfg.HTTPToken != "h" || cfg.Audit != "/a.log" || cfg.MaxBody != 10 ||
		cfg.BodyTimeout != 2500*time.Millisecond || cfg.ReplicaWait != 750*time.Millisecond {
		t.Fatalf("flags parsed into %+v", cfg)
	}
	mode, _, err := cfg.syncMode()
	if err != nil || mode != engine.SyncAlways {
		t.Fatalf("sync mode %v %v", mode, err)
	}
}

func TestConfigValidate(t *testing.T) {
	base := func() Config {
		c := DefaultConfig()
		c.Dir = "/d"
		return c
	}
	tests := []struct {
		name string
		mod  func(*Config)
		want string // substring of the error; "" for valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"no dir", func(c *Config) { c.Dir = "" }, "dir"},
		{"bad sync", func(c *Config) { c.Sync = "sometimes" }, "sync"},
		{"sync ms", func(c *Config) { c.Sync = "250" }, ""},
		{"public no token", func(c *Config) { c.HTTP = "0.0.0.0:80" }, "loopback"},
		{"public with token, no tls", func(c *Config) { c.HTTP = "0.0.0.0:80"; c.HTTPToken = "x" }, "--tls-cert and --tls-key"},
		{"public with token and tls", func(c *Config) {
			c.HTTP, c.HTTPToken, c.TokenFiles.HTTP, c.TLS = "0.0.0.0:80", "x", "/f/http", tlsx.Files{Cert: "c", Key: "k"}
		}, ""},
		{"public, data token a flag", func(c *Config) {
			c.HTTP, c.HTTPToken, c.TLS = "0.0.0.0:80", "x", tlsx.Files{Cert: "c", Key: "k"}
		}, "--http-token-file"},
		{"public, admin token a flag", func(c *Config) {
			c.HTTP, c.HTTPToken, c.TokenFiles.HTTP, c.AdminToken, c.TLS = "0.0.0.0:80", "x", "/f/http", "a", tlsx.Files{Cert: "c", Key: "k"}
		}, "--admin-token-file"},
		{"public, replication token a flag", func(c *Config) {
			c.HTTP, c.HTTPToken, c.TokenFiles.HTTP, c.ReplicationToken, c.TLS = "0.0.0.0:80", "x", "/f/http", "r", tlsx.Files{Cert: "c", Key: "k"}
		}, "--replication-token-file"},
		{"public, every token from a file", func(c *Config) {
			c.HTTP, c.TLS = "0.0.0.0:80", tlsx.Files{Cert: "c", Key: "k"}
			c.HTTPToken, c.AdminToken, c.ReplicationToken = "x", "a", "r"
			c.TokenFiles = TokenFiles{HTTP: "/f/h", Admin: "/f/a", Replication: "/f/r"}
		}, ""},
		{"public insecure, flag tokens", func(c *Config) { c.HTTP, c.HTTPToken, c.AdminToken, c.Insecure = "10.0.0.1:80", "x", "a", true }, ""},
		{"loopback, flag tokens", func(c *Config) { c.HTTPToken, c.AdminToken = "x", "a" }, ""},
		{"public tls, no token", func(c *Config) { c.HTTP, c.TLS = "0.0.0.0:80", tlsx.Files{Cert: "c", Key: "k"} }, "--http-token"},
		{"cert without key", func(c *Config) { c.TLS = tlsx.Files{Cert: "c"} }, "key go together"},
		{"client auth without ca", func(c *Config) { c.TLS, c.ClientAuth = tlsx.Files{Cert: "c", Key: "k"}, ClientAuthAdmin }, "--tls-ca"},
		{"client auth", func(c *Config) {
			c.TLS, c.ClientAuth = tlsx.Files{Cert: "c", Key: "k", CA: "ca"}, ClientAuthAll
		}, ""},
		{"client auth unknown", func(c *Config) { c.ClientAuth = "some" }, "tls-client-auth"},
		{"public insecure", func(c *Config) { c.HTTP = "10.0.0.1:80"; c.Insecure = true }, ""},
		{"localhost", func(c *Config) { c.HTTP = "localhost:80" }, ""},
		{"ipv6 loopback", func(c *Config) { c.HTTP = "[::1]:80" }, ""},
		{"bad addr", func(c *Config) { c.HTTP = "nope" }, "http"},
		{"streams", func(c *Config) { c.MaxStreams = 0 }, "max-streams"},
		{"resolver without port", func(c *Config) { c.Resolver = "10.0.0.2" }, "resolver"},
		{"resolver", func(c *Config) { c.Resolver = "10.0.0.2:53" }, ""},
		{"ttl", func(c *Config) { c.IdempotencyTTL = 0 }, "idempotency-ttl"},
		{"same tokens", func(c *Config) { c.AdminToken, c.HTTPToken = "t", "t" }, "differ"},
		{"replication as admin", func(c *Config) { c.AdminToken, c.ReplicationToken = "t", "t" }, "replication-token: must differ from admin-token"},
		{"replication as http", func(c *Config) { c.HTTPToken, c.ReplicationToken = "t", "t" }, "replication-token: must differ from http-token"},
		{"three tokens", func(c *Config) { c.AdminToken, c.HTTPToken, c.ReplicationToken = "a", "h", "r" }, ""},
		{"replication alone", func(c *Config) { c.ReplicationToken = "r" }, ""},
		{"body", func(c *Config) { c.MaxBody = 0 }, "max-body"},
		{"body timeout", func(c *Config) { c.BodyTimeout = 0 }, "body-timeout"},
		{"replica wait", func(c *Config) { c.ReplicaWait = 0 }, "replica-wait"},
	}
	for _, tt := range tests {
		c := base()
		tt.mod(&c)
		err := c.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: err %v, want one naming %q", tt.name, err, tt.want)
		}
	}
}
