package fmap

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
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

// A mapping holds no flock taken on the file it was made from: once that
// file is closed, another may lock the file while the mapping lives on
// (a tenant opens again while a read of it still encodes its rows).
func TestMappingHoldsNoLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("fenec locked"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	r, err := Map(f, 12)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	g, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := unix.Flock(int(g.Fd()), unix.LOCK_EX|unix.LOCK_NB); err == nil {
		t.Fatal("a second lock taken while the first is held")
	}
	f.Close()
	if err := unix.Flock(int(g.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatalf("the file is locked still with only a mapping of it left: %v", err)
	}
	if got := string(r.Bytes()); got != "fenec locked" {
		t.Fatalf("mapped %q after the file closed", got)
	}
}
