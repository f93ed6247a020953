package engine

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/fenec-go/fenec/engine/fql"
)

// The planner picks, for a where clause, the most selective conjunct an
// index can answer (= and in on id, @hash, @unique or @sorted; ranges on
// id or @sorted) and scans the collection otherwise. An index only narrows
// the candidates: every candidate is still checked against the whole
// clause, so an answer never depends on which index was used.

// access is a way to reach candidate documents.
type access struct {
	cost  int
	ids   []int64 // candidates, in no particular order; nil with scan
	scan  bool
	field int // for a range: the field (-1 id)
	lo    bound
	hi    bound
	// exact: the candidates are exactly the documents the conjuncts this
	// access answers (used of them) match, before @ttl.
	exact bool
	used  int
}

// conjuncts splits a clause on its top-level ands.
func conjuncts(x fql.Expr, out []fql.Expr) []fql.Expr {
	if b, ok := x.(*fql.Binary); ok && b.Op == fql.OpAnd {
		return conjuncts(b.R, conjuncts(b.L, out))
	}
	if x != nil {
		out = append(out, x)
	}
	return out
}

// fieldOf returns the top-level field a simple operand names ("id" → -1).
func fieldOf(c *collection, x fql.Expr) (int, bool) {
	f, ok := x.(*fql.Field)
	if !ok || len(f.Path) != 1 {
		return 0, false
	}
	if f.Path[0] == "id" {
		return -1, true
	}
	i := c.sch.field(f.Path[0])
	return i, i >= 0
}

// checkCompared refuses a where clause that compares a declared bool,
// number, timestamp or text field with a constant of another kind (n >
// "abc" on an int field, name = 5 on a text one), in = < <= > >= != or in,
// or asks has of a typed list with an element of another kind. Such a
// comparison is never true, so a clause holding it would answer no rows
// with no word of why; it is ErrType, naming the field, its type and the
// value. A null constant, a json field and a field inside a json one are
// left alone: they may hold anything.
func (r *runner) checkCompared(c *collection, x fql.Expr) error {
	var err error
	walkExpr(x, func(e fql.Expr) {
		if err != nil {
			return
		}
		switch e := e.(type) {
		case *fql.Binary:
			if e.Op < fql.OpEq || e.Op > fql.OpHas {
				return
			}
			fi, ok := fieldOf(c, e.L)
			val, op := e.R, e.Op
			if !ok || !isConst(e.R) {
				if fi, ok = fieldOf(c, e.R); !ok || !isConst(e.L) || e.Op == fql.OpHas {
					return
				}
				val, op = e.L, flip(e.Op)
			}
			how := asValue
			if op == fql.OpHas {
				how = asElement
			}
			err = r.comparable(c, fi, how, val)
		case *fql.In:
			if fi, ok := fieldOf(c, e.X); ok && isConst(e.Set) {
				err = r.comparable(c, fi, asCandidates, e.Set)
			}
		}
	})
	return err
}

// compareHow is what a constant is to the field it is compared with.
type compareHow int

const (
	asValue      compareHow = iota // = != < <= > >=: a value of the field
	asElement                      // has: an element of the field's list
	asCandidates                   // in: a list of values of the field
)

// comparable checks constant x against field fi, as how says.
func (r *runner) comparable(c *collection, fi int, how compareHow, x fql.Expr) error {
	if fi < 0 {
		return nil // id: compared as a number by the planner and the scan alike
	}
	v, err := r.eval(x)
	if err != nil {
		return nil // the scan reports it as it evaluates
	}
	f := &c.sch.Fields[fi]
	kind := f.Type.kind
	vals := []any{v}
	switch how {
	case asElement:
		switch kind {
		case tListText:
			kind = tText
		case tListInt:
			kind = tInt
		case tListFloat:
			kind = tFloat
		default:
			return nil // has of a field that is no typed list: the scan says what it makes of it
		}
	case asCandidates:
		l, ok := v.([]any)
		if !ok {
			return nil // the scan says what in makes of a set that is no list
		}
		vals = l
	}
	for _, v := range vals {
		if v == nil || kindTakes(kind, v) {
			continue
		}
		shown, _ := json.Marshal(v)
		want := "give a value of type " + f.Type.String()
		if kind == tText {
			quoted, _ := json.Marshal(string(shown))
			want = "to compare it as text, quote it: " + string(quoted)
		}
		return fmt.Errorf("%w: field %s is %s and %s is %s, which no %s value equals or orders against, so nothing would match; %s",
			ErrType, f.Name, f.Type, shown, fql.TypeName(v), f.Type, want)
	}
	return nil
}

