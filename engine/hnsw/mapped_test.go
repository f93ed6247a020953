package hnsw

import (
	"bytes"
	"errors"
	"hash/crc32"
	"io"
	"iter"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/fenec-go/fenec/engine/internal/fmap"
)

// docVecs stands for the documents a graph's live vectors are read from:
// each id's vector as it was put.
type docVecs map[int64][]float32

// docsOf is the documents of a graph built from vs under ids 0.. (build).
func docsOf(vs [][]float32) docVecs {
	d := docVecs{}
	for i, v := range vs {
		d[int64(i)] = v
	}
	return d
}

func (d docVecs) vector(id int64) ([]float32, bool) {
	v, ok := d[id]
	return v, ok
}

func (d docVecs) all() iter.Seq2[int64, []float32] { return maps.All(d) }

// loadAttached is LoadMapped of a head and section, given docs' vectors.
func loadAttached(head, section []byte, hold Holder, docs docVecs) (*Index, error) {
	x, err := LoadMapped(head, section, hold)
	if err != nil {
		return nil, err
	}
	if err := x.AttachVectors(docs.all()); err != nil {
		x.Release()
		return nil, err
	}
	return x, nil
}

// saveMapped writes x's head and section into a file, the section at
// offset 64, maps the file and returns the two parts as views of the
// mapping and the mapping itself.
func saveMapped(t testing.TB, x *Index, docs docVecs) (head, section []byte, r *fmap.Region) {
	t.Helper()
	head, section, r, _ = saveMappedAt(t, x, docs)
	return head, section, r
}

