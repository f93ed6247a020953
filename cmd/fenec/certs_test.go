package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fenec-go/fenec/global"
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
