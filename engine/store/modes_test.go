package store

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSideFilesPrivate: a side file (a new tenant file's .tmp, an
// image's .install) is made 0600, and one a crash left 0644 is made 0600
// as it is taken again.
func TestSideFilesPrivate(t *testing.T) {
	dir := t.TempDir()
	for name, before := range map[string]os.FileMode{"new.fenec.install": 0, "left.fenec.install": 0o644} {
		path := filepath.Join(dir, name)
		if before != 0 {
			if err := os.WriteFile(path, []byte("left by a crash"), before); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, before); err != nil {
				t.Fatal(err)
			}
		}
		f, err := openSide(path)
		if err != nil {
			t.Fatal(err)
		}
		st, err := f.Stat()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != 0o600 {
			t.Errorf("%s: mode %#o, want 0600", name, got)
		}
	}
}
