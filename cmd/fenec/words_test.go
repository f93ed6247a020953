package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCounted(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{counted(0, "tenant"), "0 tenants"},
		{counted(1, "tenant"), "1 tenant"},
		{counted(2, "row"), "2 rows"},
		{counted(1, "tenant was", "tenants were"), "1 tenant was"},
		{counted(3, "tenant was", "tenants were"), "3 tenants were"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// TestConfirm: a question is asked only of someone who can answer it, and
// only yes is yes.
func TestConfirm(t *testing.T) {
	for _, tc := range []struct {
		interactive bool
		answer      string
		want        bool
	}{
		{true, "y\n", true}, {true, "YES\n", true}, {true, "n\n", false}, {true, "\n", false}, {true, "", false},
		{true, "yes please\n", false}, {false, "y\n", false},
	} {
		var errb strings.Builder
		e := &env{stderr: &errb, stdin: strings.NewReader(tc.answer), interactive: tc.interactive}
		if got := e.confirm("go on? "); got != tc.want {
			t.Errorf("interactive %v, answer %q: %v, want %v", tc.interactive, tc.answer, got, tc.want)
		}
		if asked := errb.String() == "go on? "; asked != tc.interactive {
			t.Errorf("interactive %v: asked %q", tc.interactive, errb.String())
		}
	}
}

// TestCLISetup: fenec dev tells a shell where this fenec is when PATH
// does not find it.
func TestCLISetup(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no fenec there
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe, _ = filepath.EvalSymlinks(exe)
	got := cliSetup("http://127.0.0.1:7700")
	if !strings.HasPrefix(got, `export PATH="`+filepath.Dir(exe)+`:$PATH" FENEC_ROUTER=http://127.0.0.1:7700; fenec nodes`) ||
		!strings.Contains(got, "make install") {
		t.Fatalf("got %q", got)
	}
	// Found on PATH as itself: no PATH to set.
	dir := t.TempDir()
	if err := os.Symlink(exe, filepath.Join(dir, "fenec")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	if got := cliSetup("http://h:1"); got != "export FENEC_ROUTER=http://h:1; fenec nodes" {
		t.Fatalf("on PATH: got %q", got)
	}
}

func TestOrderKey(t *testing.T) {
	for _, tc := range []struct {
		in   string
		name string
		desc bool
	}{
		{"total", "total", false}, {"total.desc", "total", true}, {"total.asc", "total", false},
		{"total:desc", "total", true}, {"total:asc", "total", false}, {"meta.k.desc", "meta.k", true}, {"meta.k", "meta.k", false},
	} {
		name, desc, err := orderKey(tc.in)
		if err != nil || name != tc.name || desc != tc.desc {
			t.Errorf("%q: %q %v %v", tc.in, name, desc, err)
		}
	}
	if _, _, err := orderKey("total:down"); err == nil {
		t.Error("total:down taken")
	}
}

// TestFailoverHint: --force is suggested only where it can help.
func TestFailoverHint(t *testing.T) {
	noCopy := []failedEntry{{Tenant: "a", Why: "a: no replica to promote"}}
	if h := failoverHint(noCopy, false); strings.Contains(h, "--force") || !strings.Contains(h, "no copy to promote") {
		t.Errorf("no replica: %q", h)
	}
	behind := []failedEntry{{Tenant: "b", Why: "b: replica behind from seq 9"}}
	if h := failoverHint(behind, false); !strings.Contains(h, "--force") {
		t.Errorf("behind: %q", h)
	}
	if h := failoverHint(behind, true); strings.Contains(h, "--force") {
		t.Errorf("behind, forced already: %q", h)
	}
}

func TestLeasedBy(t *testing.T) {
	// Asked of a router of the global directory (fenec dev's, the global
	// tier's), and of eu's own router, which mirrors eu.
	global := []map[string]any{{"name": "eu", "leaser": "region"}, {"name": "us", "leaser": "global"}}
	eu := []map[string]any{{"name": "eu", "leaser": "global", "mirrored": true}, {"name": "us", "leaser": "global"}}
	if !inGlobalDirectory(global) || inGlobalDirectory(eu) {
		t.Fatal("inGlobalDirectory")
	}
	if got := leasedBy(global[1], true); got != "this-directory" {
		t.Errorf("global, asked of its own router: %q", got)
	}
	if got := leasedBy(global[0], true); got != "region" {
		t.Errorf("region: %q", got)
	}
	if got := leasedBy(eu[0], false); got != "global-tier" {
		t.Errorf("global, asked of a region's router: %q", got)
	}
	if got := leasedBy(map[string]any{"leaser": ""}, false); got != "handoff-given" {
		t.Errorf("given: %q", got)
	}
}
