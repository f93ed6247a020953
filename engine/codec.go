package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"unsafe"
)

// The binary encoding of values, schemas and a block's operations.
// Values: a tag byte, then the value.
const (
	vNull byte = iota
	vFalse
	vTrue
	vInt    // zigzag varint
	vFloat  // 8 bytes little endian
	vString // uvarint length, bytes
	vVector // uvarint n, n × 4 bytes
	vList   // uvarint n, values
	vMap    // uvarint n, (string key, value) sorted by key
)

// errShort is a payload that ends before its encoding says it does.
var errShort = errors.New("payload cut short")

// maxDecodeDepth bounds nesting when decoding values.
const maxDecodeDepth = 80

func appendUvarint(b []byte, x uint64) []byte { return binary.AppendUvarint(b, x) }
func appendVarint(b []byte, x int64) []byte   { return binary.AppendVarint(b, x) }

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendValue(b []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, vNull)
	case bool:
		if x {
			return append(b, vTrue)
		}
		return append(b, vFalse)
	case int64:
		return binary.AppendVarint(append(b, vInt), x)
	case float64:
		return binary.LittleEndian.AppendUint64(append(b, vFloat), math.Float64bits(x))
	case string:
		return appendString(append(b, vString), x)
	case []float32:
		b = binary.AppendUvarint(append(b, vVector), uint64(len(x)))
		return appendFloat32s(b, x)
	case []any:
		b = binary.AppendUvarint(append(b, vList), uint64(len(x)))
		for _, e := range x {
			b = appendValue(b, e)
		}
		return b
	case map[string]any:
		b = binary.AppendUvarint(append(b, vMap), uint64(len(x)))
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			b = appendString(b, k)
			b = appendValue(b, x[k])
		}
		return b
	}
	panic(fmt.Sprintf("engine: cannot encode %T", v))
}

// decoder reads the binary encoding from a byte slice. With alias set,
// strings it decodes point into b instead of copying it: only for bytes
// that never change (a stored document's raw values).
type decoder struct {
	b     []byte
	err   error
	alias bool
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.fail(errShort)
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	x, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[n:]
	return x
}

func (d *decoder) varint() int64 {
	x, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[n:]
	return x
}

// count reads a length and checks that at least min bytes per item remain.
func (d *decoder) count(min int) int {
	n := d.uvarint()
	if d.err != nil {
		return 0
	}
	if min < 1 {
		min = 1
	}
	if n > uint64(len(d.b)/min) {
		d.fail(errShort)
		return 0
	}
	return int(n)
}

func (d *decoder) string() string {
	n := d.count(1)
	if d.err != nil || n == 0 {
		return ""
	}
	var s string
	if d.alias {
		s = unsafe.String(&d.b[0], n)
	} else {
		s = string(d.b[:n])
	}
	d.b = d.b[n:]
	return s
}

func (d *decoder) u64() uint64 {
	if len(d.b) < 8 {
		d.fail(errShort)
		return 0
	}
	x := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return x
}

func (d *decoder) value(depth int) any {
	if depth > maxDecodeDepth {
		d.fail(errors.New("value nested too deep"))
		return nil
	}
	switch t := d.byte(); t {
	case vNull:
		return nil
	case vFalse:
		return false
	case vTrue:
		return true
	case vInt:
		return d.varint()
	case vFloat:
		return math.Float64frombits(d.u64())
	case vString:
		return d.string()
	case vVector:
		n := d.count(4)
		if d.err != nil {
			return nil
		}
		v := make([]float32, n)
		getFloat32s(v, d.b)
		d.b = d.b[4*n:]
		return v
	case vList:
		n := d.count(1)
		l := make([]any, n)
		for i := range l {
			l[i] = d.value(depth + 1)
		}
		if d.err != nil {
			return nil
		}
		return l
	case vMap:
		n := d.count(2)
		m := make(map[string]any, n)
		for range n {
			k := d.string()
			m[k] = d.value(depth + 1)
		}
		if d.err != nil {
			return nil
		}
		return m
	default:
		if d.err == nil {
			d.fail(fmt.Errorf("unknown value tag %d", t))
		}
		return nil
	}
}

