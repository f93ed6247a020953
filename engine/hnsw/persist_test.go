package hnsw

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"maps"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/fenec-go/fenec/engine/internal/hugemem"
)

// churned returns an index of n vectors of length dim that has been through
// updates and removes (so it holds tombstones and, after a purge, free
// slots), and the live vectors by id.
func churned(t testing.TB, n, dim int, metric Metric) (*Index, map[int64][]float32) {
	t.Helper()
	vs := randVecs(20, n+n/4, dim)
	x, err := New(Config{Dim: dim, Metric: metric, M: 8, EfConstruction: 64, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	live := map[int64][]float32{}
	for i := range n {
		if err := x.Add(int64(i), vs[i]); err != nil {
			t.Fatal(err)
		}
		live[int64(i)] = vs[i]
	}
	for i := 0; i < n; i += 4 { // past the purge fraction: a purge runs
		x.Remove(int64(i))
		delete(live, int64(i))
	}
	for i := 1; i < n/4; i += 8 { // updates leave tombstones behind
		v := vs[n+i]
		if err := x.Add(int64(i), v); err != nil {
			t.Fatal(err)
		}
		live[int64(i)] = v
	}
	if x.Tombstones() == 0 || len(x.free) == 0 {
		t.Fatalf("fixture has %d tombstones and %d free slots; want some of each", x.Tombstones(), len(x.free))
	}
	return x, live
}

func save(t testing.TB, x *Index) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := x.WriteTo(&buf)
	if err != nil {
		t.Fatalf("write: %v", err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo said %d bytes, wrote %d", n, buf.Len())
	}
	return buf.Bytes()
}

func sameAnswers(t testing.TB, a, b *Index, qs [][]float32) {
	t.Helper()
	for i, q := range qs {
		for _, opts := range []Query{{K: 10}, {K: 10, Ef: 200}, {K: 10, Exact: true}, {K: 5, Filter: func(id int64) bool { return id%3 == 0 }}} {
			ga, gb := search(t, a, q, opts), search(t, b, q, opts)
			if !slices.Equal(ga, gb) {
				t.Fatalf("query %d %+v: %v before, %v after", i, opts, ga, gb)
			}
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for _, metric := range []Metric{Cosine, L2, Dot} {
		t.Run(metric.String(), func(t *testing.T) {
			x, live := churned(t, 2000, 16, metric)
			data := save(t, x)
			y, err := Load(bytes.NewReader(data), vectorsOf(live))
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			if y.Len() != x.Len() || y.Tombstones() != x.Tombstones() || y.Config() != x.Config() {
				t.Fatalf("loaded Len %d Tombstones %d Config %+v, want %d %d %+v",
					y.Len(), y.Tombstones(), y.Config(), x.Len(), x.Tombstones(), x.Config())
			}
			qs := randVecs(21, 30, 16)
			sameAnswers(t, x, y, qs)
			// Saving the loaded graph gives the same bytes: nothing was
			// rebuilt or renumbered beyond the dense numbering.
			if again := save(t, y); !bytes.Equal(again, data) {
				t.Fatal("loaded graph saves differently")
			}
			// Both go on alike: the level draw was saved too.
			more := randVecs(22, 300, 16)
			for i, v := range more {
				for _, z := range []*Index{x, y} {
					if err := z.Add(int64(5000+i), v); err != nil {
						t.Fatal(err)
					}
					z.Remove(int64(i * 3))
				}
			}
			sameAnswers(t, x, y, qs)
		})
	}
}

func TestLoadEmpty(t *testing.T) {
	x, err := New(Config{Dim: 4})
	if err != nil {
		t.Fatal(err)
	}
	y, err := Load(bytes.NewReader(save(t, x)), vectorsOf(nil))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if y.Len() != 0 {
		t.Fatalf("Len() = %d", y.Len())
	}
	if err := y.Add(1, []float32{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
}

// Load reads exactly the graph's bytes, so what follows it in a stream is
// left for the caller.
func TestLoadStopsAtTheEnd(t *testing.T) {
	x, live := churned(t, 200, 4, L2)
	data := save(t, x)
	r := bytes.NewReader(append(slices.Clone(data), "tail"...))
	if _, err := Load(r, vectorsOf(live)); err != nil {
		t.Fatal(err)
	}
	if rest := r.Len(); rest != 4 {
		t.Fatalf("%d bytes left after the graph, want 4", rest)
	}
}

func TestEveryCutFails(t *testing.T) {
	x, live := churned(t, 120, 4, Cosine)
	data := save(t, x)
	for n := range len(data) {
		if _, err := Load(bytes.NewReader(data[:n]), vectorsOf(live)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut at %d of %d: err = %v, want ErrCorrupt", n, len(data), err)
		}
	}
}

func TestDamageFails(t *testing.T) {
	x, live := churned(t, 120, 4, Cosine)
	data := save(t, x)
	for i := range data {
		bad := slices.Clone(data)
		bad[i] ^= 0x10
		if _, err := Load(bytes.NewReader(bad), vectorsOf(live)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d flipped: err = %v, want ErrCorrupt", i, err)
		}
	}
}

func TestLoadVectorProblems(t *testing.T) {
	x, live := churned(t, 200, 4, Cosine)
	data := save(t, x)
	var some int64
	for id := range live {
		some = id
		break
	}
	missing := func(id int64) ([]float32, bool) {
		if id == some {
			return nil, false
		}
		return live[id], true
	}
	if _, err := Load(bytes.NewReader(data), missing); !errors.Is(err, ErrMissingVector) {
		t.Fatalf("missing vector: err = %v, want ErrMissingVector", err)
	}
	short := func(id int64) ([]float32, bool) { return live[id][:3], true }
	if _, err := Load(bytes.NewReader(data), short); !errors.Is(err, ErrDimension) {
		t.Fatalf("short vector: err = %v, want ErrDimension", err)
	}
}

// fillFrom gives LoadBytes the vectors of live, in id order, skipping
// skip.
func fillFrom(live map[int64][]float32, skip int64) func(put func(int64) []float32) bool {
	return func(put func(int64) []float32) bool {
		ids := slices.Sorted(maps.Keys(live))
		for _, id := range ids {
			if id == skip {
				continue
			}
			if dst := put(id); dst != nil {
				copy(dst, live[id])
				if put(id) != nil {
					return false // a vector is given once
				}
			}
		}
		return put(1<<40) == nil // no live node has it
	}
}

// TestLoadBytes: a graph held whole loads as Load reads it; cut short,
// with bytes after it, damaged, or short of a live node's vector, it is
// refused.
func TestLoadBytes(t *testing.T) {
	for _, metric := range []Metric{Cosine, L2} {
		x, live := churned(t, 600, 8, metric)
		data := save(t, x)
		y, err := LoadBytes(data, fillFrom(live, -1))
		if err != nil {
			t.Fatalf("%v: load: %v", metric, err)
		}
		z, err := Load(bytes.NewReader(data), vectorsOf(live))
		if err != nil {
			t.Fatal(err)
		}
		sameAnswers(t, z, y, randVecs(23, 20, 8))
		if again := save(t, y); !bytes.Equal(again, data) {
			t.Fatalf("%v: loaded graph saves differently", metric)
		}
		if !slices.Equal(y.vecs, z.vecs) {
			t.Fatalf("%v: vectors differ from Load's", metric)
		}
		if n := y.SavedLen(); n != int64(len(data)) {
			t.Fatalf("%v: SavedLen %d, WriteTo wrote %d", metric, n, len(data))
		}
	}
	x, live := churned(t, 120, 4, Cosine)
	data := save(t, x)
	for n := range len(data) {
		if _, err := LoadBytes(data[:n], fillFrom(live, -1)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut at %d of %d: err = %v, want ErrCorrupt", n, len(data), err)
		}
	}
	if _, err := LoadBytes(append(slices.Clone(data), 0), fillFrom(live, -1)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a byte after the graph: err = %v, want ErrCorrupt", err)
	}
	for i := range data {
		bad := slices.Clone(data)
		bad[i] ^= 0x10
		if _, err := LoadBytes(bad, fillFrom(live, -1)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d flipped: err = %v, want ErrCorrupt", i, err)
		}
	}
	var some int64
	for id := range live {
		some = id
		break
	}
	if _, err := LoadBytes(data, fillFrom(live, some)); !errors.Is(err, ErrMissingVector) {
		t.Fatalf("missing vector: err = %v, want ErrMissingVector", err)
	}
	withNaN := func(put func(int64) []float32) bool {
		for _, id := range slices.Sorted(maps.Keys(live)) {
			if dst := put(id); dst != nil {
				copy(dst, live[id])
				if id == some {
					dst[0] = float32(math.NaN())
				}
			}
		}
		return true
	}
	if _, err := LoadBytes(data, withNaN); !errors.Is(err, ErrNotFinite) {
		t.Fatalf("a vector not finite: err = %v, want ErrNotFinite", err)
	}
	refuse := func(put func(int64) []float32) bool { return false }
	if _, err := LoadBytes(data, refuse); !errors.Is(err, ErrMissingVector) {
		t.Fatalf("unreadable vectors: err = %v, want ErrMissingVector", err)
	}
}

// readLoad is LoadBytes of a graph read from r (ReadLoader), n bytes.
func readLoad(r io.Reader, n int64, fill func(put func(int64) []float32) bool) (*Index, error) {
	return readLoadBy(r, n, readPiece, fill)
}

// readLoadBy is readLoad reading piece bytes at a time.
func readLoadBy(r io.Reader, n int64, piece int, fill func(put func(int64) []float32) bool) (*Index, error) {
	l, err := readLoader(r, n, piece)
	if err != nil {
		return nil, err
	}
	if !fill(l.Put) {
		l.Fail()
	}
	return l.Finish()
}

// TestReadLoader: a graph read as it comes — a byte at a time, or as a
// reader gives it, read in pieces of ReadLoader's size or of a few bytes,
// which the values cross — is the graph LoadBytes takes from the same
// bytes, and ReadLoader reads not a byte past it; cut short, damaged
// anywhere or said to be of another length, it is refused.
func TestReadLoader(t *testing.T) {
	for _, metric := range []Metric{Cosine, L2} {
		x, live := churned(t, 600, 8, metric)
		data := save(t, x)
		want, err := LoadBytes(data, fillFrom(live, -1))
		if err != nil {
			t.Fatal(err)
		}
		after := append(slices.Clone(data), "next"...)
		for _, c := range []struct {
			name  string
			r     io.Reader
			piece int
		}{
			{"a byte at a time", iotest.OneByteReader(bytes.NewReader(after)), readPiece},
			{"as a reader gives", bytes.NewReader(after), readPiece},
			{"half at a time, in pieces of 61 bytes", iotest.HalfReader(bytes.NewReader(after)), 61},
			{"in pieces of 4 KB", bytes.NewReader(after), 4096},
		} {
			name, r := c.name, c.r
			y, err := readLoadBy(r, int64(len(data)), c.piece, fillFrom(live, -1))
			if err != nil {
				t.Fatalf("%v, %s: %v", metric, name, err)
			}
			sameAnswers(t, want, y, randVecs(29, 20, 8))
			if !bytes.Equal(save(t, y), data) || !slices.Equal(y.vecs, want.vecs) {
				t.Fatalf("%v, %s: the graph read differs from the one held whole", metric, name)
			}
			if rest, _ := io.ReadAll(r); string(rest) != "next" {
				t.Fatalf("%v, %s: %q left after the graph", metric, name, rest)
			}
		}
	}
	x, live := churned(t, 120, 4, Cosine)
	data := save(t, x)
	for n := range len(data) {
		if _, err := readLoad(bytes.NewReader(data[:n]), int64(len(data)), fillFrom(live, -1)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut at %d of %d: err = %v, want ErrCorrupt", n, len(data), err)
		}
	}
	for _, n := range []int{0, headerBytes + 3, len(data) - 1, len(data) + 1} {
		if _, err := readLoad(bytes.NewReader(data), int64(n), fillFrom(live, -1)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("said to be %d bytes of %d: err = %v, want ErrCorrupt", n, len(data), err)
		}
	}
	for i := range data {
		bad := slices.Clone(data)
		bad[i] ^= 0x10
		if _, err := readLoad(bytes.NewReader(bad), int64(len(bad)), fillFrom(live, -1)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d flipped: err = %v, want ErrCorrupt", i, err)
		}
	}
	// A stream failing within the graph is refused, its error kept.
	failing := io.MultiReader(bytes.NewReader(data[:len(data)/2]), iotest.ErrReader(errors.New("cut")))
	if _, err := ReadLoader(failing, int64(len(data))); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "cut") {
		t.Fatalf("a stream failing within the graph: err = %v", err)
	}
}

// TestReadLoaderBelievesCountsAsBytesCome: a graph whose header and slot
// count claim far more than the bytes that come is refused without
// allocating for what it claims.
func TestReadLoaderBelievesCountsAsBytesCome(t *testing.T) {
	x, _ := churned(t, 40, 4, L2)
	data := save(t, x)
	// The slot count follows the configuration and the level draw.
	at := headerBytes + 4 + 1 + 4 + 4 + 4 + 8
	at += 4 + int(binary.LittleEndian.Uint32(data[at:]))
	const claim = 1 << 30
	body := slices.Clone(data[headerBytes : len(data)-4])
	binary.LittleEndian.PutUint32(body[at-headerBytes:], claim/minSlotBytes-1) // as many slots as a gigabyte holds
	padded := withHeader(body)
	binary.LittleEndian.PutUint64(padded[len(magic)+4:], claim) // and a body of a gigabyte, said
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ReadLoader(bytes.NewReader(padded), int64(headerBytes)+claim+4)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err = %v, want ErrCorrupt", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Fatalf("a graph of %d bytes claiming %d allocated %d bytes", len(padded), claim, grew)
	}
}

// withHeader frames body as a graph with a correct header and checksum,
// so the fuzzer reaches the parser behind the checksum.
func withHeader(body []byte) []byte {
	out := make([]byte, 0, headerBytes+len(body)+4)
	out = append(out, magic...)
	out = binary.LittleEndian.AppendUint32(out, version)
	out = binary.LittleEndian.AppendUint64(out, uint64(len(body)))
	out = append(out, body...)
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, castagnoli))
}

func FuzzLoad(f *testing.F) {
	for _, m := range []Metric{Cosine, L2} {
		x, _ := churned(f, 40, 3, m)
		data := save(f, x)
		f.Add(data)
		f.Add(data[headerBytes : len(data)-4])
	}
	empty, _ := New(Config{Dim: 2})
	f.Add(save(f, empty))
	f.Fuzz(func(t *testing.T, data []byte) {
		// Serve a vector of the dimension the body claims, when small.
		var dim int
		vector := func(id int64) ([]float32, bool) {
			if dim == 0 || dim > 64 || id%97 == 13 {
				return nil, false
			}
			v := make([]float32, dim)
			for i := range v {
				v[i] = float32(math.Sin(float64(id) + float64(i)))
			}
			return v, true
		}
		for _, in := range [][]byte{data, withHeader(data)} {
			dim = 0
			if len(in) >= headerBytes+4 {
				dim = int(binary.LittleEndian.Uint32(in[headerBytes:]))
			}
			// The same bytes as an image holds them: whatever LoadBytes
			// takes (its vectors put where it says) is safe to search,
			// and the same bytes read as they come load alike.
			y, err := LoadBytes(in, fillServed(vector))
			z, zerr := readLoad(iotest.HalfReader(bytes.NewReader(in)), int64(len(in)), fillServed(vector))
			if (err == nil) != (zerr == nil) {
				t.Fatalf("held whole: %v; read as it comes: %v", err, zerr)
			}
			if err == nil && (y.Len() != z.Len() || !slices.Equal(y.vecs, z.vecs)) {
				t.Fatalf("held whole and read as it comes, the graphs differ")
			}
			if err == nil {
				q := make([]float32, y.dim)
				q[0] = 1
				if _, err := y.Search(q, Query{K: 3}); err != nil {
					t.Fatalf("search a graph LoadBytes took: %v", err)
				}
			}
			x, err := Load(bytes.NewReader(in), vector)
			if err != nil {
				continue
			}
			// A graph that loads is safe to use.
			q := make([]float32, x.dim)
			q[0] = 1
			for _, opts := range []Query{{K: 3}, {K: 3, Exact: true}, {K: 2, Filter: func(id int64) bool { return id%2 == 0 }}} {
				if _, err := x.Search(q, opts); err != nil {
					t.Fatalf("search a loaded graph: %v", err)
				}
			}
			for id := range int64(5) {
				if err := x.Add(id, q); err != nil {
					t.Fatalf("add to a loaded graph: %v", err)
				}
			}
			for id := range int64(50) {
				x.Remove(id)
			}
			if _, err := x.WriteTo(new(bytes.Buffer)); err != nil {
				t.Fatalf("save a loaded graph: %v", err)
			}
		}
	})
}

// fillServed is a LoadBytes fill giving the vectors vector serves, for the
// ids below 4096 (a fuzzed graph's others go without).
func fillServed(vector func(id int64) ([]float32, bool)) func(put func(id int64) []float32) bool {
	return func(put func(id int64) []float32) bool {
		for id := range int64(4096) {
			v, ok := vector(id)
			if !ok {
				continue
			}
			if dst := put(id); dst != nil {
				if len(dst) != len(v) {
					return false
				}
				copy(dst, v)
			}
		}
		return true
	}
}

// TestLoadedGraphGrows: a graph loaded into arrays large enough to be made
// for huge pages (its vectors past hugemem.Min) answers as the graph it was
// saved from, and still does after both take the same inserts, which grow
// the loaded arrays past what the load made.
func TestLoadedGraphGrows(t *testing.T) {
	hugemem.Advise(true)
	t.Cleanup(func() { hugemem.Advise(false) })
	const n, dim = 2100, 512 // vectors of 4.3 MB
	vs := randVecs(31, n+300, dim)
	cfg := Config{Dim: dim, Metric: Cosine, M: 8, EfConstruction: 32, EfSearch: 64}
	a := build(t, cfg, vs[:n])
	live := map[int64][]float32{}
	for i, v := range vs[:n] {
		live[int64(i)] = v
	}
	b, err := LoadBytes(save(t, a), fillFrom(live, -1))
	if err != nil {
		t.Fatal(err)
	}
	if got := cap(b.vecs) * 4; got < hugemem.Min {
		t.Fatalf("the loaded vectors take %d bytes, under hugemem.Min", got)
	}
	qs := randVecs(32, 5, dim)
	sameAnswers(t, a, b, qs)
	made := cap(b.vecs)
	for i, v := range vs[n:] {
		for _, x := range []*Index{a, b} {
			if err := x.Add(int64(n+i), v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if cap(b.vecs) == made {
		t.Fatalf("the inserts did not grow the loaded vectors (%d)", made)
	}
	sameAnswers(t, a, b, qs)
	sameAnswers(t, a, b, vs[n:n+5])
}
