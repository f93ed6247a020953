package store

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"
)

// readAll collects ReadFrom(since).
func readAll(t testing.TB, l *Log, since uint64) ([]Record, error) {
	t.Helper()
	var out []Record
	err := l.ReadFrom(since, func(r Record) error {
		out = append(out, r)
		return nil
	})
	return out, err
}

func engineOnly(recs []Record) []Record {
	var out []Record
	for _, r := range recs {
		if r.Kind >= KindEngine {
			out = append(out, r)
		}
	}
	return out
}

func TestCheckpointKeepsSeqLineageAndRecentCursors(t *testing.T) {
	path := tenantPath(t)
	opts := testOptions()
	opts.RetainBytes = 1000
	opts.indexEvery = 1
	opts.imageChunk = 64
	l := mustCreate(t, path, opts)
	recs := appendN(t, l, 20, 2, 80) // seq 40, ~100 bytes each
	if _, err := l.Fork(); err != nil {
		t.Fatal(err)
	}
	recs = append(recs, appendN(t, l, 5, 1, 80)...) // seq 45
	lineage, seq, size := l.Lineage(), l.Seq(), l.Size()
	state := bytes.Repeat([]byte("state-one."), 100)

	if err := l.Checkpoint(stateWriter(state)); err != nil {
		t.Fatal(err)
	}
	if l.Seq() != seq || len(l.Lineage()) != 2 || l.Lineage()[1] != lineage[1] {
		t.Fatalf("after checkpoint: seq %d lineage %v", l.Seq(), l.Lineage())
	}
	if got := fileSize(t, path); got != l.Size() || got >= size+int64(len(state)) {
		t.Fatalf("file %d bytes, counted %d, was %d", got, l.Size(), size)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("side file left: %v", err)
	}
	// Recent cursors still read; old ones are gone.
	got, err := readAll(t, l, 40)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, engineOnly(got), recs[20:])
	if _, err := readAll(t, l, 0); !errors.Is(err, ErrCursorGone) {
		t.Fatalf("cursor 0 after checkpoint: %v", err)
	}
	kept, err := readAll(t, l, l.base)
	if err != nil || len(kept) < 5 || kept[0].First != l.base+1 {
		t.Fatalf("first kept cursor %d: %d records, %v", l.base, len(kept), err)
	}

	// Appends go on in the new file; a reopen starts from the image.
	after := appendN(t, l, 2, 1, 10)
	mustClose(t, l)
	l2, c := mustOpen(t, path, opts)
	if !c.hadImage || c.imageSeq != seq || !bytes.Equal(c.image, state) {
		t.Fatalf("image: had %v seq %d state %d bytes", c.hadImage, c.imageSeq, len(c.image))
	}
	sameRecords(t, c.recs, after)
	if l2.Seq() != seq+2 || len(l2.Lineage()) != 2 || l2.Lineage()[1] != lineage[1] {
		t.Fatalf("reopened: seq %d lineage %v", l2.Seq(), l2.Lineage())
	}
	got, err = readAll(t, l2, 44)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, engineOnly(got), append(recs[24:], after...))

	// A second checkpoint keeps records from both sides of the first image.
	state2 := []byte("state two")
	if err := l2.Checkpoint(stateWriter(state2)); err != nil {
		t.Fatal(err)
	}
	got, err = readAll(t, l2, 44)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, engineOnly(got), append(recs[24:], after...))

	// Compact keeps none.
	if err := l2.Compact(stateWriter(state2)); err != nil {
		t.Fatal(err)
	}
	if _, err := readAll(t, l2, l2.Seq()-1); !errors.Is(err, ErrCursorGone) {
		t.Fatalf("cursor after compact: %v", err)
	}
	if got, err := readAll(t, l2, l2.Seq()); err != nil || len(got) != 0 {
		t.Fatalf("cursor at seq after compact: %d records, %v", len(got), err)
	}
	seq2 := l2.Seq()
	mustClose(t, l2)
	l3, c3 := mustOpen(t, path, opts)
	if !bytes.Equal(c3.image, state2) || len(c3.recs) != 0 || l3.Seq() != seq2 || len(l3.Lineage()) != 2 {
		t.Fatalf("after compact: image %q, %d records, seq %d", c3.image, len(c3.recs), l3.Seq())
	}
}

