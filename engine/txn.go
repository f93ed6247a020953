package engine

import (
	"fmt"
	"strings"
)

// state is a tenant's whole in-memory database: what an image holds.
type state struct {
	colls    map[string]*collection
	counters map[string]int64 // last id given per collection name; outlives drops
	rows     int64            // documents in collections not starting with "_"
	// dropped are collections dropped whose mappings (a table, graphs)
	// are let go of at the next checkpoint's fold or as the tenant closes,
	// when no block that dropped them can be undone.
	dropped []*collection
}

func newState() *state {
	return &state{colls: make(map[string]*collection), counters: make(map[string]int64)}
}

func serverColl(name string) bool { return strings.HasPrefix(name, "_") }

// txn is a block being run: every change is applied to the live state at
// once and remembered twice — as an op for the record, and as an undo step
// so a failed block leaves memory as it was. It runs under the write lock.
type txn struct {
	st   *state
	ops  []blockOp
	undo []func()
	now  int64 // ms, fixed for the block
	// addRows is the net rows the block adds to non-server collections.
	addRows int64
	replay  bool // applying records: no undo kept
	landed  bool // its record is in the file: never undone
}

// keeping says whether the block keeps undo steps and ops: not while
// replaying, where building them would only make garbage. Callers build
// their undo closures inside `if t.keeping()` so a replay allocates none.
func (t *txn) keeping() bool { return !t.replay }

func (t *txn) remember(f func()) { t.undo = append(t.undo, f) }

// record keeps an op for the block's record.
func (t *txn) record(o blockOp) {
	if t.keeping() {
		t.ops = append(t.ops, o)
	}
}

// rollback undoes every change in reverse order.
func (t *txn) rollback() {
	for i := len(t.undo) - 1; i >= 0; i-- {
		t.undo[i]()
	}
	t.undo = nil
	t.ops = nil
}

func (t *txn) countRows(c *collection, delta int64) {
	if serverColl(c.sch.Name) {
		return
	}
	t.st.rows += delta
	t.addRows += delta
	if t.keeping() {
		t.remember(func() { t.st.rows -= delta })
	}
}

// newID hands out the next id of coll.
func (t *txn) newID(name string) int64 {
	old := t.st.counters[name]
	t.st.counters[name] = old + 1
	if t.keeping() {
		t.remember(func() { t.st.counters[name] = old })
	}
	return old + 1
}

// seeID raises coll's counter past an id written explicitly.
func (t *txn) seeID(name string, id int64) {
	old := t.st.counters[name]
	if id > old {
		t.st.counters[name] = id
		if t.keeping() {
			t.remember(func() { t.st.counters[name] = old })
		}
	}
}

// put stores d in c, replacing the doc with its id; vals are its values
// when the caller has them decoded, else nil.
func (t *txn) put(c *collection, d *doc, vals []any) {
	t.seeID(c.sch.Name, d.id)
	old := c.set(d, vals)
	if old == nil {
		t.countRows(c, 1)
	}
	if t.keeping() {
		t.remember(func() {
			if old != nil {
				c.set(old, nil)
			} else {
				c.remove(d.id)
			}
		})
	}
	t.record(blockOp{kind: opPut, coll: c.sch.Name, id: d.id, doc: d, nvals: len(c.sch.Fields), sch: c.sch})
}

// del deletes id from c; it writes an op only when a doc was there.
func (t *txn) del(c *collection, id int64) bool {
	old := c.remove(id)
	if old == nil {
		return false
	}
	t.countRows(c, -1)
	if t.keeping() {
		t.remember(func() { c.set(old, nil) })
	}
	t.record(blockOp{kind: opDel, coll: c.sch.Name, id: id})
	return true
}

func (t *txn) createColl(s *schema) (*collection, error) {
	if _, ok := t.st.colls[s.Name]; ok {
		return nil, fmt.Errorf("%w: collection %s exists", ErrInvalid, s.Name)
	}
	c := newCollection(s)
	t.st.colls[s.Name] = c
	if t.keeping() {
		t.remember(func() { delete(t.st.colls, s.Name) })
	}
	t.record(blockOp{kind: opCreate, coll: s.Name, sch: s})
	return c, nil
}

