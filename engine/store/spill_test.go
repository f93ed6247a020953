package store

import (
	"bytes"
	"errors"
	"os"
	"syscall"
	"testing"
)

// spillBlock spills pieces then lands a block of n writes with last.
func spillBlock(t testing.TB, l *Log, n uint64, last []byte, pieces ...[]byte) Record {
	t.Helper()
	for _, p := range pieces {
		want := l.SpillSize(len(p))
		before := l.Size()
		if _, err := l.Spill(p); err != nil {
			t.Fatalf("spill: %v", err)
		}
		if got := l.Size() - before; got != want {
			t.Fatalf("spill grew the file %d bytes, SpillSize said %d", got, want)
		}
	}
	rec, err := l.Append(KindEngine, n, last)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	rec.Body = joinPieces(pieces, last)
	return rec
}

func pieces(n, size int) [][]byte {
	var out [][]byte
	for i := range n {
		out = append(out, bytes.Repeat([]byte{byte('A' + i)}, size))
	}
	return out
}

func TestSpilledBlockLandsWhole(t *testing.T) {
	path := tenantPath(t)
	l := mustCreate(t, path, testOptions())
	want := appendN(t, l, 2, 1, 10)
	want = append(want, spillBlock(t, l, 5, []byte("tail"), pieces(3, 1000)...))
	want = append(want, appendN(t, l, 1, 1, 10)...)
	if l.Seq() != 8 {
		t.Fatalf("seq %d", l.Seq())
	}
	got, err := readAll(t, l, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 || got[0].Kind != KindSpill || got[2].Kind != KindSpill {
		t.Fatalf("feed: %d records", len(got))
	}
	sameRecords(t, engineOnly(got), want[2:])
	mustClose(t, l)
	_, c := mustOpen(t, path, testOptions())
	sameRecords(t, c.recs, want)
	// Replay lends the mapped bytes of every record but the spilled block,
	// whose joined body is a copy of its own.
	if c.borrowed != len(want)-1 {
		t.Fatalf("replay lent %d of %d records, want all but the spilled one", c.borrowed, len(want))
	}
}

// A refused spilled block leaves no byte in the file: it is cut back to
// where its spills began, durably, and the next block lands there.
func TestDroppedSpillsLeaveNoBytes(t *testing.T) {
	path := tenantPath(t)
	opts := testOptions()
	opts.indexEvery = 1
	l := mustCreate(t, path, opts)
	want := appendN(t, l, 2, 1, 10)
	size := l.Size()
	for _, p := range pieces(2, 500) {
		if _, err := l.Spill(p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Fork(); !errors.Is(err, ErrSpilling) {
		t.Fatalf("fork while spilling: %v", err)
	}
	if err := l.Checkpoint(stateWriter(nil)); !errors.Is(err, ErrSpilling) {
		t.Fatalf("checkpoint while spilling: %v", err)
	}
	if err := l.Sync(); err != nil { // the spills on disk, as a tick would put them
		t.Fatal(err)
	}
	if got, _ := readAll(t, l, 2); len(got) != 0 {
		t.Fatalf("feed sent %d records of a block not landed", len(got))
	}
	if err := l.DropSpills(); err != nil {
		t.Fatal(err)
	}
	if l.Size() != size {
		t.Fatalf("%d bytes after a refused block, %d before it", l.Size(), size)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != size {
		t.Fatalf("file on disk %v %v, want %d bytes", fi.Size(), err, size)
	}
	if l.Durable() != l.Seq() {
		t.Fatalf("durable %d, seq %d", l.Durable(), l.Seq())
	}
	want = append(want, appendN(t, l, 1, 1, 10)...)
	want = append(want, spillBlock(t, l, 2, []byte("tail"), pieces(2, 300)...))
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, l, 2)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, engineOnly(got), want[2:])
	got, err = readAll(t, l, 0)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, engineOnly(got), want)
	mustClose(t, l)
	_, c := mustOpen(t, path, opts)
	sameRecords(t, c.recs, want)
}

// A refused block that cannot be cut back (the file will not shrink) is
// marked dropped instead: its spills stay, dead, until a checkpoint
// leaves them out.
func TestDroppedSpillsMarkedWhenNotCut(t *testing.T) {
	path := tenantPath(t)
	opts := testOptions()
	opts.indexEvery = 1
	l := mustCreate(t, path, opts)
	want := appendN(t, l, 2, 1, 10)
	for _, p := range pieces(2, 500) {
		if _, err := l.Spill(p); err != nil {
			t.Fatal(err)
		}
	}
	l.truncate = func(*os.File, int64) error { return syscall.EIO }
	if err := l.DropSpills(); err != nil {
		t.Fatal(err)
	}
	l.truncate = (*os.File).Truncate
	want = append(want, appendN(t, l, 1, 1, 10)...)
	if l.Size() < 1000 {
		t.Fatalf("dropped spills not in the file: %d bytes", l.Size())
	}
	got, err := readAll(t, l, 2)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, got, want[2:])
	if err := l.Checkpoint(stateWriter(nil)); err != nil {
		t.Fatal(err)
	}
	if l.Size() >= 1000 {
		t.Fatalf("checkpoint kept the dead spills: %d bytes", l.Size())
	}
	got, err = readAll(t, l, 0)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, engineOnly(got), want)
	mustClose(t, l)
	_, c := mustOpen(t, path, opts)
	if len(c.recs) != 0 || !c.hadImage {
		t.Fatalf("reopened: %d records after the image", len(c.recs))
	}
}

