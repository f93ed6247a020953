package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fenec-go/fenec/engine/store"
)

func TestValueRoundTrip(t *testing.T) {
	for _, v := range []any{
		nil, true, false, int64(0), int64(-1), int64(math.MaxInt64), int64(math.MinInt64),
		0.5, math.Inf(1), "", "héllo\x00", []float32{1, -2.5, 3e-9},
		[]any{}, []any{int64(1), "a", nil, []any{true}},
		map[string]any{}, map[string]any{"b": int64(2), "a": map[string]any{"x": []any{1.5}}},
	} {
		b := appendValue(nil, v)
		if n := skipValue(b, 0); n != len(b) {
			t.Errorf("%#v: skipValue %d of %d", v, n, len(b))
		}
		d := &decoder{b: b}
		got := d.value(0)
		if d.err != nil || len(d.b) != 0 || !reflect.DeepEqual(got, v) {
			t.Errorf("%#v: got %#v, err %v, %d bytes left", v, got, d.err, len(d.b))
		}
		for cut := range b {
			d := &decoder{b: b[:cut]}
			d.value(0)
			if d.err == nil {
				t.Errorf("%#v cut at %d decoded", v, cut)
			}
			if skipValue(b[:cut], 0) >= 0 {
				t.Errorf("%#v cut at %d skipped", v, cut)
			}
		}
	}
}

func TestBlockRoundTrip(t *testing.T) {
	s, err := newSchema("c", []fieldSpec{
		{Name: "a", Type: fieldType{kind: tText}, Unique: true},
		{Name: "v", Type: fieldType{kind: tVector, dim: 2}, HNSW: &hnswSpec{Metric: "l2", M: 8, EfConstruction: 20, EfSearch: 10}},
		{Name: "t", Type: fieldType{kind: tTimestamp}, TTLms: 5000, Sorted: true},
		{Name: "x", Type: fieldType{kind: tText}, Text: true, TextK1: 1.2, TextB: 0.75},
	})
	if err != nil {
		t.Fatal(err)
	}
	ops := []blockOp{
		{kind: opCreate, coll: "c", sch: s},
		{kind: opPut, coll: "c", id: 1, nvals: 4, doc: &doc{id: 1, raw: encodeVals([]any{"x", []float32{1, 2}, int64(5), nil})}},
		{kind: opPut, coll: "c", id: 2, nvals: 4, doc: &doc{id: 2, raw: encodeVals([]any{nil, nil, nil, "hi"})}},
		{kind: opDel, coll: "c", id: 1},
		{kind: opIndex, coll: "c", field: &fieldSpec{Name: "x", Type: fieldType{kind: tText}, Hash: true}},
		{kind: opDrop, coll: "c"},
	}
	got, err := decodeBlock(encodeBlock(ops), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ops) {
		t.Fatalf("%d ops back", len(got))
	}
	for i := range ops {
		w, g := ops[i], got[i]
		if w.kind != g.kind || w.coll != g.coll || w.id != g.id || (w.field != nil && (w.field.Name != g.field.Name || w.field.Hash != g.field.Hash)) {
			t.Errorf("op %d: %+v, want %+v", i, g, w)
		}
		if w.doc != nil && !reflect.DeepEqual(w.doc.values(w.nvals), g.doc.values(g.nvals)) {
			t.Errorf("op %d doc: %#v, want %#v", i, g.doc.values(g.nvals), w.doc.values(w.nvals))
		}
	}
	if !reflect.DeepEqual(got[0].sch.Fields, s.Fields) {
		t.Errorf("schema: %+v, want %+v", got[0].sch.Fields, s.Fields)
	}
	enc := encodeBlock(ops)
	for cut := 1; cut < len(enc); cut++ {
		if ops, err := decodeBlock(enc[:cut], false); err == nil && len(ops) == len(got) {
			t.Fatalf("a block cut at %d decoded whole", cut)
		}
	}
}

