package engine

import (
	"fmt"
	"time"

	"github.com/fenec-go/fenec/engine/fql"
)

// runPut runs put (upsert), put ... if absent, and insert.
func (r *runner) runPut(coll string, docsExpr fql.Expr, ifAbsent, insert bool, req *int64) (*Result, error) {
	if err := r.needTxn(); err != nil {
		return nil, err
	}
	c, err := r.coll(coll)
	if err != nil {
		return nil, err
	}
	v, err := r.eval(docsExpr)
	if err != nil {
		return nil, err
	}
	objs, err := objects(v)
	if err != nil {
		return nil, err
	}
	res := &Result{Kind: ResultAffected, Write: true, IDs: make([]int64, 0, len(objs))}
	for i, o := range objs {
		// Between two documents (never inside one's write) a stopped
		// statement ends; the block undoes what it wrote.
		if r.stop.step() {
			return nil, r.stop.err
		}
		d, given, err := r.makeDoc(c, o)
		if err == nil {
			var stored *doc
			stored, err = r.putOne(c, d, given, ifAbsent, insert)
			if err == nil && stored != nil {
				res.Affected++
				res.IDs = append(res.IDs, stored.id)
			}
		}
		if err != nil {
			if len(objs) > 1 {
				err = fmt.Errorf("document %d of %d: %w", i+1, len(objs), err)
			}
			return nil, err
		}
	}
	if err := checkRequire(req, res.Affected); err != nil {
		return nil, err
	}
	return res, nil
}

