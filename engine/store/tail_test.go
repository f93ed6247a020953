package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"testing"
)

// writeSample makes a file of count blocks and returns its bytes, the
// records and each frame's offset.
func writeSample(t testing.TB, path string, count int) ([]byte, []Record, []int64) {
	t.Helper()
	l := mustCreate(t, path, testOptions())
	var recs []Record
	var offs []int64
	for i := range count {
		offs = append(offs, l.Size())
		recs = append(recs, appendN(t, l, 1, uint64(1+i%3), 20+i*7)...)
	}
	mustClose(t, l)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data, recs, offs
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func TestTornTailAtEveryByte(t *testing.T) {
	path := tenantPath(t)
	data, recs, offs := writeSample(t, path, 6)
	last := offs[len(offs)-1]
	for cut := last; cut < int64(len(data)); cut++ {
		writeFile(t, path, data[:cut])
		c := &collected{}
		l, err := Open(path, testOptions(), c)
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		sameRecords(t, c.recs, recs[:len(recs)-1])
		if l.Seq() != recs[len(recs)-2].Last || l.Size() != last {
			t.Fatalf("cut at %d: seq %d size %d", cut, l.Seq(), l.Size())
		}
		// The log goes on from the cut.
		if _, err := l.Append(KindEngine, 1, []byte("after")); err != nil {
			t.Fatal(err)
		}
		mustClose(t, l)
		if got := fileSize(t, path); got != l.Size() {
			t.Fatalf("cut at %d: file is %d bytes, log counted %d", cut, got, l.Size())
		}
		l2, c2 := mustOpen(t, path, testOptions())
		if len(c2.recs) != len(recs) || string(c2.recs[len(recs)-1].Body) != "after" {
			t.Fatalf("cut at %d: after reopen %d records", cut, len(c2.recs))
		}
		mustClose(t, l2)
	}
}

func TestBadFrames(t *testing.T) {
	path := tenantPath(t)
	data, recs, offs := writeSample(t, path, 5)
	flip := func(at int64) []byte {
		b := bytes.Clone(data)
		b[at] ^= 0x40
		return b
	}
	setLen := func(at int64, l uint32) []byte {
		b := bytes.Clone(data)
		binary.LittleEndian.PutUint32(b[at:], l)
		return b
	}
	lastOff := offs[len(offs)-1]
	tail := []struct {
		name string
		data []byte
	}{
		{"crc of last", flip(lastOff + 5)},
		{"payload of last", flip(int64(len(data)) - 1)},
		{"kind of last", flip(lastOff + frameHead)},
		{"length of last past end", setLen(lastOff, 1<<30)},
		{"length of last too short", setLen(lastOff, 2)},
		{"zeros after", append(bytes.Clone(data), make([]byte, 100)...)},
		{"garbage after", append(bytes.Clone(data), []byte("\x05\x00\x00\x00garbage!")...)},
	}
	for _, tc := range tail {
		t.Run("tail "+tc.name, func(t *testing.T) {
			writeFile(t, path, tc.data)
			c := &collected{}
			l, err := Open(path, testOptions(), c)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer l.Close()
			want := recs
			if len(tc.data) <= len(data) {
				want = recs[:len(recs)-1]
			}
			sameRecords(t, c.recs, want)
		})
	}
	mid := offs[2]
	damaged := []struct {
		name string
		data []byte
	}{
		{"crc of a middle frame", flip(mid + 5)},
		{"payload of a middle frame", flip(offs[3] - 1)},
		{"length of a middle frame past end", setLen(mid, 1<<30)},
		{"length of a middle frame short", setLen(mid, 9)},
		{"seq of a middle frame", flip(mid + frameHead + 1)},
	}
	for _, tc := range damaged {
		t.Run("damaged "+tc.name, func(t *testing.T) {
			writeFile(t, path, tc.data)
			_, err := Open(path, testOptions(), &collected{})
			var de *DamagedError
			if !errors.As(err, &de) {
				t.Fatalf("open: %v, want a DamagedError", err)
			}
			if de.Offset != mid || de.Path != path {
				t.Fatalf("damage named %s at %d, want %s at %d (%v)", de.Path, de.Offset, path, mid, err)
			}
			if got := fileSize(t, path); got != int64(len(tc.data)) {
				t.Fatalf("a damaged file was changed: %d bytes, was %d", got, len(tc.data))
			}
		})
	}
	t.Run("damaged header", func(t *testing.T) {
		writeFile(t, path, flip(3))
		_, err := Open(path, testOptions(), nil)
		var de *DamagedError
		if !errors.As(err, &de) || de.Offset != 0 {
			t.Fatalf("open: %v", err)
		}
	})
}

func TestImageWithoutItsEndIsDamage(t *testing.T) {
	l := mustCreate(t, tenantPath(t), Options{Sync: SyncOff, Logger: quietLogger(), imageChunk: 40})
	var img bytes.Buffer
	if _, err := l.WriteImage(&img, stateWriter(bytes.Repeat([]byte("z"), 200))); err != nil {
		t.Fatal(err)
	}
	data := img.Bytes()
	// Drop the KindImageEnd frame: the frames left are whole, the image is not.
	s, err := scan(data, 0, true)
	if err != nil || len(s.images) != 1 {
		t.Fatalf("scan of a whole image: %v", err)
	}
	off := int64(headerSize)
	var lastStart int64
	for off < int64(len(data)) {
		_, size, why := frameAt(data, off, 0, true)
		if why != "" {
			t.Fatal(why)
		}
		lastStart, off = off, off+size
	}
	path := tenantPath(t)
	writeFile(t, path, data[:lastStart])
	_, err = Open(path, testOptions(), nil)
	var de *DamagedError
	if !errors.As(err, &de) || de.Offset != headerSize {
		t.Fatalf("open of an image without its end: %v", err)
	}
}

func TestSearchAfterABadFrame(t *testing.T) {
	path := tenantPath(t)
	data, _, offs := writeSample(t, path, 4)
	bad := bytes.Clone(data)
	bad[offs[1]+5] ^= 1 // the second frame's CRC
	if got := searchValid(bad, offs[1]+1, 1, searchBudget(bad, offs[1])); got != offs[2] {
		t.Fatalf("search found %d, want the next frame at %d", got, offs[2])
	}
	if got := searchValid(bad, offs[1]+1, 1, 0); got != searchGaveUp {
		t.Fatalf("search with no budget: %d, want it to give up", got)
	}
	if got := searchValid(bad, offs[3]+1, 1, searchBudget(bad, offs[3])); got != searchNone {
		t.Fatalf("search in the last frame found %d", got)
	}
	// Records before seq are no continuation: nothing valid after.
	if got := searchValid(bad, offs[1]+1, 1000, searchBudget(bad, offs[1])); got != searchNone {
		t.Fatalf("search past the seq found %d", got)
	}
}
