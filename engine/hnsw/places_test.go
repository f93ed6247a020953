package hnsw

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"
)

// docBytes lays live's vectors out as documents' bytes would, each after
// a few bytes of its own (odd counts: some places are not aligned), and
// says where each one's numbers start.
func docBytes(live docVecs) ([]byte, map[int64]uint64) {
	var b []byte
	at := map[int64]uint64{}
	ids := slices.Sorted(func(yield func(int64) bool) {
		for id := range live {
			if !yield(id) {
				return
			}
		}
	})
	for _, id := range ids {
		b = append(b, make([]byte, 1+id%5)...)
		at[id] = uint64(len(b))
		for _, f := range live[id] {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
		}
	}
	return b, at
}

// saveWithPlaces writes x's head and a section placing each live vector
// in docs at at.
func saveWithPlaces(t *testing.T, x *Index, live docVecs, at map[int64]uint64) (head, section []byte) {
	t.Helper()
	var h, s bytes.Buffer
	if _, err := x.WriteHead(&h); err != nil {
		t.Fatal(err)
	}
	place := func(id int64) (uint64, bool) { p, ok := at[id]; return p, ok }
	if n, err := x.WriteSectionAt(&s, live.vector, place); err != nil || n != x.SectionLen() {
		t.Fatalf("write section: %d bytes (SectionLen %d), %v", n, x.SectionLen(), err)
	}
	return h.Bytes(), s.Bytes() // a buffer's bytes start at a multiple of 8, as a mapped section does
}

// A graph given its vectors by their places answers as the graph saved,
// without being given a vector by id; and reads them where they lie.
func TestAttachPlaces(t *testing.T) {
	for _, metric := range []Metric{Cosine, L2, Dot} {
		t.Run(metric.String(), func(t *testing.T) {
			x, live := churned(t, 1500, 16, metric)
			docs, at := docBytes(live)
			head, section := saveWithPlaces(t, x, live, at)
			y, err := LoadMapped(head, section, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := y.AttachPlaces(docs); err != nil {
				t.Fatalf("attach places: %v", err)
			}
			qs := randVecs(21, 30, 16)
			sameAnswers(t, x, y, qs)
			if !bytes.Equal(save(t, x), save(t, y)) {
				t.Fatal("the graph attached by places saves differently")
			}
			// It reads each vector in docs: change one there and the
			// graph's exact answer for it moves with it.
			var id int64
			for id = range live {
				break
			}
			p := at[id]
			for i := range 16 {
				binary.LittleEndian.PutUint32(docs[p+uint64(4*i):], math.Float32bits(float32(i+1)*100))
			}
			far := make([]float32, 16)
			for i := range far {
				far[i] = float32(i+1) * 100
			}
			hs := search(t, y, far, Query{K: 1, Exact: true})
			if metric != Dot && (len(hs) != 1 || hs[0].ID != id) {
				t.Fatalf("exact search for the vector changed in place found %v, want id %d", hs, id)
			}
		})
	}
}

// A place past the documents' bytes is refused before anything is taken;
// a section that places nothing (or was written without places) says so,
// and the graph still takes its vectors by id.
func TestAttachPlacesRefused(t *testing.T) {
	x, live := churned(t, 400, 8, Cosine)
	docs, at := docBytes(live)

	head, section := saveWithPlaces(t, x, live, at)
	y, err := LoadMapped(head, section, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := y.AttachPlaces(docs[:len(docs)-1]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("attach with the documents cut short: %v, want ErrCorrupt", err)
	}
	if _, err := y.Search(live[firstID(live)], Query{K: 3}); err == nil {
		t.Fatal("a graph refused its places serves searches")
	}
	if err := y.AttachPlaces(docs); err != nil {
		t.Fatalf("attach after a refusal: %v", err)
	}

	var h, s bytes.Buffer
	if _, err := x.WriteHead(&h); err != nil {
		t.Fatal(err)
	}
	if _, err := x.WriteSection(&s, docVecs(live).vector); err != nil {
		t.Fatal(err)
	}
	z, err := LoadMapped(h.Bytes(), s.Bytes(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := z.AttachPlaces(docs); !errors.Is(err, ErrNoPlaces) {
		t.Fatalf("attach of a section without places: %v, want ErrNoPlaces", err)
	}
	if err := z.AttachVectors(docVecs(live).all()); err != nil {
		t.Fatalf("attach by id after: %v", err)
	}
	sameAnswers(t, x, z, randVecs(5, 10, 8))
}

func firstID(live docVecs) int64 {
	for id := range live {
		return id
	}
	return 0
}
