package engine

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// zeros is an endless stream of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// A stream of zeros, text, or a file cut inside its first frame is
// refused having read no more than a header and a frame; an image's head
// says its seq and lineage, and the reader it returns gives the image
// whole, byte for byte.
func TestReadImageHead(t *testing.T) {
	for name, src := range map[string]io.Reader{
		"zeros": zeros{},
		"text":  strings.NewReader(strings.Repeat("not an image at all ", 1<<16)),
		"empty": strings.NewReader(""),
	} {
		cr := &countingReader{r: src}
		_, _, err := ReadImageHead(cr)
		if !errors.Is(err, ErrBadImage) {
			t.Fatalf("%s: %v", name, err)
		}
		if name != "empty" && !strings.Contains(err.Error(), "not a fenec tenant file") {
			t.Fatalf("%s: %v", name, err)
		}
		if cr.n > 64 {
			t.Fatalf("%s: read %d bytes before refusing", name, cr.n)
		}
	}
	db, _ := newTestDB(t, Options{})
	mustExec(t, db, "create collection c (a int)")
	mustExec(t, db, "put c {a: 1}")
	h, err := db.Fork()
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, "put c {a: 2}")
	var img bytes.Buffer
	if _, err := db.WriteImage(&img); err != nil {
		t.Fatal(err)
	}
	rest, head, err := ReadImageHead(bytes.NewReader(img.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if head.Seq != db.Seq() || len(head.Lineage) != 2 || head.Lineage[1].History != h || head.LineageID() != db.Lineage()[0].History {
		t.Fatalf("head %+v, file at %d with %+v", head, db.Seq(), db.Lineage())
	}
	again, err := io.ReadAll(rest)
	if err != nil || !bytes.Equal(again, img.Bytes()) {
		t.Fatalf("the image read again: %d bytes of %d, %v", len(again), img.Len(), err)
	}
	if _, _, err := ReadImageHead(bytes.NewReader(img.Bytes()[:40])); !errors.Is(err, ErrBadImage) {
		t.Fatalf("cut inside its first frame: %v", err)
	}
	bad := bytes.Clone(img.Bytes())
	bad[30] ^= 0xff
	if _, _, err := ReadImageHead(bytes.NewReader(bad)); !errors.Is(err, ErrBadImage) {
		t.Fatalf("a byte of the first frame flipped: %v", err)
	}
}

// A restart of an image at seq 3 in place of a file that went to seq 9
// and gave ids up to 40: the new file is at seq 10, holds the image's
// rows, the image's history up to 3 and a new one from there; a change
// cursor of the old file is older than what it keeps, the old history's
// writes past 3 are on no history it holds, and new ids start past 40.
func TestWriteRestart(t *testing.T) {
	img, _ := newTestDB(t, Options{})
	mustExec(t, img, "create collection c (a int)")
	mustExec(t, img, "put c [{a: 1}, {a: 2}]")
	mustExec(t, img, "put c {a: 3}")
	first := img.History()
	pos := img.Seq()
	floor := Marks{Seq: 9, IDs: map[string]int64{"c": 40, "dropped": 7}}
	path := filepath.Join(t.TempDir(), "restored.fenec")
	got, err := img.WriteRestart(path, floor)
	if err != nil {
		t.Fatal(err)
	}
	if got.Seq != 10 || len(got.Lineage) != 2 || got.Lineage[1] != (LineageEntry{History: got.History, From: pos}) || got.History == first {
		t.Fatalf("restarted %+v (image at %d)", got, pos)
	}
	if _, err := img.WriteRestart(path, floor); err == nil {
		t.Fatal("a restart written over a file that exists")
	}
	db, err := Open(path, Options{Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Seq() != 10 || db.History() != got.History {
		t.Fatalf("opened at %d in %d", db.Seq(), db.History())
	}
	if !jsonEq(t, mustExec(t, db, "get c select a order id"), `[{"a":1},{"a":2},{"a":3}]`) {
		t.Fatalf("rows: %s", mustExec(t, db, "get c select a order id"))
	}
	if !db.Holds(first, pos) || db.Holds(first, pos+1) || db.Holds(first, 9) {
		t.Fatal("the image's history is held past where the image ends")
	}
	for _, since := range []uint64{pos, 5, 9} {
		if _, err := db.ChangesSince(since, 10); !errors.Is(err, ErrCursorGone) {
			t.Fatalf("a cursor at %d of the old file: %v", since, err)
		}
	}
	if chs, err := db.ChangesSince(10, 10); err != nil || len(chs) != 0 {
		t.Fatalf("a cursor at the restart: %v %v", chs, err)
	}
	mustExec(t, db, "put c {a: 4}")
	if got := mustExec(t, db, "get c select id where a = 4"); !jsonEq(t, got, `[{"id":41}]`) {
		t.Fatalf("a put after the restart: %s", got)
	}
	mustExec(t, db, "create collection dropped (a int)")
	mustExec(t, db, "put dropped {a: 1}")
	if got := mustExec(t, db, "get dropped select id"); !jsonEq(t, got, `[{"id":8}]`) {
		t.Fatalf("a collection the old file had dropped gives %s", got)
	}
	if chs, err := db.ChangesSince(10, 10); err != nil || len(chs) != 3 || chs[0].Seq != 11 {
		t.Fatalf("changes after the restart: %+v %v", chs, err)
	}
	// An image ahead of the floor keeps its seq, one on.
	ahead, err := img.WriteRestart(filepath.Join(t.TempDir(), "ahead.fenec"), Marks{Seq: 1})
	if err != nil || ahead.Seq != pos+1 {
		t.Fatalf("restart past a lower floor: %+v %v", ahead, err)
	}
	if m := db.Marks(); m.Seq != 13 || m.IDs["c"] != 41 || !m.Covers(Marks{Seq: 13, IDs: map[string]int64{"c": 41}}) || m.Covers(Marks{Seq: 14}) || m.Covers(Marks{IDs: map[string]int64{"c": 42}}) {
		t.Fatalf("marks %+v", m)
	}
}