// A stored document keeps its values encoded, one after another in field
// order (raw): far less memory than a slice of boxed values. Values are
// decoded when read; strings point into raw, which never changes.

// encodeVals encodes a document's values into a raw slice of its own.
func encodeVals(vals []any) []byte {
	var b []byte
	for _, v := range vals {
		b = appendValue(b, v)
	}
	return slices.Clip(b)
}

// skipValue returns how many bytes the value at the start of b takes, or
// -1 if b does not hold a whole value.
func skipValue(b []byte, depth int) int {
	if len(b) == 0 || depth > maxDecodeDepth {
		return -1
	}
	switch b[0] {
	case vNull, vFalse, vTrue:
		return 1
	case vInt:
		_, n := binary.Varint(b[1:])
		if n <= 0 {
			return -1
		}
		return 1 + n
	case vFloat:
		if len(b) < 9 {
			return -1
		}
		return 9
	case vString, vVector:
		x, n := binary.Uvarint(b[1:])
		size := uint64(1)
		if b[0] == vVector {
			size = 4
		}
		if n <= 0 || x > uint64(len(b))/size || 1+n+int(x*size) > len(b) {
			return -1
		}
		return 1 + n + int(x*size)
	case vList, vMap:
		x, n := binary.Uvarint(b[1:])
		if n <= 0 || x > uint64(len(b)) {
			return -1
		}
		off := 1 + n
		for range x {
			if b[0] == vMap {
				// A key: uvarint length, bytes.
				kl, kn := binary.Uvarint(b[off:])
				if kn <= 0 || kl > uint64(len(b)-off-kn) {
					return -1
				}
				off += kn + int(kl)
			}
			e := skipValue(b[off:], depth+1)
			if e < 0 {
				return -1
			}
			off += e
		}
		return off
	}
	return -1
}

// rawSpan returns the first n values of b and the bytes after them, or
// ok false if b does not hold n whole values.
func rawSpan(b []byte, n int) (raw, rest []byte, ok bool) {
	off := 0
	for range n {
		k := skipValue(b[off:], 0)
		if k < 0 {
			return nil, nil, false
		}
		off += k
	}
	return b[:off], b[off:], true
}

// val decodes value i of d.
func (d *doc) val(i int) any {
	b := d.raw
	for range i {
		k := skipValue(b, 0)
		if k < 0 {
			return nil
		}
		b = b[k:]
	}
	dec := decoder{b: b, alias: d.tab == nil} // a mapped doc's values are copied out
	return dec.value(0)
}

// littleEndian is whether this machine keeps a number's bytes as the
// encoding does, least significant first: a vector's encoded bytes are
// then its float32s as they lie in memory, and are copied as they are.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// getFloat32s decodes len(dst) float32s from b, which holds at least as
// many, little-endian: on such a machine a copy of their bytes (a tenth
// of the time of a number at a time, measured), else one at a time.
func getFloat32s(dst []float32, b []byte) {
	if littleEndian {
		copy(float32Bytes(dst), b[:4*len(dst)])
		return
	}
	getFloat32sEach(dst, b)
}

func getFloat32sEach(dst []float32, b []byte) {
	for j := range dst {
		dst[j] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:]))
	}
}

// appendFloat32s appends v to b, little-endian, as getFloat32s reads it.
func appendFloat32s(b []byte, v []float32) []byte {
	if littleEndian {
		return append(b, float32Bytes(v)...)
	}
	return appendFloat32sEach(b, v)
}

func appendFloat32sEach(b []byte, v []float32) []byte {
	for _, f := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return b
}

// float32Bytes is the memory of v as bytes.
func float32Bytes(v []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}

// values decodes all n values of d.
func (d *doc) values(n int) []any {
	out := make([]any, n)
	dec := decoder{b: d.raw, alias: d.tab == nil}
	for i := range out {
		out[i] = dec.value(0)
	}
	return out
}

// Schemas.
func appendSchema(b []byte, s *schema) []byte {
	b = appendString(b, s.Name)
	b = appendUvarint(b, uint64(len(s.Fields)))
	for i := range s.Fields {
		b = appendField(b, &s.Fields[i])
	}
	return b
}