// saveMappedAt is saveMapped, saying the file's path too.
func saveMappedAt(t testing.TB, x *Index, docs docVecs) (head, section []byte, r *fmap.Region, path string) {
	t.Helper()
	var h, s bytes.Buffer
	if n, err := x.WriteHead(&h); err != nil || n != x.HeadLen() || n != int64(h.Len()) {
		t.Fatalf("write head: %d bytes (HeadLen %d, buffer %d), %v", n, x.HeadLen(), h.Len(), err)
	}
	if n, err := x.WriteSection(&s, docs.vector); err != nil || n != x.SectionLen() || n != int64(s.Len()) {
		t.Fatalf("write section: %d bytes (SectionLen %d, buffer %d), %v", n, x.SectionLen(), s.Len(), err)
	}
	const at = 64
	data := make([]byte, at+s.Len()+h.Len())
	copy(data[at:], s.Bytes())
	copy(data[at+s.Len():], h.Bytes())
	path = filepath.Join(t.TempDir(), "graph")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err = fmap.Map(f, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	b := r.Bytes()
	return b[at+s.Len():], b[at : at+s.Len()], r, path
}

// A file shortened under a mapped graph by another path (flock does not
// stop truncate(2)) makes its reads fault: the graph answers ErrFault, the
// process goes on.
func TestFileShortenedUnderTheMapping(t *testing.T) {
	vs := randVecs(50, 3000, 16)
	x := build(t, Config{Dim: 16, M: 8, EfConstruction: 32}, vs)
	head, section, r, path := saveMappedAt(t, x, docsOf(vs))
	y, err := loadAttached(bytes.Clone(head), section, r, docsOf(vs))
	if err != nil {
		t.Fatal(err)
	}
	defer y.Release()
	q := randVecs(51, 1, 16)[0]
	search(t, y, q, Query{K: 5})
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	// A walk reads the level-0 lists in the file (an exact search reads
	// only the vectors, which are the documents').
	if _, err := y.Search(q, Query{K: 5}); !errors.Is(err, ErrFault) {
		t.Fatalf("search of a shortened file: %v, want ErrFault", err)
	}
	if _, err := y.Search(q, Query{K: 5, Exact: true}); !errors.Is(err, ErrFault) {
		t.Fatalf("search after a fault: %v, want ErrFault", err)
	}
	if _, err := y.WriteSection(io.Discard, docsOf(vs).vector); !errors.Is(err, ErrFault) {
		t.Fatalf("save after a fault: %v, want ErrFault", err)
	}
	if err := y.Add(99999, q); !errors.Is(err, ErrFault) {
		t.Fatalf("add after a fault: %v, want ErrFault", err)
	}
}

func TestMappedRoundTrip(t *testing.T) {
	for _, metric := range []Metric{Cosine, L2, Dot} {
		t.Run(metric.String(), func(t *testing.T) {
			x, live := churned(t, 2000, 16, metric)
			head, section, r := saveMapped(t, x, live)
			y, err := loadAttached(head, section, r, live)
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			t.Cleanup(y.Release)
			if y.Len() != x.Len() || y.Tombstones() != x.Tombstones() || y.Config() != x.Config() {
				t.Fatalf("loaded Len %d Tombstones %d Config %+v, want %d %d %+v",
					y.Len(), y.Tombstones(), y.Config(), x.Len(), x.Tombstones(), x.Config())
			}
			if y.MappedBytes() != int64(len(section))-4 {
				t.Fatalf("MappedBytes %d, want the section's %d", y.MappedBytes(), len(section)-4)
			}
			qs := randVecs(21, 30, 16)
			sameAnswers(t, x, y, qs)
			// The version 1 form of both is the same: the mapped graph
			// holds exactly what the built one does.
			if !bytes.Equal(save(t, x), save(t, y)) {
				t.Fatal("the mapped graph saves differently")
			}
			// Both go on alike, the mapped one writing its changes beside
			// the mapping (which is read only: a write there would fault),
			// through purges that free mapped slots.
			more := randVecs(22, 1500, 16)
			for i, v := range more {
				for _, z := range []*Index{x, y} {
					if err := z.Add(int64(5000+i), v); err != nil {
						t.Fatal(err)
					}
					z.Remove(int64(i * 3))
				}
				live[int64(5000+i)] = v
				delete(live, int64(i*3))
			}
			sameAnswers(t, x, y, qs)
			// And save again, and load again, alike.
			head2, section2, r2 := saveMapped(t, y, live)
			z, err := loadAttached(head2, section2, r2, live)
			if err != nil {
				t.Fatalf("load again: %v", err)
			}
			t.Cleanup(z.Release)
			sameAnswers(t, x, z, qs)
		})
	}
}

func TestMappedDamageRefused(t *testing.T) {
	x, live := churned(t, 500, 8, Cosine)
	var h, s bytes.Buffer
	if _, err := x.WriteHead(&h); err != nil {
		t.Fatal(err)
	}
	if _, err := x.WriteSection(&s, docVecs(live).vector); err != nil {
		t.Fatal(err)
	}
	hb, sb := h.Bytes(), s.Bytes()
	cases := map[string]func() ([]byte, []byte){
		"section byte flipped": func() ([]byte, []byte) { c := bytes.Clone(sb); c[len(c)/2] ^= 1; return hb, c },
		"section cut short":    func() ([]byte, []byte) { return hb, sb[:len(sb)-9] },
		"section too long":     func() ([]byte, []byte) { return hb, append(bytes.Clone(sb), 0, 0, 0, 0) },
		"head byte flipped":    func() ([]byte, []byte) { c := bytes.Clone(hb); c[len(c)/2] ^= 1; return c, sb },
		"head cut short":       func() ([]byte, []byte) { return hb[:len(hb)-1], sb },
		"head of version 1":    func() ([]byte, []byte) { return save(t, x), sb },
		"no head":              func() ([]byte, []byte) { return nil, sb },
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			head, section := mk()
			held := fmap.Hold(nil, nil)
			if _, err := LoadMapped(head, section, held); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
			if held.Live() {
				t.Fatal("a refused graph kept its reference on the mapping")
			}
		})
	}
	// A section whose sum checks but whose counts do not is refused too,
	// not sliced past its end.
	lists := 16 * int(x.sectionSlots()) // past the inverse norms (Cosine) and the places
	c := bytes.Clone(sb)
	c[lists] = 0xff
	fixSum(c)
	if _, err := LoadMapped(hb, c, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a level-0 count past m0: got %v, want ErrCorrupt", err)
	}
	// A live node's inverse norm that is not its document's vector's: the
	// section loads (its sum checks), the vectors given are refused.
	for s := range x.ids {
		if x.state[s] != slotLive {
			continue
		}
		c := bytes.Clone(sb)
		c[8*s] ^= 1
		fixSum(c)
		y, err := LoadMapped(hb, c, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := y.AttachVectors(docVecs(live).all()); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("a norm not its vector's: got %v, want ErrCorrupt", err)
		}
		if _, err := y.Search(make([]float32, 8), Query{K: 1}); !errors.Is(err, ErrMissingVector) {
			t.Fatalf("search of a graph refused its vectors: got %v, want ErrMissingVector", err)
		}
		break
	}
	// A vector missing, or of the wrong length, is refused as well.
	for name, docs := range map[string]docVecs{"missing": {}, "short": shortened(live)} {
		y, err := LoadMapped(hb, sb, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := y.AttachVectors(docs.all()); err == nil {
			t.Fatalf("vectors %s: attached", name)
		}
	}
}

// shortened is docs with each vector a number short.
func shortened(docs map[int64][]float32) docVecs {
	d := docVecs{}
	for id, v := range docs {
		d[id] = v[:len(v)-1]
	}
	return d
}