// objects accepts an object or a list of objects.
func objects(v any) ([]map[string]any, error) {
	switch x := v.(type) {
	case map[string]any:
		return []map[string]any{x}, nil
	case []any:
		out := make([]map[string]any, len(x))
		for i, e := range x {
			m, ok := e.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%w: element %d is %s, not an object", ErrType, i, fql.TypeName(e))
			}
			out[i] = m
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: documents must be an object or a list of objects, got %s", ErrType, fql.TypeName(v))
}

// newDoc is a document being written: its values decoded, checked
// against the schema.
type newDoc struct {
	id   int64
	vals []any
}

// makeDoc type-checks an object against c's schema. The id is 0 (and
// given false) when the object has none.
func (r *runner) makeDoc(c *collection, o map[string]any) (*newDoc, bool, error) {
	d := &newDoc{vals: make([]any, len(c.sch.Fields))}
	given := false
	for k, v := range o {
		if k == "id" {
			key, ok := keyFor(tInt, v)
			id, _ := key.(int64)
			if !ok {
				return nil, false, fmt.Errorf("%w: id must be a positive int, got %s", ErrType, fql.TypeName(v))
			}
			if id < 1 {
				return nil, false, fmt.Errorf("%w: id must be a positive int, got %d", ErrType, id)
			}
			d.id, given = id, true
			continue
		}
		i := c.sch.field(k)
		if i < 0 {
			return nil, false, fmt.Errorf("%w: %s in %s", ErrUnknownField, k, c.sch.Name)
		}
		// The value is encoded as it is stored, so it shares nothing
		// with the caller's.
		cv, err := c.sch.Fields[i].checkValue(v)
		if err != nil {
			return nil, false, err
		}
		d.vals[i] = cv
	}
	if err := checkRequired(c, d); err != nil {
		return nil, false, err
	}
	return d, given, nil
}

func checkRequired(c *collection, d *newDoc) error {
	for i := range c.sch.Fields {
		if c.sch.Fields[i].Required && d.vals[i] == nil {
			return fmt.Errorf("%w: field %s of %s is required", ErrType, c.sch.Fields[i].Name, c.sch.Name)
		}
	}
	return nil
}

// putOne writes one document and returns it as stored (nil when an if
// absent skipped it).
func (r *runner) putOne(c *collection, d *newDoc, given, ifAbsent, insert bool) (*doc, error) {
	if given {
		if old := c.get(d.id); old != nil {
			if r.visible(c, old) {
				if ifAbsent {
					return nil, nil
				}
				if insert {
					return nil, fmt.Errorf("%w: id %d in %s", ErrTaken, d.id, c.sch.Name)
				}
			}
		}
	}
	for i := range c.sch.Fields {
		if !c.sch.Fields[i].Unique || d.vals[i] == nil {
			continue
		}
		holder, ok := c.uniqueHolder(i, d.vals[i], d.id)
		if !ok || (given && holder == d.id) {
			continue
		}
		if h := c.get(holder); h != nil && !r.visible(c, h) {
			// An expired row gives its value up: delete it now, as the
			// sweeper would have.
			r.t.del(c, holder)
			continue
		}
		if ifAbsent {
			return nil, nil
		}
		return nil, fmt.Errorf("%w: %s = %s in %s", ErrTaken, c.sch.Fields[i].Name, shortValue(d.vals[i]), c.sch.Name)
	}
	if !given {
		d.id = r.t.newID(c.sch.Name)
	}
	stored := &doc{id: d.id, raw: encodeVals(d.vals)}
	r.t.put(c, stored, d.vals)
	return stored, nil
}

func shortValue(v any) string {
	s := fmt.Sprint(v)
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return s
}

// visible says whether d is live: no @ttl field of it has expired.
func (r *runner) visible(c *collection, d *doc) bool {
	for i := range c.sch.Fields {
		ttl := c.sch.Fields[i].TTLms
		if ttl == 0 {
			continue
		}
		if t, ok := d.val(i).(int64); ok && t+ttl <= r.now {
			return false
		}
	}
	return true
}

func (r *runner) runSet(s *fql.Set) (*Result, error) {
	if err := r.needTxn(); err != nil {
		return nil, err
	}
	c, err := r.coll(s.Coll)
	if err != nil {
		return nil, err
	}
	pos := make([]int, len(s.Assigns))
	for j, a := range s.Assigns {
		if a.Field == "id" {
			return nil, fmt.Errorf("%w: id cannot be set", ErrInvalid)
		}
		if pos[j] = c.sch.field(a.Field); pos[j] < 0 {
			return nil, fmt.Errorf("%w: %s in %s", ErrUnknownField, a.Field, s.Coll)
		}
		if err := checkFields(c, a.Value); err != nil {
			return nil, err
		}
	}
	if err := r.checkCompared(c, s.Where); err != nil {
		return nil, err
	}
	docs, err := r.selectDocs(c, s.Where, s.Order, limitOf(s.Limit), 0)
	if err != nil {
		return nil, err
	}
	res := &Result{Kind: ResultAffected, Write: true}
	var written []*doc
	for _, old := range docs {
		if r.stop.step() {
			return nil, r.stop.err
		}
		d, err := r.assign(c, old, s.Assigns, pos)
		if err != nil {
			return nil, err
		}
		stored, err := r.putOne(c, d, true, false, false)
		if err != nil {
			return nil, err
		}
		written = append(written, stored)
	}
	res.Affected = int64(len(written))
	if err := checkRequire(s.Require, res.Affected); err != nil {
		return nil, err
	}
	if err := r.finishWrite(res, c, s.Where, s.Returning, written); err != nil {
		return nil, err
	}
	return res, nil
}

// assign builds the new version of old: values evaluated against old.
func (r *runner) assign(c *collection, old *doc, as []fql.Assign, pos []int) (*newDoc, error) {
	d := &newDoc{id: old.id, vals: old.values(len(c.sch.Fields))}
	env := &rowEnv{r: r, c: c, d: old}
	for j, a := range as {
		v, err := fql.Eval(a.Value, env)
		if err != nil {
			return nil, evalErr(err)
		}
		cv, err := c.sch.Fields[pos[j]].checkValue(v)
		if err != nil {
			return nil, err
		}
		d.vals[pos[j]] = cv
	}
	if err := checkRequired(c, d); err != nil {
		return nil, err
	}
	return d, nil
}

func (r *runner) runDel(s *fql.Del) (*Result, error) {
	if err := r.needTxn(); err != nil {
		return nil, err
	}
	c, err := r.coll(s.Coll)
	if err != nil {
		return nil, err
	}
	if err := r.checkCompared(c, s.Where); err != nil {
		return nil, err
	}
	docs, err := r.selectDocs(c, s.Where, s.Order, limitOf(s.Limit), 0)
	if err != nil {
		return nil, err
	}
	for _, d := range docs {
		if r.stop.step() {
			return nil, r.stop.err
		}
		r.t.del(c, d.id)
	}
	res := &Result{Kind: ResultAffected, Write: true, Affected: int64(len(docs))}
	if err := checkRequire(s.Require, res.Affected); err != nil {
		return nil, err
	}
	if err := r.finishWrite(res, c, s.Where, s.Returning, docs); err != nil {
		return nil, err
	}
	return res, nil
}

// finishWrite fills returning rows (each charged), and Claim and WakeAt
// for a statement that took nothing.
func (r *runner) finishWrite(res *Result, c *collection, where fql.Expr, ret *fql.Returning, docs []*doc) error {
	if ret != nil {
		res.Kind = ResultRows
		res.Rows = make([]Row, 0, len(docs))
		for _, d := range docs {
			row := returningRow(c, d, ret)
			if err := r.chargeRow(row); err != nil {
				return err
			}
			res.Rows = append(res.Rows, row)
		}
	}
	if res.Affected == 0 {
		res.Claim = true
		if ms := r.wakeAt(c, where); ms > 0 {
			res.WakeAt = time.UnixMilli(ms)
		}
	}
	return nil
}

func returningRow(c *collection, d *doc, ret *fql.Returning) Row {
	if ret.Star {
		return c.row(d)
	}
	env := &rowEnv{c: c, d: d}
	row := make(Row, len(ret.Fields))
	for _, p := range ret.Fields {
		v, _ := env.Field(p)
		row[p.String()] = v
	}
	return row
}

func limitOf(l *int64) int64 {
	if l == nil {
		return -1
	}
	return *l
}

// wakeAt is the next moment (ms, 0 if none) a now()-based condition of
// where, or a @ttl expiry in c, could change what a statement takes. It
// looks at every row: for each comparison with now() on one side, the
// time at which that side passes the other side's value for the row, if
// the whole clause takes the row at that time. (A comparison whose
// now() side is not now() plus a constant gives a guess, checked the
// same way.)
func (r *runner) wakeAt(c *collection, where fql.Expr) int64 {
	w := &waker{r: r, c: c, where: where}
	for i := range c.sch.Fields {
		if ttl := c.sch.Fields[i].TTLms; ttl > 0 && c.sorted[i] != nil {
			c.sortedOf(i).scan(bound{key: r.now - ttl, set: true}, bound{}, false, func(k sortKey, _ int64) bool {
				w.consider(k.i + ttl)
				return false
			})
		}
	}
	var scan []*fql.Binary
	walkExpr(where, func(e fql.Expr) {
		b, ok := e.(*fql.Binary)
		if !ok {
			return
		}
		switch b.Op {
		case fql.OpEq, fql.OpNe, fql.OpLt, fql.OpLe, fql.OpGt, fql.OpGe:
			if usesNow(b.L) != usesNow(b.R) && !w.indexed(b) {
				scan = append(scan, b)
			}
		}
	})
	if len(scan) > 0 {
		c.ascend(func(d *doc) bool {
			if r.stop.step() {
				return false // run checks the stop as the statement ends
			}
			for _, b := range scan {
				w.row(b, d)
			}
			return true
		})
	}
	return w.best
}

// waker finds the earliest time a claim's clause takes a row.
type waker struct {
	r     *runner
	c     *collection
	where fql.Expr
	best  int64 // ms; 0 while none is found
}

func (w *waker) consider(t int64) {
	if t > w.r.now && (w.best == 0 || t < w.best) {
		w.best = t
	}
}

// sides splits a comparison into its now() side and the other.
func sides(b *fql.Binary) (timeSide, other fql.Expr) {
	if usesNow(b.R) {
		return b.R, b.L
	}
	return b.L, b.R
}

// offset is the now() side's value at now = 0 (now() + c gives c).
func (w *waker) offset(timeSide fql.Expr, d *doc) (int64, bool) {
	zero := &runner{st: w.r.st, params: w.r.params, now: 0}
	v, err := fql.Eval(timeSide, &rowEnv{r: zero, c: w.c, d: d})
	if err != nil {
		return 0, false
	}
	return asMillis(v)
}

// try counts time t if the clause takes d then; it says whether it did.
func (w *waker) try(t int64, d *doc) bool {
	if t <= w.r.now || (w.best != 0 && t >= w.best) {
		return false
	}
	at := &runner{st: w.r.st, params: w.r.params, now: t}
	if ok, err := at.matches(w.c, d, w.where); err == nil && ok {
		w.best = t
		return true
	}
	return false
}

// row tries the times at which comparison b flips for d: v-o or just
// after, v the other side's value and o the now() side's offset.
func (w *waker) row(b *fql.Binary, d *doc) {
	timeSide, other := sides(b)
	o, ok1 := w.offset(timeSide, d)
	val, err := fql.Eval(other, &rowEnv{r: w.r, c: w.c, d: d})
	v, ok2 := asMillis(val)
	if !ok1 || !ok2 || err != nil {
		return
	}
	if !w.try(v-o, d) {
		w.try(v-o+1, d)
	}
}

// indexed walks a @sorted field's index for a comparison of that field
// with a now() side that reads no field: flip times come in key order, so
// the first row the clause takes is the earliest. It says whether it
// could (false: the caller scans).
func (w *waker) indexed(b *fql.Binary) bool {
	timeSide, other := sides(b)
	fi, ok := fieldOf(w.c, other)
	if !ok || fi < 0 || w.c.sorted[fi] == nil || !isConst(timeSide) {
		return false
	}
	o, ok := w.offset(timeSide, nil)
	if !ok {
		return false
	}
	w.c.sortedOf(fi).scan(bound{key: w.r.now + o, set: true, inclusive: true}, bound{}, false, func(k sortKey, id int64) bool {
		v, ok := asMillis(k.value())
		if !ok {
			return true
		}
		if w.best != 0 && v-o >= w.best {
			return false
		}
		d := w.c.get(id)
		return !(w.try(v-o, d) || w.try(v-o+1, d))
	})
	return true
}

func asMillis(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case float64:
		return int64(x), true
	}
	return 0, false
}