const (
	fRequired = 1 << iota
	fHash
	fUnique
	fSorted
	fText
	fHNSW
	fTTL
)

func appendField(b []byte, f *fieldSpec) []byte {
	b = appendString(b, f.Name)
	b = append(b, byte(f.Type.kind))
	b = appendUvarint(b, uint64(f.Type.dim))
	var flags uint64
	for _, x := range []struct {
		on  bool
		bit uint64
	}{{f.Required, fRequired}, {f.Hash, fHash}, {f.Unique, fUnique}, {f.Sorted, fSorted},
		{f.Text, fText}, {f.HNSW != nil, fHNSW}, {f.TTLms > 0, fTTL}} {
		if x.on {
			flags |= x.bit
		}
	}
	b = appendUvarint(b, flags)
	if f.TTLms > 0 {
		b = appendVarint(b, f.TTLms)
	}
	if f.Text {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(f.TextK1))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(f.TextB))
	}
	if f.HNSW != nil {
		b = appendString(b, f.HNSW.Metric)
		b = appendUvarint(b, uint64(f.HNSW.M))
		b = appendUvarint(b, uint64(f.HNSW.EfConstruction))
		b = appendUvarint(b, uint64(f.HNSW.EfSearch))
	}
	return b
}

func (d *decoder) schema() (*schema, error) {
	name := d.string()
	n := d.count(4)
	fields := make([]fieldSpec, n)
	for i := range fields {
		fields[i] = d.field()
	}
	if d.err != nil {
		return nil, d.err
	}
	return newSchema(name, fields)
}

func (d *decoder) field() fieldSpec {
	var f fieldSpec
	f.Name = d.string()
	f.Type.kind = typeKind(d.byte())
	f.Type.dim = int(d.uvarint())
	flags := d.uvarint()
	f.Required = flags&fRequired != 0
	f.Hash = flags&fHash != 0
	f.Unique = flags&fUnique != 0
	f.Sorted = flags&fSorted != 0
	f.Text = flags&fText != 0
	if flags&fTTL != 0 {
		f.TTLms = d.varint()
	}
	if f.Text {
		f.TextK1 = math.Float64frombits(d.u64())
		f.TextB = math.Float64frombits(d.u64())
	}
	if flags&fHNSW != 0 {
		f.HNSW = &hnswSpec{Metric: d.string(), M: int(d.uvarint()),
			EfConstruction: int(d.uvarint()), EfSearch: int(d.uvarint())}
	}
	return f
}

// A block's operations, in the order they ran.
const (
	opUse    byte = iota + 1 // collection name: later puts and dels are in it
	opPut                    // id, n values
	opDel                    // id
	opCreate                 // schema
	opDrop                   // name
	opIndex                  // collection, field
)

// blockOp is one operation of a block. For opPut, doc is what was stored
// and nvals its number of values; for opIndex, field carries the field
// with its new annotations.
type blockOp struct {
	kind  byte
	coll  string
	id    int64
	doc   *doc
	nvals int
	sch   *schema
	field *fieldSpec
}

// encodeBlock is a block's record payload.
func encodeBlock(ops []blockOp) []byte {
	b := make([]byte, 0, 64*len(ops))
	b = append(b, 1) // payload version
	cur := ""
	use := func(name string) {
		if name != cur {
			b = append(b, opUse)
			b = appendString(b, name)
			cur = name
		}
	}
	for i := range ops {
		o := &ops[i]
		switch o.kind {
		case opPut:
			use(o.coll)
			b = append(b, opPut)
			b = appendVarint(b, o.doc.id)
			b = appendUvarint(b, uint64(o.nvals))
			b = append(b, o.doc.raw...)
		case opDel:
			use(o.coll)
			b = append(b, opDel)
			b = appendVarint(b, o.id)
		case opCreate:
			b = append(b, opCreate)
			b = appendSchema(b, o.sch)
		case opDrop:
			b = append(b, opDrop)
			b = appendString(b, o.coll)
		case opIndex:
			b = append(b, opIndex)
			b = appendString(b, o.coll)
			b = appendField(b, o.field)
		}
	}
	return b
}