// kindTakes reports whether a value v can be compared with a field of
// kind k; kinds with no scalar value (json, vectors, lists) take anything.
func kindTakes(k typeKind, v any) bool {
	switch k {
	case tBool:
		_, ok := v.(bool)
		return ok
	case tInt, tFloat, tTimestamp:
		switch v.(type) {
		case int64, float64:
			return true
		}
		return false
	case tText:
		_, ok := v.(string)
		return ok
	}
	return true
}

func flip(op fql.BinaryOp) fql.BinaryOp {
	switch op {
	case fql.OpLt:
		return fql.OpGt
	case fql.OpLe:
		return fql.OpGe
	case fql.OpGt:
		return fql.OpLt
	case fql.OpGe:
		return fql.OpLe
	}
	return op
}

// plan chooses how to reach the documents where may match.
func (r *runner) plan(c *collection, where fql.Expr) access {
	best := access{cost: c.len(), scan: true}
	ranges := map[int]*access{}
	cjs := conjuncts(where, nil)
	for _, cj := range cjs {
		var a access
		var ok bool
		switch e := cj.(type) {
		case *fql.Binary:
			a, ok = r.planBinary(c, e, ranges)
		case *fql.In:
			a, ok = r.planIn(c, e)
		}
		if ok && a.cost < best.cost {
			best = a
		}
	}
	for fi, a := range ranges {
		a.cost = r.rangeCount(c, fi, a.lo, a.hi, best.cost)
		if a.cost < best.cost || (a.cost == best.cost && best.scan) {
			best = *a
			best.ids = r.rangeIDs(c, fi, a.lo, a.hi)
		}
	}
	best.exact = best.exact && best.used == len(cjs)
	return best
}

// planBinary plans one comparison of a field with a constant: = gives an
// access at once; a range narrows the field's entry in ranges.
func (r *runner) planBinary(c *collection, e *fql.Binary, ranges map[int]*access) (access, bool) {
	fi, fok := fieldOf(c, e.L)
	val, op := e.R, e.Op
	if !fok || !isConst(e.R) {
		if fi, fok = fieldOf(c, e.R); !fok || !isConst(e.L) {
			return access{}, false
		}
		val, op = e.L, flip(e.Op)
	}
	v, err := r.eval(val)
	if err != nil {
		return access{}, false
	}
	switch op {
	case fql.OpEq:
		return r.eqAccess(c, fi, []any{v})
	case fql.OpLt, fql.OpLe, fql.OpGt, fql.OpGe:
		if fi < 0 || c.sorted[fi] != nil {
			narrow(c, ranges, fi, op, v)
		}
	}
	return access{}, false
}

// narrow adds one bound to field fi's range, keeping the tighter bound.
func narrow(c *collection, ranges map[int]*access, fi int, op fql.BinaryOp, v any) {
	a := ranges[fi]
	if a == nil {
		a = &access{field: fi, exact: true}
		ranges[fi] = a
	}
	a.used++
	if !boundFits(c, fi, v) {
		a.exact = false
	}
	if v == nil {
		// A comparison with null matches nothing.
		a.lo, a.hi = bound{key: int64(1), set: true}, bound{key: int64(0), set: true}
		return
	}
	b := bound{key: v, set: true, inclusive: op == fql.OpLe || op == fql.OpGe}
	if op == fql.OpGt || op == fql.OpGe {
		if !a.lo.set || tighter(cmpKeys(v, a.lo.key), b.inclusive) {
			a.lo = b
		}
		return
	}
	if !a.hi.set || tighter(-cmpKeys(v, a.hi.key), b.inclusive) {
		a.hi = b
	}
}

// tighter says whether a new bound beats the old: c > 0 when it lies
// inside the old one; at the same key an exclusive bound is tighter.
func tighter(c int, inclusive bool) bool { return c > 0 || (c == 0 && !inclusive) }

// planIn plans field in (constants).
func (r *runner) planIn(c *collection, e *fql.In) (access, bool) {
	fi, ok := fieldOf(c, e.X)
	if !ok || !isConst(e.Set) {
		return access{}, false
	}
	v, err := r.eval(e.Set)
	if err != nil {
		return access{}, false
	}
	l, ok := v.([]any)
	if !ok {
		return access{}, false
	}
	return r.eqAccess(c, fi, l)
}

// boundFits says whether the index orders v as the query language
// compares it with field fi's values: a number for a numeric field or id,
// text for a text field.
func boundFits(c *collection, fi int, v any) bool {
	k := tInt
	if fi >= 0 {
		k = c.sch.Fields[fi].Type.kind
	}
	switch v.(type) {
	case int64:
		return k == tInt || k == tFloat || k == tTimestamp
	case float64:
		f := v.(float64)
		return f == f && (k == tInt || k == tFloat || k == tTimestamp)
	case string:
		return k == tText
	}
	return false
}

