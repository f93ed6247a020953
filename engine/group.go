package engine

import (
	"slices"

	"github.com/fenec-go/fenec/engine/fql"
)

// A get's aggregates and groups: each group's keys compared by
// fql.AppendGroupKey (the one grouping equality, fql.GroupEqual), its
// aggregates folded row by row (aggState), and its rows made once every
// hit is in a group.

// aggState accumulates one aggregate over a group's rows.
type aggState struct {
	kind  fql.AggKind
	star  bool
	path  fql.Path
	n     int64 // values seen (count; avg's divisor)
	sumI  int64
	sumF  float64
	float bool // sum holds a float (a float seen, or the int sum overflowed)
	best  any
	typed bool // a number was seen
}

func (a *aggState) add(env *rowEnv) {
	if a.star {
		a.n++
		return
	}
	v, _ := env.Field(a.path)
	if v == nil {
		return
	}
	switch a.kind {
	case fql.AggCount:
		a.n++
	case fql.AggSum, fql.AggAvg:
		switch x := v.(type) {
		case int64:
			a.n++
			a.typed = true
			if !a.float {
				s := a.sumI + x
				if (x > 0 && s < a.sumI) || (x < 0 && s > a.sumI) {
					a.float, a.sumF = true, float64(a.sumI)+float64(x)
					return
				}
				a.sumI = s
				return
			}
			a.sumF += float64(x)
		case float64:
			a.n++
			a.typed = true
			if !a.float {
				a.float, a.sumF = true, float64(a.sumI)
			}
			a.sumF += x
		}
	case fql.AggMin:
		if a.best == nil || fql.SortCompare(v, a.best) < 0 {
			a.best = v
		}
	case fql.AggMax:
		if a.best == nil || fql.SortCompare(v, a.best) > 0 {
			a.best = v
		}
	}
}

func (a *aggState) value() any {
	switch a.kind {
	case fql.AggCount:
		return a.n
	case fql.AggSum:
		if !a.typed {
			return nil
		}
		if a.float {
			return a.sumF
		}
		return a.sumI
	case fql.AggAvg:
		if a.n == 0 {
			return nil
		}
		if a.float {
			return a.sumF / float64(a.n)
		}
		return float64(a.sumI) / float64(a.n)
	}
	return a.best
}

type aggSpec struct {
	name string
	kind fql.AggKind
	star bool
	path fql.Path
}

// aggSpecs lists the aggregates a get needs: those it selects and those
// it orders by, each once, by their unaliased name.
func aggSpecs(s *fql.Get) []aggSpec {
	var specs []aggSpec
	seen := map[string]bool{}
	add := func(name string, kind fql.AggKind, star bool, path fql.Path) {
		if !seen[name] {
			seen[name] = true
			specs = append(specs, aggSpec{name, kind, star, path})
		}
	}
	for _, it := range s.Select {
		if it.Agg != fql.AggNone {
			add(aggString(it), it.Agg, it.Star, it.Path)
		}
	}
	for _, k := range s.Order {
		if k.Agg != fql.AggNone {
			add(k.Name(), k.Agg, k.Star, k.Path)
		}
	}
	return specs
}

// group is one group of a grouped get.
type group struct {
	keys  []any
	first *doc
	aggs  []aggState
	row   Row // the answer row
	full  Row // every group key and aggregate by name, for ordering
}

func newGroup(keys []any, first *doc, specs []aggSpec) *group {
	g := &group{keys: keys, first: first, aggs: make([]aggState, len(specs))}
	for i, sp := range specs {
		g.aggs[i] = aggState{kind: sp.kind, star: sp.star, path: sp.path}
	}
	return g
}

// collectGroups folds the hits into groups, in order of first appearance,
// until stop says to stop.
func collectGroups(c *collection, s *fql.Get, specs []aggSpec, hits []hit, stop *stopper) []*group {
	byKey := map[string]*group{}
	var list []*group
	var kb []byte
	for _, h := range hits {
		if stop.step() {
			break
		}
		env := &rowEnv{c: c, d: h.d, score: h.score, hasSc: h.hasScore}
		keys := make([]any, len(s.Group))
		kb = kb[:0]
		for i, p := range s.Group {
			keys[i], _ = env.Field(p)
			kb = fql.AppendGroupKey(kb, keys[i])
		}
		g := byKey[string(kb)]
		if g == nil {
			g = newGroup(keys, h.d, specs)
			byKey[string(kb)] = g
			list = append(list, g)
		}
		for i := range g.aggs {
			g.aggs[i].add(env)
		}
	}
	if len(list) == 0 && len(s.Group) == 0 {
		// Aggregates over no rows still answer one row.
		list = append(list, newGroup(nil, nil, specs))
	}
	return list
}

// fill builds a group's answer row and its row for ordering.
func (g *group) fill(c *collection, s *fql.Get, specs []aggSpec) {
	g.full, g.row = Row{}, Row{}
	for i, p := range s.Group {
		g.full[p.String()] = g.keys[i]
		if len(s.Select) == 0 {
			g.row[p.String()] = g.keys[i]
		}
	}
	for i, sp := range specs {
		g.full[sp.name] = g.aggs[i].value()
	}
	for _, it := range s.Select {
		name := it.Name()
		switch {
		case it.Agg != fql.AggNone:
			g.row[name] = g.full[aggString(it)]
		case g.first != nil:
			g.row[name], _ = (&rowEnv{c: c, d: g.first}).Field(it.Path)
		default:
			g.row[name] = nil
		}
		g.full[name] = g.row[name]
	}
}

// group answers a get with aggregates and/or group: one row per group
// (one row in all without group), ordered by the order keys (group keys
// ascending when none).
func (r *runner) group(c *collection, s *fql.Get, hits []hit) ([]Row, error) {
	specs := aggSpecs(s)
	list := collectGroups(c, s, specs, hits, r.stop)
	for _, g := range list {
		if r.stop.step() {
			return nil, r.stop.err
		}
		g.fill(c, s, specs)
	}
	slices.SortStableFunc(list, func(a, b *group) int {
		if r.stop.step() {
			return 0
		}
		if len(s.Order) == 0 {
			for i := range s.Group {
				if x := fql.SortCompare(a.keys[i], b.keys[i]); x != 0 {
					return x
				}
			}
			return 0
		}
		for _, k := range s.Order {
			if x := fql.SortCompare(a.full[k.Name()], b.full[k.Name()]); x != 0 {
				if k.Desc {
					return -x
				}
				return x
			}
		}
		return 0
	})
	out := make([]Row, len(list))
	for i, g := range list {
		out[i] = g.row
	}
	return out, nil
}

// aggString is an aggregate's own name, without its alias.
func aggString(it fql.SelectItem) string {
	it.Alias = ""
	return it.Name()
}
