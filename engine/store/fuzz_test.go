package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzReplay opens files made of a valid header and arbitrary bytes: Open
// must never panic or hang; it opens (cutting a tail, leaving a file that
// opens again whole) or refuses with an error.
func FuzzReplay(f *testing.F) {
	dir := f.TempDir()
	seed := filepath.Join(dir, "seed.fenec")
	l, err := Create(seed, Options{Sync: SyncOff, Logger: quietLogger(), imageChunk: 16})
	if err != nil {
		f.Fatal(err)
	}
	appendN(f, l, 3, 2, 20)
	if _, err := l.Fork(); err != nil {
		f.Fatal(err)
	}
	if err := l.Checkpoint(stateWriter(bytes.Repeat([]byte("img"), 20))); err != nil {
		f.Fatal(err)
	}
	appendN(f, l, 2, 1, 5)
	spillBlock(f, l, 2, []byte("end"), pieces(2, 7)...)
	l.Spill([]byte("refused"))
	if err := l.DropSpills(); err != nil {
		f.Fatal(err)
	}
	l.Spill([]byte("never landed"))
	if err := l.Close(); err != nil {
		f.Fatal(err)
	}
	data, err := os.ReadFile(seed)
	if err != nil {
		f.Fatal(err)
	}
	frames := data[headerSize:]
	f.Add(frames)
	f.Add(frames[:len(frames)-3])
	f.Add(frames[:len(frames)/2])
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 16, 1, 0})
	f.Add(append(bytes.Clone(frames), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))

	f.Fuzz(func(t *testing.T, tail []byte) {
		path := filepath.Join(t.TempDir(), "f.fenec")
		b := append(encodeHeader(0), tail...)
		writeFile(t, path, b)
		opts := Options{Sync: SyncOff, Logger: quietLogger()}
		c := &collected{}
		l, err := Open(path, opts, c)
		if err != nil {
			var de *DamagedError
			if !errors.As(err, &de) {
				t.Fatalf("open refused without naming damage: %v", err)
			}
			return
		}
		seq := l.Seq()
		if _, err := l.Append(KindEngine, 1, []byte("x")); err != nil {
			t.Fatalf("append after open: %v", err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		c2 := &collected{}
		l2, err := Open(path, opts, c2)
		if err != nil {
			t.Fatalf("reopen after a successful open: %v", err)
		}
		defer l2.Close()
		if l2.Seq() != seq+1 || len(c2.recs) != len(c.recs)+1 {
			t.Fatalf("reopen: seq %d (want %d), %d records (want %d)", l2.Seq(), seq+1, len(c2.recs), len(c.recs)+1)
		}
	})
}