// eqAccess is the candidates for field fi equal to one of vals.
func (r *runner) eqAccess(c *collection, fi int, vals []any) (access, bool) {
	a := access{exact: true, used: 1}
	if fi < 0 {
		for _, v := range vals {
			if id, ok := keyFor(tInt, v); ok {
				if c.get(id.(int64)) != nil {
					a.ids = append(a.ids, id.(int64))
				}
			}
		}
		a.cost = len(a.ids)
		return a, true
	}
	kind := c.sch.Fields[fi].Type.kind
	if h := c.hashOf(fi); h != nil {
		for _, v := range vals {
			if k, ok := keyFor(kind, v); ok {
				a.ids = append(a.ids, h.get(k)...)
			}
		}
		a.cost = len(a.ids)
		return a, true
	}
	if s := c.sortedOf(fi); s != nil {
		for _, v := range vals {
			if k, ok := keyFor(kind, v); ok {
				b := bound{key: k, set: true, inclusive: true}
				s.scan(b, b, false, func(_ sortKey, id int64) bool {
					a.ids = append(a.ids, id)
					return true
				})
			}
		}
		a.cost = len(a.ids)
		return a, true
	}
	return a, false
}

// rangeCount counts candidates in a range, stopping at limit.
func (r *runner) rangeCount(c *collection, fi int, lo, hi bound, limit int) int {
	n := 0
	r.rangeScan(c, fi, lo, hi, false, func(int64) bool {
		n++
		return n < limit
	})
	return n
}

func (r *runner) rangeIDs(c *collection, fi int, lo, hi bound) []int64 {
	ids := []int64{}
	r.rangeScan(c, fi, lo, hi, false, func(id int64) bool {
		ids = append(ids, id)
		return true
	})
	return ids
}

// rangeScan visits ids whose field fi (or id, fi < 0) lies in lo..hi, in
// key order.
func (r *runner) rangeScan(c *collection, fi int, lo, hi bound, desc bool, fn func(int64) bool) {
	if fi >= 0 {
		if lo.set && hi.set && cmpKeys(lo.key, hi.key) > 0 {
			return
		}
		c.sortedOf(fi).scan(lo, hi, desc, func(_ sortKey, id int64) bool { return fn(id) })
		return
	}
	// Ranges on id walk the id-ordered tree; a bound that is not a number
	// matches no id.
	for _, bd := range []bound{lo, hi} {
		if bd.set && cmpRank(bd.key) != 2 {
			return
		}
	}
	visit := func(d *doc) bool {
		if lo.set {
			if cv := cmpKeys(d.id, lo.key); cv < 0 || (cv == 0 && !lo.inclusive) {
				return desc // below the range: go on ascending, stop descending
			}
		}
		if hi.set {
			if cv := cmpKeys(d.id, hi.key); cv > 0 || (cv == 0 && !hi.inclusive) {
				return !desc
			}
		}
		return fn(d.id)
	}
	switch {
	case desc && hi.set:
		c.descendFrom(clampID(hi.key, true), visit)
	case desc:
		c.descend(visit)
	case lo.set:
		c.ascendFrom(clampID(lo.key, false), visit)
	default:
		c.ascend(visit)
	}
}

// clampID turns a numeric bound into an id to start a walk from: rounded
// away from the range's inside so no id within it is skipped.
func clampID(v any, up bool) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case float64:
		switch {
		case x >= 9.2e18:
			return 1<<63 - 1
		case x <= -9.2e18:
			return -1 << 63
		case up:
			return int64(math.Ceil(x))
		}
		return int64(math.Floor(x))
	}
	return 0
}

func errUnknownField(name string, c *collection) error {
	return fmt.Errorf("%w: %s in %s", ErrUnknownField, name, c.sch.Name)
}