// benchBlock is a block of 1 000 puts of a typical document.
func benchBlock() []blockOp {
	ops := make([]blockOp, 1000)
	for i := range ops {
		ops[i] = blockOp{kind: opPut, coll: "docs", id: int64(i + 1), nvals: 5, doc: &doc{id: int64(i + 1), raw: encodeVals([]any{
			fmt.Sprintf("user-%d", i), int64(i * 7919 % 1_000_000), fmt.Sprintf("t%d", i%50), 0.123456, strings.Repeat("lorem ipsum ", 8),
		})}}
	}
	return ops
}

// BenchmarkBlockEncoding compares the binary block payload with JSON of
// the same documents (what it would cost to log them as JSON).
func BenchmarkBlockEncoding(b *testing.B) {
	ops := benchBlock()
	names := []string{"name", "n", "tag", "score", "body"}
	b.Run("binary", func(b *testing.B) {
		var n int
		for b.Loop() {
			n = len(encodeBlock(ops))
		}
		b.ReportMetric(float64(n)/float64(len(ops)), "bytes/doc")
	})
	b.Run("json", func(b *testing.B) {
		var n int
		for b.Loop() {
			docs := make([]map[string]any, len(ops))
			for i, o := range ops {
				m := map[string]any{"id": o.doc.id}
				for j, v := range o.doc.values(o.nvals) {
					m[names[j]] = v
				}
				docs[i] = m
			}
			out, _ := json.Marshal(map[string]any{"coll": "docs", "put": docs})
			n = len(out)
		}
		b.ReportMetric(float64(n)/float64(len(ops)), "bytes/doc")
	})
	enc := encodeBlock(ops)
	b.Run("binary-decode", func(b *testing.B) {
		for b.Loop() {
			if _, err := decodeBlock(enc, false); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A block that decodes but puts a value of another type than its field's
// (a vector into an indexed text field, text into an int, a vector of the
// wrong length, a list of the wrong element type) is refused whole, before
// any index sees the value: replaying it must not panic or store it.
func TestReplayRefusesValueOfAnotherType(t *testing.T) {
	s, err := newSchema("c", []fieldSpec{
		{Name: "a", Type: fieldType{kind: tText}, Unique: true},
		{Name: "n", Type: fieldType{kind: tInt}, Sorted: true},
		{Name: "v", Type: fieldType{kind: tVector, dim: 2}},
		{Name: "l", Type: fieldType{kind: tListInt}},
	})
	if err != nil {
		t.Fatal(err)
	}
	good := []any{"x", int64(5), []float32{1, 2}, []any{int64(1)}}
	for name, vals := range map[string][]any{
		"vector in text":    {[]float32{1}, int64(5), nil, nil},
		"text in int":       {"x", "5", nil, nil},
		"float in int":      {"x", 5.5, nil, nil},
		"vector of 3 for 2": {"x", int64(5), []float32{1, 2, 3}, nil},
		"text in list int":  {"x", int64(5), nil, []any{"1"}},
		"map in text":       {map[string]any{"k": "v"}, int64(5), nil, nil},
	} {
		for _, replay := range []bool{true, false} {
			p := encodeBlock([]blockOp{
				{kind: opCreate, coll: "c", sch: s},
				{kind: opPut, coll: "c", id: 1, nvals: 4, doc: &doc{id: 1, raw: encodeVals(good)}},
				{kind: opPut, coll: "c", id: 2, nvals: 4, doc: &doc{id: 2, raw: encodeVals(vals)}},
			})
			tx := &txn{st: newState(), replay: replay}
			if err := applyBody(tx, p, 3, replay, new(blockOp)); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s (replay %v): applied with %v, want ErrInvalid", name, replay, err)
			}
		}
	}
	// The good document alone applies.
	p := encodeBlock([]blockOp{
		{kind: opCreate, coll: "c", sch: s},
		{kind: opPut, coll: "c", id: 1, nvals: 4, doc: &doc{id: 1, raw: encodeVals(good)}},
	})
	if err := applyBody(&txn{st: newState()}, p, 2, false, new(blockOp)); err != nil {
		t.Fatalf("the good block: %v", err)
	}
}

// FuzzDecodeBlock feeds arbitrary payloads to the block decoder and
// applies what decodes to a small state: errors, never panics.
func FuzzDecodeBlock(f *testing.F) {
	s, _ := newSchema("c", []fieldSpec{{Name: "a", Type: fieldType{kind: tText}, Unique: true}, {Name: "n", Type: fieldType{kind: tInt}, Sorted: true}})
	f.Add(encodeBlock([]blockOp{
		{kind: opCreate, coll: "c", sch: s},
		{kind: opPut, coll: "c", id: 1, nvals: 2, doc: &doc{id: 1, raw: encodeVals([]any{"x", int64(5)})}},
		{kind: opDel, coll: "c", id: 1},
	}))
	f.Fuzz(func(t *testing.T, p []byte) {
		// Replay's path: ops applied as they decode, pointing into p.
		_ = applyBody(&txn{st: newState(), replay: true}, slices.Clone(p), 3, true, new(blockOp))
		ops, err := decodeBlock(p, false)
		if err != nil {
			return
		}
		tx := &txn{st: newState()}
		for i := range ops {
			if tx.apply(&ops[i]) != nil {
				tx.rollback()
				return
			}
		}
		for _, c := range tx.st.colls {
			c.ascend(func(d *doc) bool {
				_ = c.row(d)
				return true
			})
		}
	})
}

// A record the store lends on replay (Borrowed: it lies in the mapped
// file, unmapped once the open ends) is copied from, never pointed into:
// what the documents hold survives the body being written over.
func TestReplayCopiesBorrowedBodies(t *testing.T) {
	s, err := newSchema("c", []fieldSpec{
		{Name: "a", Type: fieldType{kind: tText}, Hash: true},
		{Name: "n", Type: fieldType{kind: tInt}, Sorted: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	body := encodeBlock([]blockOp{
		{kind: opCreate, coll: "c", sch: s},
		{kind: opPut, coll: "c", id: 1, nvals: 2, doc: &doc{id: 1, raw: encodeVals([]any{"kept", int64(7)})}},
	})
	for _, borrowed := range []bool{true, false} {
		db := &DB{st: newState()}
		b := slices.Clone(body)
		rec := store.Record{Kind: kindBlock, First: 1, Last: 2, Body: b, Borrowed: borrowed}
		if err := db.replayer().Record(rec); err != nil {
			t.Fatalf("borrowed %v: %v", borrowed, err)
		}
		if !borrowed {
			continue // the body is the documents' to keep: nothing to check
		}
		for i := range b {
			b[i] = 0xff
		}
		d := db.st.colls["c"].get(1)
		if d == nil {
			t.Fatal("doc 1 not replayed")
		}
		if got := d.values(2); !reflect.DeepEqual(got, []any{"kept", int64(7)}) {
			t.Fatalf("doc after its borrowed body changed: %#v", got)
		}
	}
}

// A vector's numbers are copied as bytes where the machine is little
// endian: the bytes written and the numbers read back are those of the
// number-at-a-time code, bit for bit (NaN payloads, -0 and infinities
// among them), at any length and from a source at any offset.
func TestFloat32sCopyAsEachNumber(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{0, 1, 3, 128, 1000} {
		v := make([]float32, n)
		for i := range v {
			v[i] = math.Float32frombits(rng.Uint32())
		}
		if n > 3 {
			v[0], v[1], v[2] = float32(math.Inf(-1)), float32(math.Copysign(0, -1)), math.Float32frombits(0x7fc00001)
		}
		for off := range 4 {
			pre := make([]byte, off)
			got, want := appendFloat32s(pre, v), appendFloat32sEach(pre, v)
			if !bytes.Equal(got, want) {
				t.Fatalf("%d numbers after %d bytes: written differently", n, off)
			}
			back, each := make([]float32, n), make([]float32, n)
			getFloat32s(back, got[off:])
			getFloat32sEach(each, got[off:])
			for i := range v {
				if math.Float32bits(back[i]) != math.Float32bits(v[i]) || math.Float32bits(each[i]) != math.Float32bits(v[i]) {
					t.Fatalf("%d numbers after %d bytes: number %d read back as %x and %x, was %x", n, off, i,
						math.Float32bits(back[i]), math.Float32bits(each[i]), math.Float32bits(v[i]))
				}
			}
		}
	}
}