func TestUnfinishedSpilledBlockIsCut(t *testing.T) {
	path := tenantPath(t)
	l := mustCreate(t, path, testOptions())
	want := appendN(t, l, 2, 1, 10)
	size := l.Size()
	for _, p := range pieces(2, 300) {
		if _, err := l.Spill(p); err != nil {
			t.Fatal(err)
		}
	}
	lastOff := l.Size()
	if _, err := l.Append(KindEngine, 3, []byte("last piece of the block")); err != nil {
		t.Fatal(err)
	}
	mustClose(t, l)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Cut anywhere in the block's own record (or drop it whole): its
	// spills go too.
	for cut := lastOff; cut < int64(len(data)); cut++ {
		writeFile(t, path, data[:cut])
		l2, c := mustOpen(t, path, testOptions())
		sameRecords(t, c.recs, want)
		if l2.Size() != size || l2.Seq() != 2 {
			t.Fatalf("cut at %d: size %d (want %d) seq %d", cut, l2.Size(), size, l2.Seq())
		}
		mustClose(t, l2)
	}
}

func TestReplicaTakesSpilledBlocks(t *testing.T) {
	primary := mustCreate(t, tenantPath(t), testOptions())
	var img bytes.Buffer
	if _, err := primary.WriteImage(&img, stateWriter(nil)); err != nil {
		t.Fatal(err)
	}
	rpath := tenantPath(t)
	if _, err := Install(rpath, &img, nil); err != nil {
		t.Fatal(err)
	}
	replica, _ := mustOpen(t, rpath, testOptions())
	want := appendN(t, primary, 1, 1, 10)
	want = append(want, spillBlock(t, primary, 4, []byte("end"), pieces(3, 200)...))
	for _, p := range pieces(1, 50) { // refused: never sent
		primary.Spill(p)
	}
	if err := primary.DropSpills(); err != nil {
		t.Fatal(err)
	}
	want = append(want, appendN(t, primary, 1, 2, 10)...)

	feed, err := readAll(t, primary, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The block before, then the connection breaks after two spills.
	for _, r := range feed[1:4] {
		if _, err := replica.AppendRaw(r.Frame); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := replica.AppendRaw(feed[3].Frame); !errors.Is(err, ErrSeqGap) {
		t.Fatalf("spill out of order: %v", err)
	}
	// The feed starts again from the replica's seq, spills from piece 0.
	feed, err = readAll(t, primary, replica.Seq())
	if err != nil {
		t.Fatal(err)
	}
	landed := []Record{want[0]}
	for _, r := range feed {
		peek, err := replica.PeekRaw(r.Frame)
		if err != nil {
			t.Fatal(err)
		}
		if peek.Kind >= KindEngine && !bytes.Equal(peek.Body, r.Body) {
			t.Fatalf("peek at %d-%d: body of %d bytes, want %d", r.First, r.Last, len(peek.Body), len(r.Body))
		}
		got, err := replica.AppendRaw(r.Frame)
		if err != nil {
			t.Fatal(err)
		}
		if got.Kind >= KindEngine {
			landed = append(landed, got)
		}
	}
	sameRecords(t, landed, want)
	if replica.Seq() != primary.Seq() {
		t.Fatalf("replica at %d, primary at %d", replica.Seq(), primary.Seq())
	}
	mustClose(t, replica)
	_, c := mustOpen(t, rpath, testOptions())
	sameRecords(t, c.recs, want)
}

// A drop marker that cannot be written stops the Log: otherwise the next
// block would land the refused block's spills as its own pieces. Reopened,
// the file cuts the spills off as an unfinished block.
func TestFailedSpillDropStopsTheLog(t *testing.T) {
	path := tenantPath(t)
	l := mustCreate(t, path, testOptions())
	want := appendN(t, l, 2, 1, 10)
	if _, err := l.Spill([]byte("refused block's piece")); err != nil {
		t.Fatal(err)
	}
	// The file will not shrink, and the disk is full for a moment: the
	// marker's write fails, cutting back works.
	l.truncate = func(*os.File, int64) error { return syscall.EIO }
	l.writev = func(*os.File, [][]byte, int64) (int64, error) { return 0, syscall.ENOSPC }
	if err := l.DropSpills(); err == nil {
		t.Fatal("drop spills succeeded on a full disk")
	}
	l.writev, l.truncate = pwritev, (*os.File).Truncate
	if rec, err := l.Append(KindEngine, 1, []byte("next block")); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after a failed drop: %v (landed %q), want ErrFailed", err, rec.Body)
	}
	if err := l.Close(); !errors.Is(err, ErrFailed) {
		t.Fatalf("close of a stopped log: %v, want ErrFailed", err)
	}
	_, c := mustOpen(t, path, testOptions())
	sameRecords(t, c.recs, want)
}