// selectDocs returns the visible documents of c matching where, ordered
// by order (id ascending when empty; ties by id), past offset, at most
// limit (negative: no limit).
func (r *runner) selectDocs(c *collection, where fql.Expr, order []fql.OrderKey, limit, offset int64) ([]*doc, error) {
	if err := checkFields(c, where); err != nil {
		return nil, err
	}
	for _, k := range order {
		if len(k.Path) > 0 && k.Agg == fql.AggNone {
			if n := k.Path[0]; n != "id" && c.sch.field(n) < 0 {
				return nil, errUnknownField(n, c)
			}
		}
	}
	want := int64(-1)
	if limit >= 0 {
		want = limit + offset
	}
	a := r.plan(c, where)
	var out []*doc
	var ferr error
	full := func() bool { return want >= 0 && int64(len(out)) >= want }
	keep := func(d *doc) bool {
		ok, err := r.matches(c, d, where)
		if err != nil {
			ferr = err
			return false
		}
		if ok {
			out = append(out, d)
		}
		return true
	}
	switch {
	case len(order) == 0:
		if a.scan {
			c.ascend(func(d *doc) bool {
				return keep(d) && (want < 0 || int64(len(out)) < want)
			})
		} else {
			slices.Sort(a.ids)
			for j, id := range a.ids {
				if j > 0 && a.ids[j-1] == id {
					continue
				}
				if !keep(c.get(id)) || (want >= 0 && int64(len(out)) >= want) {
					break
				}
			}
		}
	case a.scan && want >= 0 && r.orderedScan(c, order, full, keep):
	default:
		if a.scan {
			c.ascend(keep)
		} else {
			slices.Sort(a.ids)
			for j, id := range a.ids {
				if (j == 0 || a.ids[j-1] != id) && !keep(c.get(id)) {
					break
				}
			}
		}
		if ferr == nil {
			sortDocs(c, out, order, r.stop)
		}
	}
	if ferr != nil {
		return nil, ferr
	}
	return window(out, limit, offset), nil
}

// orderedScan answers a one-key order on id or a @sorted field with no
// nulls by walking the index in order, stopping once full says enough.
// Runs of equal keys come out id ascending, as a sort would give them.
func (r *runner) orderedScan(c *collection, order []fql.OrderKey, full func() bool, keep func(*doc) bool) bool {
	if len(order) != 1 || order[0].Agg != fql.AggNone || len(order[0].Path) != 1 {
		return false
	}
	k := order[0]
	fi, ok := fieldOf(c, &fql.Field{Path: k.Path})
	if !ok {
		return false
	}
	step := func(d *doc) bool { return keep(d) && !full() }
	if fi < 0 {
		if k.Desc {
			c.descend(step)
		} else {
			c.ascend(step)
		}
		return true
	}
	s := c.sortedOf(fi)
	if s == nil || s.len() != c.len() {
		return false
	}
	if !k.Desc {
		s.scan(bound{}, bound{}, false, func(_ sortKey, id int64) bool { return step(c.get(id)) })
		return true
	}
	// Descending: buffer each run of equal keys and emit it id ascending.
	var run []int64
	var runKey sortKey
	flush := func() bool {
		for j := len(run) - 1; j >= 0; j-- {
			if !step(c.get(run[j])) {
				return false
			}
		}
		run = run[:0]
		return true
	}
	cont := true
	s.scan(bound{}, bound{}, true, func(key sortKey, id int64) bool {
		if len(run) > 0 && !key.same(runKey) {
			if cont = flush(); !cont {
				return false
			}
		}
		runKey = key
		run = append(run, id)
		return true
	})
	if cont {
		flush()
	}
	return true
}

func (r *runner) matches(c *collection, d *doc, where fql.Expr) (bool, error) {
	if r.stop.step() {
		return false, r.stop.err
	}
	if d == nil || !r.visible(c, d) {
		return false, nil
	}
	if where == nil {
		return true, nil
	}
	v, err := fql.Eval(where, &rowEnv{r: r, c: c, d: d})
	if err != nil {
		return false, evalErr(err)
	}
	return fql.Truthy(v), nil
}

func window[T any](s []T, limit, offset int64) []T {
	if offset > 0 {
		if offset >= int64(len(s)) {
			return s[:0]
		}
		s = s[offset:]
	}
	if limit >= 0 && limit < int64(len(s)) {
		s = s[:limit]
	}
	return s
}

// sortDocs orders docs by the keys, ties by id ascending. Each doc's keys
// are decoded once. Once stop says to stop, it decodes no more and every
// comparison is a tie.
func sortDocs(c *collection, docs []*doc, order []fql.OrderKey, stop *stopper) {
	type keyed struct {
		d    *doc
		keys []any
	}
	ks := make([]keyed, len(docs))
	flat := make([]any, len(docs)*len(order))
	for i, d := range docs {
		if stop.step() {
			return
		}
		env := &rowEnv{c: c, d: d}
		k := flat[i*len(order) : (i+1)*len(order)]
		for j, o := range order {
			k[j], _ = env.Field(o.Path)
		}
		ks[i] = keyed{d, k}
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		if stop.step() {
			return 0
		}
		for j, o := range order {
			if x := fql.SortCompare(a.keys[j], b.keys[j]); x != 0 {
				if o.Desc {
					return -x
				}
				return x
			}
		}
		return cmp.Compare(a.d.id, b.d.id)
	})
	for i := range ks {
		docs[i] = ks[i].d
	}
}
