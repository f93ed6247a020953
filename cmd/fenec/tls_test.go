package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/node"
)

// TestCommandsOverTLS: the CLI reaches a node served over TLS with
// --tls-ca, shows --tls-cert where the node asks for one (admin calls
// under --tls-client-auth admin), and says what is wrong without them.
func TestCommandsOverTLS(t *testing.T) {
	ctx := context.Background()
	p := testkit.NewPKI(t, "ca")
	cfg := node.DefaultConfig()
	cfg.Dir, cfg.HTTP, cfg.AdminToken = t.TempDir(), "127.0.0.1:0", testAdminToken
	cfg.TLS, cfg.ClientAuth, cfg.Logger = p.Issue("n1"), node.ClientAuthAdmin, testkit.Logger()
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	base := "https://" + n.Addr()

	if code, out, errOut := cli(ctx, "health", base, "--tls-ca", p.Bundle()); code != 0 {
		t.Fatalf("health over tls: %d %s %s", code, out, errOut)
	}
	if code, _, errOut := cli(ctx, "health", base); code != 1 || !strings.Contains(errOut, "certificate") {
		t.Fatalf("health over tls, the CA not given: %d %s", code, errOut)
	}
	op := p.Issue("operator")
	dir := filepath.Join(t.TempDir(), "backup")
	code, out, errOut := cli(ctx, "backup", base, "--tenants", dir, "--token", testAdminToken,
		"--tls-ca", op.CA, "--tls-cert", op.Cert, "--tls-key", op.Key)
	if code != 0 {
		t.Fatalf("backup over mutual tls: %d %s %s", code, out, errOut)
	}
	code, _, errOut = cli(ctx, "backup", base, "--tenants", dir, "--token", testAdminToken, "--tls-ca", op.CA)
	if code != 1 || !strings.Contains(errOut, "client certificate") {
		t.Fatalf("backup with no client certificate: %d %s", code, errOut)
	}
}
