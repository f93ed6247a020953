package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"--version"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "fenec-node ") {
		t.Fatalf("exit %d: %q %q", code, out.String(), errb.String())
	}
}

func TestBadFlagsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"--no-such-flag"},
		{"--log-format", "xml"},
		{"--log-level", "loud"},
		{"--admin-token-file", "/nonexistent/token"},
		{"stray"},
	} {
		var out bytes.Buffer
		if code := run(context.Background(), args, &out, &out); code != 2 {
			t.Fatalf("%v: exit %d, want 2 (%s)", args, code, out.String())
		}
	}
}

// TestFlagTokensRefusedOffLoopback: off loopback a node refuses a token
// given on the command line, naming the flag that reads it from a file,
// and shows none of them.
func TestFlagTokensRefusedOffLoopback(t *testing.T) {
	dir := t.TempDir()
	file := func(name, tok string) string {
		path := dir + "/" + name
		if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tls := []string{"--tls-cert", file("c.pem", "x"), "--tls-key", file("k.pem", "x")}
	base := append([]string{"--dir", dir + "/t", "--http", "0.0.0.0:0"}, tls...)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--http-token", "data-secret", "--admin-token-file", file("a", "admin-secret")}, "--http-token-file"},
		{[]string{"--http-token-file", file("h", "data-secret"), "--admin-token", "admin-secret"}, "--admin-token-file"},
		{[]string{"--http-token-file", file("h", "data-secret"), "--replication-token", "repl-secret"}, "--replication-token-file"},
	} {
		var out bytes.Buffer
		code := run(context.Background(), append(append([]string{}, base...), tc.args...), &out, &out)
		if code == 0 || !strings.Contains(out.String(), tc.want) {
			t.Fatalf("%v: exit %d, want a refusal naming %s:\n%s", tc.args, code, tc.want, out.String())
		}
		for _, secret := range []string{"data-secret", "admin-secret", "repl-secret"} {
			if strings.Contains(out.String(), secret) {
				t.Fatalf("the refusal shows the token: %s", out.String())
			}
		}
	}
}