// fixSum rewrites a section's trailing sum to match its bytes.
func fixSum(section []byte) {
	body := len(section) - 4
	sum := crc32Sum(section[:body])
	section[body], section[body+1], section[body+2], section[body+3] = byte(sum), byte(sum>>8), byte(sum>>16), byte(sum>>24)
}

// TestReleaseWaitsForSearches runs searches on a graph served from a real
// mapping while it is released: the mapping goes only once the last search
// that entered is done (a search reading it after would fault and end the
// test), and a search after answers ErrReleased. Run it under -race.
func TestReleaseWaitsForSearches(t *testing.T) {
	vs := randVecs(40, 2000, 16)
	x := build(t, Config{Dim: 16, M: 8, EfConstruction: 32}, vs)
	head, section, r := saveMapped(t, x, docsOf(vs))
	y, err := loadAttached(head, section, r, docsOf(vs))
	if err != nil {
		t.Fatal(err)
	}
	qs := randVecs(41, 64, 16)
	var wg sync.WaitGroup
	var answered sync.WaitGroup
	answered.Add(4)
	for g := range 4 {
		wg.Go(func() {
			first := true
			for i := g; ; i = (i + 1) % len(qs) {
				hs, err := y.Search(qs[i], Query{K: 5})
				if errors.Is(err, ErrReleased) {
					return
				}
				if err != nil || len(hs) != 5 {
					t.Errorf("search: %d hits, %v", len(hs), err)
				}
				if first {
					answered.Done() // every searcher is under way
					first = false
				}
			}
		})
	}
	answered.Wait()
	y.Release()
	y.Release() // twice is harmless
	wg.Wait()
	if r.Live() {
		t.Fatal("the mapping outlived the graph and its searches")
	}
	if _, err := y.Search(qs[0], Query{K: 5}); !errors.Is(err, ErrReleased) {
		t.Fatalf("search after release: %v, want ErrReleased", err)
	}
	if _, err := y.WriteHead(&bytes.Buffer{}); !errors.Is(err, ErrReleased) {
		t.Fatalf("write after release: %v, want ErrReleased", err)
	}
}

func crc32Sum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// A pinned graph reads on past Release (a snapshot saving it while a
// checkpoint swaps it out); its mapping goes at the last Unpin, and a
// search arriving after that is turned away.
func TestPinnedReadsOnPastRelease(t *testing.T) {
	vs := randVecs(60, 1000, 16)
	x := build(t, Config{Dim: 16, M: 8, EfConstruction: 32}, vs)
	head, section, r := saveMapped(t, x, docsOf(vs))
	y, err := loadAttached(head, section, r, docsOf(vs))
	if err != nil {
		t.Fatal(err)
	}
	if !y.Pin() {
		t.Fatal("a live graph refused a pin")
	}
	y.Release()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if _, err := y.WriteSection(io.Discard, docsOf(vs).vector); err != nil {
				t.Errorf("save while pinned: %v", err)
			}
			if _, err := y.Search(randVecs(61, 1, 16)[0], Query{K: 3}); err != nil {
				t.Errorf("search while pinned: %v", err)
			}
		})
	}
	wg.Wait()
	if !r.Live() {
		t.Fatal("the mapping went while pinned")
	}
	y.Unpin()
	if r.Live() {
		t.Fatal("the mapping outlived the last pin")
	}
	if y.Pin() {
		t.Fatal("a pin taken on a released graph whose mapping is gone")
	}
	if _, err := y.Search(randVecs(61, 1, 16)[0], Query{K: 3}); !errors.Is(err, ErrReleased) {
		t.Fatalf("search after the last pin: %v, want ErrReleased", err)
	}
}

// A mapped graph emptied by removes (reset) keeps its pins and its hold:
// the pin's holder unpins as it would, and Release lets the mapping go.
func TestMappedGraphEmptied(t *testing.T) {
	vs := randVecs(70, 300, 8)
	x := build(t, Config{Dim: 8, M: 8, EfConstruction: 32}, vs)
	head, section, r := saveMapped(t, x, docsOf(vs))
	y, err := loadAttached(head, section, r, docsOf(vs))
	if err != nil {
		t.Fatal(err)
	}
	if !y.Pin() {
		t.Fatal("pin refused")
	}
	for i := range vs {
		y.Remove(int64(i))
	}
	if y.Len() != 0 || y.MappedBytes() != 0 {
		t.Fatalf("emptied: Len %d, MappedBytes %d", y.Len(), y.MappedBytes())
	}
	if err := y.Add(1, vs[0]); err != nil {
		t.Fatal(err)
	}
	if hs := search(t, y, vs[0], Query{K: 1}); len(hs) != 1 || hs[0].ID != 1 {
		t.Fatalf("after an add: %v", hs)
	}
	y.Unpin()
	y.Release()
	if r.Live() {
		t.Fatal("the mapping outlived the emptied graph's release")
	}
}
