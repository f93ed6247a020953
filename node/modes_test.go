package node

import (
	"os"
	"path/filepath"
	"testing"
)

// TestTenantDirAndFilesPrivate: the tenant directory is made 0700 at
// start whatever its mode was, and every tenant file is its owner's
// alone: a new one, an installed image, and one left 0644 by an older
// node, once opened.
func TestTenantDirAndFilesPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tenants")
	first := startNode(t, func(c *Config) { c.Dir = dir })
	first.mkTenant("old")
	first.q("old", "create collection c (n int)")
	if err := first.s.Close(); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(dir, "old"+fileExt)
	for path, mode := range map[string]os.FileMode{dir: 0o755, old: 0o644} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}

	n := startNode(t, func(c *Config) { c.Dir = dir })
	wantMode(t, dir, 0o700)
	n.q("old", "get c")
	wantMode(t, old, 0o600)
	n.mkTenant("fresh")
	wantMode(t, filepath.Join(dir, "fresh"+fileExt), 0o600)

	img := n.admin("GET", "tenants/old/file", "")
	if img.Status != 200 {
		t.Fatalf("image: %d %s", img.Status, img.Body)
	}
	if r := n.do("PUT", "/_admin/tenants/copied/file", string(img.Body), "Authorization", "Bearer "+adminToken); r.Status != 201 {
		t.Fatalf("install: %d %s", r.Status, r.Body)
	}
	wantMode(t, filepath.Join(dir, "copied"+fileExt), 0o600)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		wantMode(t, filepath.Join(dir, e.Name()), 0o600)
	}
}

// wantMode fails t unless path's permission bits are want.
func wantMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != want {
		t.Errorf("%s: mode %#o, want %#o", path, got, want)
	}
}
