package global

import (
	"context"
	"crypto/tls"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/internal/tlsx"
)

// tlsMember starts a member whose client and peer ports are https with
// files, and waits for it.
func tlsMember(t *testing.T, name string, files tlsx.Files, peers map[string]string, peerURL string) *Embedded {
	t.Helper()
	cfg := DefaultEmbedConfig(t.TempDir())
	cfg.Name = name
	cfg.ClientURL = "https://127.0.0.1:0"
	cfg.PeerURL = peerURL
	if peers != nil {
		cfg.InitialCluster = InitialCluster(peers)
	}
	cfg.TLS = files
	return startMember(t, cfg)
}

// openTLS opens the member's directory as a client showing files'
// certificate, within a short bound (a refused client never answers).
func openTLS(t *testing.T, m *Embedded, files tlsx.Files) (*EtcdDirectory, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return m.Open(ctx, "/tls/", WithTLS(testkit.Source(t, files).Etcd()))
}

func TestEmbeddedMemberOverTLS(t *testing.T) {
	p, other := testkit.NewPKI(t, "ca"), testkit.NewPKI(t, "other")
	m := tlsMember(t, "m1", p.Issue("m1"), nil, "https://127.0.0.1:0")
	waitReady(t, m)
	if !strings.HasPrefix(m.ClientURLs()[0], "https://") {
		t.Fatalf("client url %s", m.ClientURLs()[0])
	}
	d, err := openTLS(t, m, p.Issue("router"))
	if err != nil {
		t.Fatalf("a client of the member's CA: %v", err)
	}
	defer d.Close()
	if _, err := d.Put(testCtx(t), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}

	// No client certificate, or one of another CA: refused.
	if d, err := openTLS(t, m, tlsx.Files{CA: p.Bundle()}); err == nil {
		d.Close()
		t.Fatal("a client with no certificate read the directory")
	}
	stranger := other.Issue("router")
	stranger.CA = p.Bundle()
	if d, err := openTLS(t, m, stranger); err == nil {
		d.Close()
		t.Fatal("a client certificate of another CA read the directory")
	}
	// A client that does not trust the member's CA refuses it.
	if d, err := openTLS(t, m, other.Issue("router2")); err == nil {
		d.Close()
		t.Fatal("a client trusting another CA read the directory")
	}
}

func TestEmbeddedMemberReloadsItsCertificate(t *testing.T) {
	p := testkit.NewPKI(t, "ca")
	files := p.Issue("m1")
	m := tlsMember(t, "m1", files, nil, "http://127.0.0.1:0")
	waitReady(t, m)
	u, err := url.Parse(m.ClientURLs()[0])
	if err != nil {
		t.Fatal(err)
	}
	serial := func() string {
		c, err := tls.Dial("tcp", u.Host, testkit.Source(t, p.Issue("probe")).Client(u.Host))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := serial()
	next := p.Reissue(files, "m1")
	if got := serial(); got != next.Cert.SerialNumber.String() || got == before {
		t.Fatalf("after a rotation the member served serial %s, want %s (was %s)", got, next.Cert.SerialNumber, before)
	}
}

func TestEmbeddedPeersOverTLS(t *testing.T) {
	p := testkit.NewPKI(t, "ca")
	peers := map[string]string{}
	for _, name := range []string{"a", "b"} {
		u, err := FreeLocalURL()
		if err != nil {
			t.Fatal(err)
		}
		peers[name] = strings.Replace(u, "http://", "https://", 1)
	}
	a := tlsMember(t, "a", p.Issue("a"), peers, peers["a"])
	b := tlsMember(t, "b", p.Issue("b"), peers, peers["b"])
	waitReady(t, a, b)
	da, err := openTLS(t, a, p.Issue("router"))
	if err != nil {
		t.Fatal(err)
	}
	defer da.Close()
	db, err := openTLS(t, b, p.Issue("router"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := da.Put(testCtx(t), "k", []byte("over tls peers")); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, testTimeout, func() error {
		kv, err := db.Get(testCtx(t), "k")
		if err != nil {
			return err
		}
		if string(kv.Value) != "over tls peers" {
			return ErrNotFound
		}
		return nil
	})
}

func TestEmbeddedHTTPSNeedsFiles(t *testing.T) {
	cfg := DefaultEmbedConfig(t.TempDir())
	cfg.ClientURL = "https://127.0.0.1:0"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--etcd-cert") {
		t.Fatalf("an https member with no certificate: %v", err)
	}
}

// The member's client and peer ports, under TLS 1.2, take only the AEAD
// suites fenec's own listeners take: a client offering only a CBC suite
// (SHA-1 or SHA-256) completes no handshake; one offering an AEAD suite
// does.
func TestEmbeddedMemberRefusesCBCSuites(t *testing.T) {
	p := testkit.NewPKI(t, "ca")
	m := tlsMember(t, "m1", p.Issue("m1"), nil, "https://127.0.0.1:0")
	waitReady(t, m)
	client := testkit.Source(t, p.Issue("router")).Etcd()
	for _, port := range []string{m.ClientURLs()[0], m.PeerURL()} {
		u, err := url.Parse(port)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			suite uint16
			fail  bool
		}{
			{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, true},
			{tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA, true},
			{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256, true},
			{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, false},
			{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, false},
		} {
			cfg := client.Clone()
			cfg.ServerName = "127.0.0.1"
			cfg.MaxVersion, cfg.CipherSuites = tls.VersionTLS12, []uint16{tc.suite}
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", u.Host, cfg)
			if err == nil {
				c.Close()
			}
			if (err != nil) != tc.fail {
				t.Errorf("%s, suite %s: handshake err %v, want failure %v", port, tls.CipherSuiteName(tc.suite), err, tc.fail)
			}
		}
	}
}