func TestFailedCheckpointLeavesFileAlone(t *testing.T) {
	path := tenantPath(t)
	l := mustCreate(t, path, testOptions())
	recs := appendN(t, l, 10, 1, 50)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("engine could not write its state")
	err = l.Checkpoint(func(w io.Writer) error {
		w.Write(bytes.Repeat([]byte("x"), 3<<20)) // some frames written first
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("checkpoint: %v", err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatal("a failed checkpoint changed the file")
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("side file left: %v", err)
	}
	recs = append(recs, appendN(t, l, 1, 1, 5)...)
	mustClose(t, l)
	_, c := mustOpen(t, path, testOptions())
	sameRecords(t, c.recs, recs)
}

func TestLeftoverSideFilesRemovedOnOpen(t *testing.T) {
	path := tenantPath(t)
	mustClose(t, mustCreate(t, path, testOptions()))
	for _, side := range []string{path + ".tmp", path + ".install"} {
		writeFile(t, side, []byte("half a checkpoint"))
	}
	l, _ := mustOpen(t, path, testOptions())
	for _, side := range []string{path + ".tmp", path + ".install"} {
		if _, err := os.Stat(side); !os.IsNotExist(err) {
			t.Fatalf("%s left: %v", side, err)
		}
	}
	mustClose(t, l)
}

func TestWriteImageAndInstall(t *testing.T) {
	src := tenantPath(t)
	opts := testOptions()
	opts.imageChunk = 100
	l := mustCreate(t, src, opts)
	appendN(t, l, 7, 3, 30)
	if _, err := l.Fork(); err != nil {
		t.Fatal(err)
	}
	state := bytes.Repeat([]byte("0123456789"), 257)
	var img bytes.Buffer
	n, err := l.WriteImage(&img, stateWriter(state))
	if err != nil || n != int64(img.Len()) {
		t.Fatalf("write image: %d bytes (buffer %d), %v", n, img.Len(), err)
	}
	dir := t.TempDir()
	dst := dir + "/copy.fenec"
	verified := false
	got, err := Install(dst, bytes.NewReader(img.Bytes()), func(tmp string) error {
		v, c := mustOpen(t, tmp, testOptions())
		defer v.Close()
		if !bytes.Equal(c.image, state) || v.Seq() != l.Seq() {
			return errors.New("side file does not replay to the source")
		}
		verified = true
		return v.Close()
	})
	if err != nil || got != n || !verified {
		t.Fatalf("install: %d bytes, verified %v, %v", got, verified, err)
	}
	c, c2 := mustOpen(t, dst, testOptions())
	if !bytes.Equal(c2.image, state) || c.Seq() != l.Seq() || c.History() != l.History() || len(c.Lineage()) != 2 {
		t.Fatalf("installed copy: seq %d lineage %v", c.Seq(), c.Lineage())
	}
	if _, err := Install(dst, bytes.NewReader(img.Bytes()), nil); !errors.Is(err, ErrExist) {
		t.Fatalf("install over a tenant: %v", err)
	}
	if _, err := os.Stat(dst + ".install"); !os.IsNotExist(err) {
		t.Fatalf("side file left: %v", err)
	}
}

func TestInstallRefusesCutShortImage(t *testing.T) {
	l := mustCreate(t, tenantPath(t), Options{Sync: SyncOff, Logger: quietLogger(), imageChunk: 50})
	appendN(t, l, 3, 1, 10)
	var img bytes.Buffer
	if _, err := l.WriteImage(&img, stateWriter(bytes.Repeat([]byte("s"), 400))); err != nil {
		t.Fatal(err)
	}
	data := img.Bytes()
	dir := t.TempDir()
	for cut := 0; cut < len(data); cut++ {
		dst := dir + "/cut.fenec"
		_, err := Install(dst, bytes.NewReader(data[:cut]), func(string) error {
			t.Fatalf("cut at %d: verify called for a cut-short image", cut)
			return nil
		})
		if !errors.Is(err, ErrBadImage) {
			t.Fatalf("cut at %d of %d: %v", cut, len(data), err)
		}
		entries, err := os.ReadDir(dir)
		if err != nil || len(entries) != 0 {
			t.Fatalf("cut at %d: left %v (%v)", cut, entries, err)
		}
	}
	// A damaged byte anywhere is refused too, and so is a verify failure.
	for _, at := range []int{0, headerSize + 3, len(data) / 2, len(data) - 1} {
		bad := bytes.Clone(data)
		bad[at] ^= 1
		if _, err := Install(dir+"/bad.fenec", bytes.NewReader(bad), nil); !errors.Is(err, ErrBadImage) {
			t.Fatalf("damaged at %d: %v", at, err)
		}
	}
	no := errors.New("engine refused it")
	if _, err := Install(dir+"/v.fenec", bytes.NewReader(data), func(string) error { return no }); !errors.Is(err, no) {
		t.Fatalf("verify failure: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("left %v", entries)
	}
}

func TestInstallLeavesAnotherInstallAlone(t *testing.T) {
	dst := tenantPath(t)
	f, err := openSide(dst + ".install") // someone else's install under way
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := Install(dst, bytes.NewReader(nil), nil); !errors.Is(err, ErrLocked) {
		t.Fatalf("install beside another: %v", err)
	}
	if _, err := os.Stat(dst + ".install"); err != nil {
		t.Fatalf("the other install's side file: %v", err)
	}
}

// A whole tenant file (kept records, an image, records after it) installs
// as an image does, and the copy serves the same cursors.
func TestInstallAWholeTenantFile(t *testing.T) {
	src := tenantPath(t)
	l := mustCreate(t, src, testOptions())
	appendN(t, l, 5, 2, 20)
	if err := l.Checkpoint(stateWriter([]byte("st"))); err != nil {
		t.Fatal(err)
	}
	after := appendN(t, l, 2, 1, 20)
	mustClose(t, l)
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dst := tenantPath(t)
	if _, err := Install(dst, f, nil); err != nil {
		t.Fatal(err)
	}
	c, rep := mustOpen(t, dst, testOptions())
	if string(rep.image) != "st" || c.Seq() != 12 {
		t.Fatalf("installed: image %q seq %d", rep.image, c.Seq())
	}
	sameRecords(t, rep.recs, after)
	got, err := readAll(t, c, 0)
	if err != nil || len(engineOnly(got)) != 7 {
		t.Fatalf("cursor 0 on the copy: %d records, %v", len(got), err)
	}
}

// Shrink rewrites a file only where it gains by it: never a small file
// of records (an image would only add to it), never one nothing was
// written to since its open; a file whose records a checkpoint supersedes
// comes out smaller, and one whose records pass the retain bound gets its
// image. The state reads back the same either way.
func TestShrink(t *testing.T) {
	path := tenantPath(t)
	opts := testOptions()
	opts.RetainBytes = 2000
	l := mustCreate(t, path, opts)
	want := appendN(t, l, 5, 1, 100)
	size := l.Size()
	state := bytes.Repeat([]byte("s"), 300)
	if did, err := l.Shrink(stateWriter(state)); err != nil || did || l.Size() != size {
		t.Fatalf("a small file of records: shrunk %v %v, %d bytes, was %d", did, err, l.Size(), size)
	}
	// Past the retain bound: an open would replay more than a checkpoint
	// keeps, so it gets its image.
	want = append(want, appendN(t, l, 30, 1, 100)...)
	if did, err := l.Shrink(stateWriter(state)); err != nil || !did {
		t.Fatalf("records past the retain bound: shrunk %v %v", did, err)
	}
	if l.Size() >= size+30*130 {
		t.Fatalf("%d bytes after a rewrite past the retain bound", l.Size())
	}
	// Right after it, nothing to gain: the same records and a new image.
	want = append(want, appendN(t, l, 1, 1, 100)...)
	if did, err := l.Shrink(stateWriter(state)); err != nil || did {
		t.Fatalf("a rewrite that could not be smaller: shrunk %v %v", did, err)
	}
	// An image much smaller than the last one (rows deleted) and the
	// records it leaves behind: smaller.
	if err := l.Checkpoint(stateWriter(bytes.Repeat([]byte("s"), 20000))); err != nil {
		t.Fatal(err)
	}
	big := l.Size()
	want = append(want, appendN(t, l, 1, 1, 100)...)
	if did, err := l.Shrink(stateWriter(state)); err != nil || !did || l.Size() >= big {
		t.Fatalf("an image made smaller: shrunk %v %v, %d bytes, was %d", did, err, l.Size(), big)
	}
	mustClose(t, l)
	l2, c := mustOpen(t, path, opts)
	if !c.hadImage || !bytes.Equal(c.image, state) || c.imageSeq+uint64(len(c.recs)) != l2.Seq() || l2.Seq() != uint64(len(want)) {
		t.Fatalf("reopened: image %v (%d bytes) at %d, %d records after it, seq %d", c.hadImage, len(c.image), c.imageSeq, len(c.recs), l2.Seq())
	}
	// Nothing written since the open: left as it is, however long.
	size = l2.Size()
	if did, err := l2.Shrink(stateWriter(nil)); err != nil || did || l2.Size() != size {
		t.Fatalf("a file opened and left: shrunk %v %v", did, err)
	}
	mustClose(t, l2)
}
