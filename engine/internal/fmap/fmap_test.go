package fmap

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLastReleaseUnmaps(t *testing.T) {
	unmapped := 0
	r := Hold([]byte("bytes"), func([]byte) error { unmapped++; return nil })
	if !r.Acquire() || !r.Acquire() {
		t.Fatal("a live region refused a reference")
	}
	r.Release()
	r.Release()
	if unmapped != 0 || !r.Live() {
		t.Fatal("unmapped with a reference left")
	}
	r.Release()
	if unmapped != 1 || r.Live() {
		t.Fatalf("unmapped %d times after the last release, want 1", unmapped)
	}
	if r.Acquire() {
		t.Fatal("a reference taken on an unmapped region")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a release past the last did not panic")
		}
	}()
	r.Release()
}

func TestMapReadsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("fenec mapped"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := Map(f, 5)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(r.Bytes()); got != "fenec" {
		t.Fatalf("mapped %q, want %q", got, "fenec")
	}
	r.Drop()
	if got := string(r.Bytes()); got != "fenec" {
		t.Fatalf("after Drop %q, want %q", got, "fenec")
	}
	r.Release()
}
