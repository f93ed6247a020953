package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/internal/tlsx"
)

// verifyIssued checks dir/name.pem chains to dir/ca.pem and names host.
func verifyIssued(t *testing.T, dir, name, host string) error {
	t.Helper()
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.pem holds no certificate")
	}
	b, err := os.ReadFile(filepath.Join(dir, name+".pem"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			return err
		}
	}
	return nil
}

func TestCertsMakesACAAndCertificates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	code, out, errOut := cli(context.Background(), "certs", "--out", dir, "router", "n1=n1.internal,10.0.0.5")
	if code != 0 {
		t.Fatalf("certs: %d %s %s", code, out, errOut)
	}
	for _, tc := range []struct{ name, host string }{
		{"router", "router"}, {"router", "127.0.0.1"}, {"n1", "n1"}, {"n1", "n1.internal"}, {"n1", "10.0.0.5"}, {"n1", "localhost"},
	} {
		if err := verifyIssued(t, dir, tc.name, tc.host); err != nil {
			t.Errorf("%s for %s: %v", tc.name, tc.host, err)
		}
	}
	if err := verifyIssued(t, dir, "n1", "n2"); err == nil {
		t.Error("n1's certificate names n2")
	}
	if _, err := global.LoadKeyring(filepath.Join(dir, "directory.key")); err != nil {
		t.Errorf("directory.key: %v", err)
	}
	key, _ := os.ReadFile(filepath.Join(dir, "directory.key"))
	for _, f := range []string{"ca-key.pem", "n1-key.pem", "directory.key"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, err %v; want 0600", f, st.Mode().Perm(), err)
		}
	}
	// A second run issues more under the same CA.
	ca, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	code, out, errOut = cli(context.Background(), "certs", "--out", dir, "--loopback=false", "n2")
	if code != 0 || !strings.Contains(out, "reused") {
		t.Fatalf("second run: %d %s %s", code, out, errOut)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "ca.pem")); string(again) != string(ca) {
		t.Fatal("the second run replaced the CA")
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "directory.key")); string(again) != string(key) {
		t.Fatal("the second run replaced the routers' key")
	}
	if err := verifyIssued(t, dir, "n2", "n2"); err != nil {
		t.Fatal(err)
	}
	if err := verifyIssued(t, dir, "n2", "127.0.0.1"); err == nil {
		t.Fatal("--loopback=false still named 127.0.0.1")
	}
	if code, _, _ := cli(context.Background(), "certs", "--out", dir); code != 2 {
		t.Fatalf("no name: exit %d, want 2", code)
	}
	if code, _, _ := cli(context.Background(), "certs", "--out", dir, "Bad Name"); code != 2 {
		t.Fatalf("a bad name: exit %d, want 2", code)
	}
}

// TestCertsDirectoryCAKeepsOthersOut: `fenec certs --etcd` issues the
// routers' directory certificates from a CA of their own. An etcd member
// serving its client and peer ports with them (https, that CA's bundle)
// completes no handshake with a certificate of the first CA — a node's,
// Prometheus's — so such a key cannot reach the directory's etcd nor
// join its raft group; the router's directory certificate, with the
// password certs made, reads and writes it.
func TestCertsDirectoryCAKeepsOthersOut(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	for _, args := range [][]string{
		{"certs", "--out", dir, "router", "n1", "prometheus"},
		{"certs", "--out", dir, "--etcd", "router"},
	} {
		if code, out, errOut := cli(context.Background(), args...); code != 0 {
			t.Fatalf("%v: %d %s %s", args, code, out, errOut)
		}
	}
	if err := verifyIssued(t, dir, "router-etcd", "127.0.0.1"); err == nil {
		t.Fatal("the directory certificate chains to the first CA")
	}
	for _, f := range []string{"etcd-ca-key.pem", "router-etcd-key.pem", "directory.password"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v, want 0600", f, st, err)
		}
	}
	files := func(name, ca string) tlsx.Files {
		return tlsx.Files{Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+"-key.pem"), CA: filepath.Join(dir, ca+".pem")}
	}
	routerEtcd := files("router-etcd", "etcd-ca")

	cfg := global.DefaultEmbedConfig(t.TempDir())
	cfg.ClientURL, cfg.PeerURL, cfg.TLS = "https://127.0.0.1:0", "https://127.0.0.1:0", routerEtcd
	m, err := global.StartEmbedded(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := m.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	pw, err := global.LoadPassword(filepath.Join(dir, "directory.password"))
	if err != nil {
		t.Fatal(err)
	}
	router := testkit.Source(t, routerEtcd)
	d, err := m.Open(ctx, "", global.WithTLS(router.Etcd()))
	if err != nil {
		t.Fatalf("the router's directory certificate: %v", err)
	}
	if err := d.EnableAuth(ctx, pw); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if d, err = m.Open(ctx, "", global.WithTLS(router.Etcd()), global.WithPassword(pw)); err != nil {
		t.Fatalf("the router's certificate and the password: %v", err)
	}
	defer d.Close()
	if _, err := d.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}

	ports := map[string]string{"client": m.ClientURLs()[0], "peer": m.PeerURL()}
	for _, name := range []string{"n1", "prometheus"} {
		// It trusts the directory's CA; the directory does not trust it.
		mainCA := testkit.Source(t, tlsx.Files{Cert: files(name, "ca").Cert, Key: files(name, "ca").Key, CA: routerEtcd.CA})
		for port, u := range ports {
			if err := handshake(u, mainCA.Etcd()); err == nil {
				t.Fatalf("%s's certificate of the first CA completed a handshake on the directory's %s port", name, port)
			}
		}
		if got := testkit.EtcdStranger(t, m.ClientURLs(), mainCA.Etcd()); len(got) > 0 {
			t.Fatalf("%s's certificate reached the directory:\n%s", name, strings.Join(got, "\n"))
		}
	}
	for port, u := range ports {
		if err := handshake(u, router.Etcd()); err != nil {
			t.Fatalf("the router's directory certificate on the %s port: %v", port, err)
		}
	}
}

// handshake shakes hands with the https URL u showing cfg's certificate
// and reads once: a server that refuses the certificate says so then
// (under TLS 1.3, after the client's side of the handshake); one that
// takes it waits for the client, and the read times out.
func handshake(u string, cfg *tls.Config) error {
	host := strings.TrimPrefix(u, "https://")
	cfg = cfg.Clone()
	cfg.ServerName = "127.0.0.1"
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", host, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	_, err = c.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return nil
	}
	return err
}