// decodeBlock reads a block payload back into operations. Documents copy
// their bytes out of p, unless keep says p is the caller's to keep: then
// they point into it (a change cursor's records, read for the call).
func decodeBlock(p []byte, keep bool) ([]blockOp, error) {
	var ops []blockOp
	_, err := decodeOps(p, keep, new(blockOp), func(o *blockOp) error {
		ops = append(ops, *o)
		return nil
	})
	return ops, err
}

// decodeOps calls fn with each op of a block payload in turn, decoded
// into o (reused: fn must copy what it keeps), and returns how many there
// were.
func decodeOps(p []byte, keep bool, o *blockOp, fn func(*blockOp) error) (int, error) {
	d := &decoder{b: p}
	if v := d.byte(); d.err == nil && v != 1 {
		return 0, fmt.Errorf("block payload version %d", v)
	}
	n := 0
	cur := ""
	for d.err == nil && len(d.b) > 0 {
		*o = blockOp{}
		switch k := d.byte(); k {
		case opUse:
			cur = d.string()
			continue
		case opPut:
			id := d.varint()
			nv := d.count(1)
			raw, rest, ok := rawSpan(d.b, nv)
			if d.err == nil && !ok {
				d.fail(errShort)
			}
			if d.err != nil {
				continue
			}
			d.b = rest
			if !keep {
				raw = slices.Clone(raw)
			}
			*o = blockOp{kind: opPut, coll: cur, id: id, nvals: nv, doc: &doc{id: id, raw: slices.Clip(raw)}}
		case opDel:
			*o = blockOp{kind: opDel, coll: cur, id: d.varint()}
		case opCreate:
			s, err := d.schema()
			if err != nil {
				d.fail(err)
				continue
			}
			*o = blockOp{kind: opCreate, coll: s.Name, sch: s}
		case opDrop:
			*o = blockOp{kind: opDrop, coll: d.string()}
		case opIndex:
			coll := d.string()
			f := d.field()
			*o = blockOp{kind: opIndex, coll: coll, field: &f}
		default:
			d.fail(fmt.Errorf("unknown block op %d", k))
			continue
		}
		if d.err != nil {
			break
		}
		n++
		if err := fn(o); err != nil {
			return n, err
		}
	}
	if d.err != nil {
		return n, fmt.Errorf("decode block: %w", d.err)
	}
	return n, nil
}

// conforms checks that raw holds one value per field of s, each of the
// field's declared type (or null), so a record that decodes but does not
// fit its collection is refused before any index sees it. Replay and
// replication call it: the engine wrote what they read, but a file or a
// stream can be damaged in ways its checksum does not catch.
func conforms(s *schema, raw []byte) error {
	b := raw
	for i := range s.Fields {
		f := &s.Fields[i]
		k := skipValue(b, 0)
		if k < 0 {
			return fmt.Errorf("%w: value of field %s does not decode", ErrInvalid, f.Name)
		}
		if !tagFits(f.Type, b[:k]) {
			return fmt.Errorf("%w: field %s wants %s, the record holds value tag %d", ErrInvalid, f.Name, f.Type, b[0])
		}
		b = b[k:]
	}
	if len(b) != 0 {
		return fmt.Errorf("%w: %d bytes after the last field", ErrInvalid, len(b))
	}
	return nil
}

// tagFits says whether the encoded value v (one whole value) may be
// stored in a field of type t.
func tagFits(t fieldType, v []byte) bool {
	tag := v[0]
	if tag == vNull {
		return true
	}
	switch t.kind {
	case tBool:
		return tag == vFalse || tag == vTrue
	case tInt, tTimestamp:
		return tag == vInt
	case tFloat:
		return tag == vFloat
	case tText:
		return tag == vString
	case tJSON:
		return true
	case tVector:
		n, k := binary.Uvarint(v[1:])
		return tag == vVector && k > 0 && n == uint64(t.dim)
	case tListText, tListInt, tListFloat:
		if tag != vList {
			return false
		}
		want := map[typeKind]byte{tListText: vString, tListInt: vInt, tListFloat: vFloat}[t.kind]
		n, k := binary.Uvarint(v[1:])
		off := 1 + k
		for range n {
			e := skipValue(v[off:], 1)
			if e < 0 || v[off] != want {
				return false
			}
			off += e
		}
		return true
	}
	return false
}