func (t *txn) dropColl(name string) error {
	c, ok := t.st.colls[name]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownCollection, name)
	}
	delete(t.st.colls, name)
	t.countRows(c, -int64(c.len()))
	t.st.dropped = append(t.st.dropped, c)
	if t.keeping() {
		t.remember(func() {
			t.st.colls[name] = c
			t.st.dropped = t.st.dropped[:len(t.st.dropped)-1]
		})
	}
	t.record(blockOp{kind: opDrop, coll: name})
	return nil
}

// createIndex gives field f of c the annotations of spec and builds the
// indexes they ask for over the stored documents.
func (t *txn) createIndex(c *collection, spec fieldSpec) error {
	i := c.sch.field(spec.Name)
	if i < 0 {
		return fmt.Errorf("%w: %s in %s", ErrUnknownField, spec.Name, c.sch.Name)
	}
	if err := checkAnnotations(&spec); err != nil {
		return err
	}
	old := c.sch.Fields[i]
	if spec.Unique && !old.Unique {
		if err := uniqueOver(c, i); err != nil {
			return err
		}
	}
	hadH, hadS, hadX := c.hash[i] != nil, c.sorted[i] != nil, c.search[i] != nil
	c.sch.Fields[i] = spec
	c.addIndexes(i)
	// A new @hash, @sorted or @text index is built on its first use.
	if !hadX && c.search[i] != nil {
		fillSearch(c, i)
	}
	if t.keeping() {
		t.remember(func() {
			c.sch.Fields[i] = old
			if !hadH {
				c.hash[i] = nil
			}
			if !hadS {
				c.sorted[i] = nil
			}
			if !hadX {
				c.search[i] = nil
			}
		})
	}
	t.record(blockOp{kind: opIndex, coll: c.sch.Name, field: &spec})
	return nil
}

// uniqueOver refuses to make field i unique when two docs share a value.
func uniqueOver(c *collection, i int) error {
	seen := make(map[any]int64)
	var err error
	c.ascend(func(d *doc) bool {
		v := d.val(i)
		if v == nil {
			return true
		}
		if other, ok := seen[v]; ok {
			err = fmt.Errorf("%w: %s = %v held by ids %d and %d", ErrTaken, c.sch.Fields[i].Name, v, other, d.id)
			return false
		}
		seen[v] = d.id
		return true
	})
	return err
}

// fillSearch puts c's documents in field i's new search index; a text
// index is built on its first use instead (textIndex.index).
func fillSearch(c *collection, i int) {
	s := c.search[i]
	if _, ok := s.(*textIndex); ok {
		return
	}
	c.ascend(func(d *doc) bool {
		if v := d.val(i); v != nil {
			s.put(d.id, v)
		}
		return true
	})
}

// apply replays one decoded op (a record from the file or a primary).
func (t *txn) apply(o *blockOp) error {
	switch o.kind {
	case opPut:
		c := t.st.colls[o.coll]
		if c == nil {
			return fmt.Errorf("%w: %s", ErrUnknownCollection, o.coll)
		}
		if o.nvals != len(c.sch.Fields) {
			return fmt.Errorf("put into %s: %d values for %d fields", o.coll, o.nvals, len(c.sch.Fields))
		}
		if err := conforms(c.sch, o.doc.raw); err != nil {
			return fmt.Errorf("put into %s id %d: %w", o.coll, o.id, err)
		}
		t.put(c, o.doc, nil)
	case opDel:
		c := t.st.colls[o.coll]
		if c == nil {
			return fmt.Errorf("%w: %s", ErrUnknownCollection, o.coll)
		}
		if !t.del(c, o.id) {
			// A delete of a doc already gone still takes its seq.
			t.record(blockOp{kind: opDel, coll: o.coll, id: o.id})
		}
	case opCreate:
		_, err := t.createColl(o.sch)
		return err
	case opDrop:
		return t.dropColl(o.coll)
	case opIndex:
		c := t.st.colls[o.coll]
		if c == nil {
			return fmt.Errorf("%w: %s", ErrUnknownCollection, o.coll)
		}
		return t.createIndex(c, *o.field)
	default:
		return fmt.Errorf("unknown op %d", o.kind)
	}
	return nil
}
