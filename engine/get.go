package engine

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/fenec-go/fenec/engine/fql"
	"github.com/fenec-go/fenec/engine/hnsw"
	"github.com/fenec-go/fenec/engine/text"
)

// hit is one row of a get as it is worked on: its document and, from a
// search, its score.
type hit struct {
	d        *doc
	score    float64
	hasScore bool
}

func (r *runner) runGet(s *fql.Get) (*Result, error) {
	c, err := r.coll(s.Coll)
	if err != nil {
		return nil, err
	}
	if err := checkGetFields(c, s); err != nil {
		return nil, err
	}
	if err := r.checkCompared(c, s.Where); err != nil {
		return nil, err
	}
	grouped := len(s.Group) > 0 || slices.ContainsFunc(s.Select, func(it fql.SelectItem) bool { return it.Agg != fql.AggNone })
	searching := s.Match != nil || s.Near != nil
	if s.Count && !searching && s.Lookup == nil && !grouped {
		if n, ok := r.fastCount(c, s.Where); ok {
			return &Result{Kind: ResultCount, Count: n}, nil
		}
	}
	if r.lazy && !s.Count && !grouped && !searching && s.Lookup == nil {
		docs, err := r.selectDocs(c, s.Where, s.Order, limitOf(s.Limit), s.Offset)
		if err != nil {
			return nil, err
		}
		return r.lazyAnswer(c, docs, nil, s.Select)
	}
	// Counts, groups, searches and required lookups see every matching
	// row; the window (limit, offset) is applied after them.
	whole := s.Count || grouped || searching || lookupRequired(s.Lookup)
	hits, err := r.getHits(c, s, whole, grouped, searching)
	if err != nil {
		return nil, err
	}
	if lookupRequired(s.Lookup) {
		if hits, err = r.withChildren(c, s.Lookup, hits); err != nil {
			return nil, err
		}
	}
	switch {
	case s.Count:
		return &Result{Kind: ResultCount, Count: int64(len(hits))}, nil
	case grouped:
		rows, err := r.group(c, s, hits)
		if err != nil {
			return nil, err
		}
		for _, row := range window(rows, limitOf(s.Limit), s.Offset) {
			if err := r.chargeRow(row); err != nil {
				return nil, err
			}
		}
		return &Result{Kind: ResultRows, Rows: window(rows, limitOf(s.Limit), s.Offset)}, nil
	}
	if whole {
		if searching && len(s.Order) > 0 {
			sortHits(c, hits, s.Order, r.stop)
		}
		hits = window(hits, limitOf(s.Limit), s.Offset)
	}
	if r.lazy && s.Lookup == nil {
		docs, scores := make([]*doc, len(hits)), make([]float64, len(hits))
		for i, h := range hits {
			docs[i], scores[i] = h.d, h.score
		}
		return r.lazyAnswer(c, docs, scores, s.Select)
	}
	rows := make([]Row, 0, len(hits))
	for _, h := range hits {
		if r.stop.step() {
			return nil, r.stop.err
		}
		row := project(c, h, s.Select)
		if s.Lookup != nil {
			ch, err := r.children(c, h.d, s.Lookup)
			if err != nil {
				return nil, err
			}
			row[s.Lookup.Child] = ch
		}
		if err := r.chargeRow(row); err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return &Result{Kind: ResultRows, Rows: rows}, nil
}

// getHits finds a get's rows: by search, or by where and order, cut to
// the window unless whole.
func (r *runner) getHits(c *collection, s *fql.Get, whole, grouped, searching bool) ([]hit, error) {
	if searching {
		return r.search(c, s)
	}
	limit, offset, order := limitOf(s.Limit), s.Offset, s.Order
	if whole {
		limit, offset = -1, 0
		if grouped {
			order = nil
		}
	}
	docs, err := r.selectDocs(c, s.Where, order, limit, offset)
	if err != nil {
		return nil, err
	}
	hits := make([]hit, len(docs))
	for i, d := range docs {
		hits[i] = hit{d: d}
	}
	return hits, nil
}

// withChildren keeps the hits that have at least one child row.
func (r *runner) withChildren(c *collection, lk *fql.Lookup, hits []hit) ([]hit, error) {
	kept := hits[:0]
	for _, h := range hits {
		rows, err := r.children(c, h.d, lk)
		if err != nil {
			return nil, err
		}
		if len(rows) > 0 {
			kept = append(kept, h)
		}
	}
	return kept, nil
}

// fastCount counts without visiting documents when an index answers the
// whole clause exactly and no row can be hidden by @ttl.
func (r *runner) fastCount(c *collection, where fql.Expr) (int64, bool) {
	if c.hasTTL() {
		return 0, false
	}
	if where == nil {
		return int64(c.len()), true
	}
	if b, ok := where.(*fql.Binary); ok && b.Op == fql.OpEq {
		// One = on a hashed field: the bucket's size is the answer.
		fi, fok := fieldOf(c, b.L)
		val := b.R
		if !fok {
			fi, fok = fieldOf(c, b.R)
			val = b.L
		}
		if fok && fi >= 0 && c.hash[fi] != nil && isConst(val) {
			v, err := r.eval(val)
			if err != nil {
				return 0, false
			}
			k, ok := keyFor(c.sch.Fields[fi].Type.kind, v)
			if !ok {
				return 0, true
			}
			return int64(c.hashOf(fi).count(k)), true
		}
	}
	a := r.plan(c, where)
	if a.scan || !a.exact {
		return 0, false
	}
	slices.Sort(a.ids)
	return int64(len(slices.Compact(a.ids))), true
}

func lookupRequired(l *fql.Lookup) bool { return l != nil && l.Required }

func checkGetFields(c *collection, s *fql.Get) error {
	if err := checkFields(c, s.Where); err != nil {
		return err
	}
	for _, it := range s.Select {
		if len(it.Path) > 0 {
			if n := it.Path[0]; n != "id" && n != "_score" && c.sch.field(n) < 0 {
				return errUnknownField(n, c)
			}
		}
	}
	for _, g := range s.Group {
		if n := g[0]; n != "id" && c.sch.field(n) < 0 {
			return errUnknownField(n, c)
		}
	}
	return nil
}

// search answers match, near and fuse: hits best first, where applied.
func (r *runner) search(c *collection, s *fql.Get) ([]hit, error) {
	var ferr error
	filter := func(id int64) bool {
		ok, err := r.matches(c, c.get(id), s.Where)
		if err != nil && ferr == nil {
			ferr = err
		}
		return ok
	}
	k := c.len()
	if s.Limit != nil && s.Fuse == nil && !s.Count {
		// Only the first limit+offset are answered; a count is of every
		// row that matches, before limit and offset.
		k = int(*s.Limit + s.Offset)
	}
	if k <= 0 {
		return nil, nil
	}
	var lists [][]hit
	if s.Match != nil {
		l, err := r.matchHits(c, s.Match, k, filter)
		if err != nil {
			return nil, err
		}
		lists = append(lists, l)
	}
	if s.Near != nil {
		// A graph walk costs with its k, so near answers at most
		// fql.MaxRows rows. Fused, those are its candidates; alone and
		// with no limit, finding more is refused rather than cut.
		nk := min(k, fql.MaxRows)
		if s.Fuse == nil {
			nk = min(k, fql.MaxRows+1)
		}
		l, err := r.nearHits(c, s.Near, nk, filter, s.Where == nil && !c.sch.hasTTL())
		if err != nil {
			return nil, err
		}
		if len(l) > fql.MaxRows {
			return nil, fmt.Errorf("%w: near finds more than %d rows: give a limit", ErrTooMany, fql.MaxRows)
		}
		lists = append(lists, l)
	}
	if ferr != nil {
		return nil, ferr
	}
	if len(lists) == 1 {
		return lists[0], nil
	}
	fk := fql.DefaultFuseK
	if s.Fuse != nil && s.Fuse.K > 0 {
		fk = s.Fuse.K
	}
	return fuse(lists, fk), nil
}

func (r *runner) searchField(c *collection, name string, want string) (searchIndex, error) {
	i := c.sch.field(name)
	if i < 0 {
		return nil, errUnknownField(name, c)
	}
	x := c.search[i]
	if x == nil {
		return nil, fmt.Errorf("%w: %s of %s has no %s index", ErrInvalid, name, c.sch.Name, want)
	}
	return x, nil
}

func (r *runner) matchHits(c *collection, m *fql.Match, k int, filter func(int64) bool) ([]hit, error) {
	x, err := r.searchField(c, m.Field, "@text")
	if err != nil {
		return nil, err
	}
	ti, ok := x.(*textIndex)
	if !ok {
		return nil, fmt.Errorf("%w: %s of %s has no @text index", ErrInvalid, m.Field, c.sch.Name)
	}
	q, err := r.eval(m.Query)
	if err != nil {
		return nil, err
	}
	qs, ok := q.(string)
	if !ok {
		return nil, fmt.Errorf("%w: match wants text, got %s", ErrType, fql.TypeName(q))
	}
	tx, ok := ti.index(c, c.sch.field(m.Field), r.stop)
	if !ok {
		return nil, r.stop.stopped()
	}
	return toHits(c, tx.SearchUntil(qs, k, filter, r.stop.check)), nil
}

func toHits(c *collection, th []text.Hit) []hit {
	out := make([]hit, 0, len(th))
	for _, h := range th {
		out = append(out, hit{d: c.get(h.ID), score: h.Score, hasScore: true})
	}
	return out
}

// nearHits walks the graph of n's field for the k nearest that filter
// keeps. all says that filter keeps every document there is (no where, no
// field with a TTL): the walk then asks it nothing — a lookup of each
// candidate was a third of a near's time — and a hit whose document is not
// there, which the graph should never give, has the walk made again with
// filter.
func (r *runner) nearHits(c *collection, n *fql.Near, k int, filter func(int64) bool, all bool) ([]hit, error) {
	x, err := r.searchField(c, n.Field, "@hnsw")
	if err != nil {
		return nil, err
	}
	vi, ok := x.(*vectorIndex)
	if !ok {
		return nil, fmt.Errorf("%w: %s of %s has no @hnsw index", ErrInvalid, n.Field, c.sch.Name)
	}
	q, err := r.eval(n.Vector)
	if err != nil {
		return nil, err
	}
	vec, ok := toVector(q)
	if !ok {
		return nil, fmt.Errorf("%w: near wants a vector, got %s", ErrType, fql.TypeName(q))
	}
	i := c.sch.field(n.Field)
	if len(vec) != c.sch.Fields[i].Type.dim {
		return nil, fmt.Errorf("%w: near %s wants a vector of %d, got %d", ErrType, n.Field, c.sch.Fields[i].Type.dim, len(vec))
	}
	hq := hnsw.Query{K: k, Ef: n.Ef, Exact: n.Exact, Filter: filter, Stop: r.stop.check}
	if all {
		hq.Filter = nil
	}
	g, ok := vi.pin()
	if !ok {
		return nil, ErrClosed
	}
	hs, err := g.Search(vec, hq)
	g.Unpin()
	if errors.Is(err, hnsw.ErrFault) {
		return nil, fmt.Errorf("near %s of %s: %w", n.Field, c.sch.Name, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	out := make([]hit, 0, len(hs))
	for _, h := range hs {
		d := c.get(h.ID)
		if d == nil {
			return r.nearHits(c, n, k, filter, false)
		}
		out = append(out, hit{d: d, score: h.Score, hasScore: true})
	}
	return out, nil
}

// fuse merges ranked lists by reciprocal rank: Σ 1/(k + rank), rank from 1.
func fuse(lists [][]hit, k int) []hit {
	score := map[int64]float64{}
	docs := map[int64]*doc{}
	for _, l := range lists {
		for rank, h := range l {
			score[h.d.id] += 1 / float64(k+rank+1)
			docs[h.d.id] = h.d
		}
	}
	out := make([]hit, 0, len(score))
	for id, s := range score {
		out = append(out, hit{d: docs[id], score: s, hasScore: true})
	}
	slices.SortFunc(out, func(a, b hit) int {
		if a.score != b.score {
			if a.score > b.score {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.d.id, b.d.id)
	})
	return out
}

// sortHits orders hits by the keys (_score included), ties by id. Once
// stop says to stop, every comparison is a tie: the sort ends soon, its
// order no one's to read.
func sortHits(c *collection, hits []hit, order []fql.OrderKey, stop *stopper) {
	slices.SortStableFunc(hits, func(a, b hit) int {
		if stop.step() {
			return 0
		}
		ea := &rowEnv{c: c, d: a.d, score: a.score, hasSc: a.hasScore}
		eb := &rowEnv{c: c, d: b.d, score: b.score, hasSc: b.hasScore}
		for _, k := range order {
			va, _ := ea.Field(k.Path)
			vb, _ := eb.Field(k.Path)
			if x := fql.SortCompare(va, vb); x != 0 {
				if k.Desc {
					return -x
				}
				return x
			}
		}
		return cmp.Compare(a.d.id, b.d.id)
	})
}

// project builds an answer row from the select list (every field when
// empty); a search's _score always rides along.
func project(c *collection, h hit, items []fql.SelectItem) Row {
	var row Row
	if len(items) == 0 {
		row = c.row(h.d)
	} else {
		row = make(Row, len(items)+1)
		env := &rowEnv{c: c, d: h.d, score: h.score, hasSc: h.hasScore}
		for _, it := range items {
			if it.Star {
				for k, v := range c.row(h.d) {
					row[k] = v
				}
				continue
			}
			v, _ := env.Field(it.Path)
			row[it.Name()] = v
		}
	}
	if h.hasScore {
		row["_score"] = h.score
	}
	return row
}

// children answers one parent's lookup: the child rows whose On field
// equals the parent's id, filtered, ordered, limited, projected, with the
// nested lookup attached (and its required applied).
func (r *runner) children(parent *collection, pd *doc, lk *fql.Lookup) ([]Row, error) {
	c, err := r.coll(lk.Child)
	if err != nil {
		return nil, err
	}
	fi := c.sch.field(lk.On)
	if fi < 0 {
		return nil, errUnknownField(lk.On, c)
	}
	if err := checkFields(c, lk.Where); err != nil {
		return nil, err
	}
	ids := c.lookupIndex(fi).get(pd.id)
	slices.Sort(ids)
	var docs []*doc
	for _, id := range ids {
		d := c.get(id)
		ok, err := r.matches(c, d, lk.Where)
		if err != nil {
			return nil, err
		}
		if ok {
			docs = append(docs, d)
		}
	}
	if len(lk.Order) > 0 {
		sortDocs(c, docs, lk.Order, r.stop)
	}
	rows := make([]Row, 0, len(docs))
	for _, d := range docs {
		if lk.Limit != nil && int64(len(rows)) >= *lk.Limit {
			break
		}
		row := project(c, hit{d: d}, lk.Select)
		if lk.Lookup != nil {
			ch, err := r.children(c, d, lk.Lookup)
			if err != nil {
				return nil, err
			}
			if lk.Lookup.Required && len(ch) == 0 {
				continue
			}
			row[lk.Lookup.Child] = ch
		}
		rows = append(rows, row)
	}
	return rows, nil
}
