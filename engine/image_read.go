package engine

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"slices"

	"github.com/fenec-go/fenec/engine/internal/hugemem"
)

// imageReader reads an image's state payload.
type imageReader struct {
	br  *bufio.Reader
	src io.Reader // what br reads: a store.MappedState when the file is mapped
	buf []byte
}

func (ir *imageReader) uvarint() (uint64, error) {
	x, err := binary.ReadUvarint(ir.br)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errShort, err)
	}
	return x, nil
}

// item reads a uvarint length and that many bytes (valid until the next call).
func (ir *imageReader) item() ([]byte, error) {
	n, err := ir.uvarint()
	if err != nil {
		return nil, err
	}
	if n > maxImageItem {
		return nil, fmt.Errorf("image item of %d bytes", n)
	}
	if n > itemTrust && uint64(cap(ir.buf)) < n {
		return ir.longItem(int(n))
	}
	if uint64(cap(ir.buf)) < n {
		ir.buf = make([]byte, n)
	}
	ir.buf = ir.buf[:n]
	if _, err := io.ReadFull(ir.br, ir.buf); err != nil {
		return nil, fmt.Errorf("%w: %v", errShort, err)
	}
	return ir.buf, nil
}

// itemGrowth bounds how far ahead of the bytes read the buffer of a long
// item grows.
const itemGrowth = 8

// longItem reads an item of n bytes, past itemTrust, into ir.buf. Its
// length is believed only as its bytes arrive: a damaged or cut-short
// image cannot make the reader allocate more than itemGrowth times what
// it holds. The buffer grows by that factor, not by doubling, and is made
// rather than appended to: memory fresh from the system is not cleared on
// allocation, so a graph's tens of megabytes are touched about once, as
// they are read (in huge pages where the system gives them), rather than
// cleared and copied at every doubling.
func (ir *imageReader) longItem(n int) ([]byte, error) {
	b := ir.buf[:0]
	for len(b) < n {
		if len(b) == cap(b) {
			nb := hugemem.Make[byte](len(b), min(n, max(itemTrust, itemGrowth*len(b))))
			copy(nb, b)
			b = nb
		}
		k, err := io.ReadFull(ir.br, b[len(b):min(n, cap(b))])
		b = b[:len(b)+k]
		if err != nil {
			return nil, fmt.Errorf("%w: an item of %d bytes ends after %d (%v)", errShort, n, len(b), err)
		}
	}
	ir.buf = b
	return b, nil
}

// readImage rebuilds a state from an image's payload. A state refused
// lets go of the mappings its graphs held.
func readImage(r io.Reader, logger *slog.Logger) (st *state, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if err != nil && st != nil {
			releaseMappings(st)
			st = nil
		}
	}()
	defer catchFault(&err) // before the release above: a fault is an error too
	return readImageState(r, logger)
}

// readImageState is readImage, returning with an error what it read so
// far, for readImage to let go of.
func readImageState(r io.Reader, logger *slog.Logger) (*state, error) {
	ir := &imageReader{br: bufio.NewReaderSize(r, 256<<10), src: r}
	magic := make([]byte, len(imageMagic))
	if _, err := io.ReadFull(ir.br, magic); err != nil {
		return nil, errors.New("image state: bad magic")
	}
	form, err := imageForm(string(magic))
	if err != nil {
		return nil, err
	}
	v1 := form == imageMagicV1
	st := newState()
	n, err := ir.uvarint()
	if err != nil {
		return st, err
	}
	for range n {
		name, err := ir.item()
		if err != nil {
			return st, err
		}
		key := string(name)
		id, err := binary.ReadVarint(ir.br)
		if err != nil {
			return st, fmt.Errorf("%w: counter", errShort)
		}
		st.counters[key] = id
	}
	if n, err = ir.uvarint(); err != nil {
		return st, err
	}
	for range n {
		if err := ir.readColl(st, form, logger); err != nil {
			return st, err
		}
	}
	if v1 {
		if err := ir.readGraphs(st, logger); err != nil {
			return st, err
		}
	}
	// Read to the state's end: an image whose last bytes are a section
	// has an end frame of no bytes still to come.
	if _, err := ir.br.ReadByte(); err != io.EOF {
		if err == nil {
			err = errors.New("bytes past the last collection")
		}
		return st, fmt.Errorf("image state: %w", err)
	}
	// Any graph missing or refused is built from the documents.
	for _, c := range st.colls {
		for i := range c.sch.Fields {
			if c.sch.Fields[i].HNSW != nil && c.search[i] == nil {
				c.search[i] = newSearchIndex(&c.sch.Fields[i])
				fillSearch(c, i)
			}
		}
	}
	return st, nil
}

// imageForm says which image format magic names: this one, an earlier
// one still read, or a later one (ErrNewerImage), or none.
func imageForm(magic string) (string, error) {
	switch {
	case magic == imageMagic || magic == imageMagicV5 || magic == imageMagicV4 || magic == imageMagicV3 || magic == imageMagicV2 || magic == imageMagicV1:
		return magic, nil
	case len(magic) == 4 && magic[:3] == "FNI" && magic[3] > imageMagic[3]:
		return "", fmt.Errorf("%w: image format %s, this fenec reads up to %s", ErrNewerImage, magic, imageMagic)
	}
	return "", errors.New("image state: bad magic")
}

