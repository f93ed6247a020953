package main

import (
	"bytes"
	"context"
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
