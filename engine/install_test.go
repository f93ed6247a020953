package engine

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/fenec-go/fenec/engine/store"
)

// An image installed with InstallOpen answers as its source, is the file
// at its path (it checkpoints, compacts and reopens there, and no second
// opener takes it while open), and a damaged or cut image is refused with
// nothing left behind.
func TestInstallOpen(t *testing.T) {
	src, _ := newTestDB(t, Options{NoSweep: true})
	populate(t, src, 300)
	want := answers(t, src)
	var img bytes.Buffer
	if _, err := src.WriteImage(&img); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	dst := filepath.Join(dir, "moved.fenec")
	db, err := InstallOpen(dst, bytes.NewReader(img.Bytes()), Options{NoSweep: true, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	sameAnswers(t, "installed and open", answers(t, db), want)
	if db.Seq() != src.Seq() || db.History() != src.History() || db.Rows() != src.Rows() {
		t.Fatalf("installed seq/history/rows %d/%d/%d, want %d/%d/%d", db.Seq(), db.History(), db.Rows(), src.Seq(), src.History(), src.Rows())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 || ents[0].Name() != "moved.fenec" {
		t.Fatalf("files after install: %v", ents)
	}
	if _, err := Open(dst, Options{NoSweep: true, Logger: discardLogger()}); !errors.Is(err, store.ErrLocked) {
		t.Fatalf("a second open of the installed file: %v, want ErrLocked", err)
	}
	mustExec(t, db, "put docs {u: 'after'}")
	want = answers(t, db)
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if err := db.Compact(); err != nil {
		t.Fatal(err)
	}
	db = reopen(t, db, dst)
	defer db.Close()
	sameAnswers(t, "installed, written, compacted and reopened", answers(t, db), want)
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("files after a compaction of the installed file: %v", ents)
	}

	if _, err := InstallOpen(dst, bytes.NewReader(img.Bytes()), Options{NoSweep: true}); !errors.Is(err, ErrExist) {
		t.Fatalf("install over an existing file: %v", err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 30 {
		p := filepath.Join(t.TempDir(), "bad.fenec")
		b := bytes.Clone(img.Bytes())
		cut := rng.IntN(len(b))
		if rng.IntN(2) == 0 {
			b = b[:cut] // cut short
		} else {
			b[cut] ^= 0x5a // one byte flipped: a checksum catches it
		}
		if got, err := InstallOpen(p, bytes.NewReader(b), Options{NoSweep: true, Logger: discardLogger()}); err == nil {
			got.Close()
			t.Fatalf("a damaged image (byte %d of %d) was installed", cut, len(img.Bytes()))
		} else if !errors.Is(err, ErrBadImage) {
			t.Fatalf("damaged at %d: %v, want ErrBadImage", cut, err)
		}
		if ents, _ := os.ReadDir(filepath.Dir(p)); len(ents) != 0 {
			t.Fatalf("a damaged image left %d files", len(ents))
		}
		// The name is free again.
		ok, err := InstallOpen(p, bytes.NewReader(img.Bytes()), Options{NoSweep: true, Logger: discardLogger()})
		if err != nil {
			t.Fatalf("install after a refused one: %v", err)
		}
		ok.Close()
	}
}
