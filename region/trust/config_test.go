package trust

import (
	"errors"
	"strings"
	"testing"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/tlsx"
)

func TestCheckNodeAddr(t *testing.T) {
	for _, tc := range []struct {
		addr     string
		insecure bool
		ok       bool
	}{
		{"http://127.0.0.1:7070", false, true},
		{"127.0.0.1:7070", false, true},
		{"http://localhost:7070", false, true},
		{"https://10.0.0.5:7070", false, true},
		{"http://10.0.0.5:7070", false, false},
		{"10.0.0.5:7070", false, false},
		{"http://n1.internal:7070", false, false},
		{"http://n1.internal:7070", true, true},
	} {
		err := CheckNodeAddr(tc.addr, tc.insecure)
		if (err == nil) != tc.ok {
			t.Errorf("%s insecure=%v: err %v, want ok %v", tc.addr, tc.insecure, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "https://") {
			t.Errorf("%s: refusal %q does not say what to do", tc.addr, err)
		}
	}
}

// loopback is a router on loopback over an embedded member on loopback:
// what CheckExposure lets through.
func loopback() Config {
	c := Config{Listen: "127.0.0.1:7700"}
	c.Etcd.ClientURL, c.Etcd.PeerURL = "http://127.0.0.1:2379", "http://127.0.0.1:2380"
	return c
}

func TestCheckExposure(t *testing.T) {
	files := tlsx.Files{Cert: "c", Key: "k", CA: "ca"}
	for _, tc := range []struct {
		name   string
		change func(*Config)
		names  string // a flag the refusal names; "": let through
	}{
		{"all on loopback", func(*Config) {}, ""},
		{"listener off loopback, no token", func(c *Config) { c.Listen = "10.0.0.1:7700"; c.TLS = files }, "--token-file"},
		{"listener off loopback, token a flag", func(c *Config) { c.Listen, c.Token, c.TLS = "10.0.0.1:7700", "x", files }, "--token-file"},
		{"listener off loopback, no tls", func(c *Config) { c.Listen, c.Token, c.TokenFile = "10.0.0.1:7700", "x", "/f" }, "--tls-cert"},
		{"listener off loopback, token file and tls", func(c *Config) { c.Listen, c.Token, c.TokenFile, c.TLS = "10.0.0.1:7700", "x", "/f", files }, ""},
		{"member's client url in clear", func(c *Config) { c.Etcd.ClientURL = "http://10.0.0.1:2379"; c.KeyFile = "k" }, "--etcd-client-url"},
		{"member's peer url takes any client", func(c *Config) {
			c.Etcd.PeerURL, c.TLS, c.KeyFile = "https://10.0.0.1:2380", tlsx.Files{Cert: "c", Key: "k"}, "k"
		}, "--etcd-ca"},
		{"member off loopback with a key and certificates", func(c *Config) {
			c.Etcd.ClientURL, c.TLS, c.KeyFile = "https://10.0.0.1:2379", files, "k"
		}, ""},
		{"directory in clear", func(c *Config) { c.DirectoryURLs, c.KeyFile = []string{"http://10.0.0.1:2379"}, "k" }, "--directory"},
		{"a given directory's member urls are not looked at", func(c *Config) {
			c.DirectoryGiven, c.Etcd.ClientURL = true, "http://10.0.0.1:2379"
		}, ""},
		{"global in clear", func(c *Config) { c.GlobalURLs, c.KeyFile = []string{"http://10.0.0.1:2379"}, "k" }, "--global"},
		{"directory off loopback without a key", func(c *Config) { c.DirectoryURLs = []string{"https://10.0.0.1:2379"} }, "--directory-key-file"},
		{"insecure lets everything through", func(c *Config) {
			c.Insecure, c.Listen, c.DirectoryURLs = true, "0.0.0.0:7700", []string{"http://10.0.0.1:2379"}
		}, ""},
	} {
		c := loopback()
		tc.change(&c)
		err := c.CheckExposure()
		switch {
		case tc.names == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.names != "" && !errors.Is(err, ErrInsecure):
			t.Errorf("%s: err %v, want ErrInsecure", tc.name, err)
		case tc.names != "" && !strings.Contains(err.Error(), tc.names):
			t.Errorf("%s: refusal %q does not name %s", tc.name, err, tc.names)
		}
	}
}

func TestCheckTLS(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Config
		ok   bool
	}{
		{"none", Config{}, true},
		{"admin with a bundle", Config{TLS: tlsx.Files{Cert: "c", Key: "k", CA: "ca"}, ClientAuth: ClientAuthAdmin}, true},
		{"all without a bundle", Config{TLS: tlsx.Files{Cert: "c", Key: "k"}, ClientAuth: ClientAuthAll}, false},
		{"admin without a certificate", Config{ClientAuth: ClientAuthAdmin}, false},
		{"an unknown value", Config{ClientAuth: "some"}, false},
		{"a key without its certificate", Config{TLS: tlsx.Files{Key: "k"}}, false},
		{"an etcd key without its certificate", Config{Etcd: etcdTLS(tlsx.Files{Key: "k"})}, false},
	} {
		if err := tc.c.CheckTLS(); (err == nil) != tc.ok {
			t.Errorf("%s: err %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

func TestEtcdFiles(t *testing.T) {
	own := tlsx.Files{Cert: "c", Key: "k", CA: "ca"}
	etcd := tlsx.Files{Cert: "ec", Key: "ek", CA: "eca"}
	if got := (Config{TLS: own}).EtcdFiles(); got != own {
		t.Errorf("no --etcd-* files: %+v, want the router's own", got)
	}
	if got := (Config{TLS: own, Etcd: etcdTLS(etcd)}).EtcdFiles(); got != etcd {
		t.Errorf("--etcd-* files: %+v, want them", got)
	}
}

// etcdTLS is a member's configuration naming files of its own.
func etcdTLS(f tlsx.Files) global.EmbedConfig { return global.EmbedConfig{TLS: f} }