// readColl reads a collection; of FNI2, its graphs first, the documents'
// vectors put in them as the documents come; of FNI4 and FNI3, its graphs first,
// whole.
func (ir *imageReader) readColl(st *state, form string, logger *slog.Logger) error {
	graphs := form != imageMagicV1
	raw, err := ir.item()
	if err != nil {
		return err
	}
	sch, err := (&decoder{b: raw}).schema()
	if err != nil {
		return fmt.Errorf("image schema: %w", err)
	}
	c := newCollection(sch)
	// Graphs are loaded, not built link by link as documents are set:
	// keep them aside (a field left without one is built at the end).
	for i, x := range c.search {
		if _, ok := x.(*vectorIndex); ok {
			c.search[i] = nil
		}
	}
	st.colls[sch.Name] = c
	var feed *graphFeed
	var mapped []loadedGraph // graphs that came whole (FNI4, FNI3), set once the documents are in
	if form == imageMagic || form == imageMagicV5 || form == imageMagicV4 || form == imageMagicV3 {
		var err error
		if mapped, err = ir.readCollSections(c, logger); err != nil {
			return err
		}
		defer func() {
			for _, g := range mapped { // not set: the documents failed
				g.x.Release()
			}
		}()
	} else if graphs {
		f, err := ir.readCollGraphs(c, logger)
		if f != nil {
			feed = f
			defer feed.stop()
		}
		if err != nil {
			return err
		}
	}
	docs, err := ir.uvarint()
	if err != nil {
		return err
	}
	if form == imageMagic || form == imageMagicV5 {
		err = ir.readDocTable(st, c, docs)
	} else {
		err = ir.readDocs(st, c, docs, feed)
	}
	if err != nil {
		return err
	}
	for _, g := range mapped {
		if err := attachGraph(c, g.field, g.x); err != nil {
			logger.Warn("graph did not load; rebuilding it", "collection", sch.Name,
				"field", sch.Fields[g.field].Name, "err", err)
			g.x.Release()
			continue
		}
		c.search[g.field] = newVectorIndex(g.x)
	}
	mapped = nil // each set or released
	if feed == nil {
		return nil
	}
	for _, g := range feed.finish() {
		x, err := g.l.Finish()
		if err != nil {
			logger.Warn("graph did not load; rebuilding it", "collection", sch.Name,
				"field", sch.Fields[g.field].Name, "err", err)
			continue
		}
		c.search[g.field] = newVectorIndex(x)
	}
	return nil
}

// readDocs reads n documents of collection c as images before FNI5 carry
// them, one at a time, each copied to memory (and, of FNI2, its vector
// given to feed).
func (ir *imageReader) readDocs(st *state, c *collection, docs uint64, feed *graphFeed) error {
	sch := c.sch
	// Ids come ascending, none past the collection's counter: a doc past
	// it would be overwritten by the next id handed out.
	prev, last := int64(0), st.counters[sch.Name]
	for range docs {
		raw, err := ir.item()
		if err != nil {
			return err
		}
		d := &decoder{b: raw}
		id := d.varint()
		nv := d.count(1)
		if d.err != nil {
			return fmt.Errorf("image doc of %s: %w", sch.Name, d.err)
		}
		if nv != len(sch.Fields) {
			return fmt.Errorf("image doc %d of %s: %d values for %d fields", id, sch.Name, nv, len(sch.Fields))
		}
		if id <= prev || id > last {
			return fmt.Errorf("image doc %d of %s: not after %d and within the last id given, %d", id, sch.Name, prev, last)
		}
		prev = id
		vals, rest, ok := rawSpan(d.b, nv)
		if !ok || len(rest) != 0 {
			return fmt.Errorf("image doc %d of %s: %w", id, sch.Name, errShort)
		}
		if err := conforms(sch, vals); err != nil {
			return fmt.Errorf("image doc %d of %s: %w", id, sch.Name, err)
		}
		kept := &doc{id: id, raw: slices.Clone(vals)}
		c.set(kept, nil)
		if !serverColl(sch.Name) {
			st.rows++
		}
		if feed != nil {
			feed.add(kept)
		}
	}
	return nil
}

// readDocTable reads the documents section of n documents of collection
// c (FNI5) and serves them from it, where the mapped file holds it.
func (ir *imageReader) readDocTable(st *state, c *collection, n uint64) error {
	section, hold, err := ir.section()
	if err != nil {
		return err
	}
	t, err := newDocTable(section, n, st.counters[c.sch.Name], hold)
	if err != nil {
		return fmt.Errorf("image documents of %s: %w", c.sch.Name, err)
	}
	c.base, c.n = t, t.n
	if !serverColl(c.sch.Name) {
		st.rows += int64(t.n)
	}
	return nil
}
