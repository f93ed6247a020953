package fql

import (
	"strings"
)

// This file parses the write statements: put, insert, set and del, and the
// clauses they share with get (where, order, limit, returning, require).

func (p *parser) putInsert() Stmt {
	kw := p.advance()
	isPut := kw.isKw("put")
	coll := p.collName()
	docs := p.docs()
	var ifAbsent bool
	var require *int64
	for {
		switch {
		case isPut && p.tok.isKw("if"):
			at := p.advance().pos
			p.expectKw("absent", "after if")
			if ifAbsent {
				p.fail(at, `"if absent" given twice`)
			}
			ifAbsent = true
			continue
		case p.tok.isKw("require"):
			if require != nil {
				p.fail(p.tok.pos, `"require" given twice`)
			}
			require = p.require()
			continue
		}
		break
	}
	if isPut {
		return &Put{At: kw.pos, Coll: coll, Docs: docs, IfAbsent: ifAbsent, Require: require}
	}
	return &Insert{At: kw.pos, Coll: coll, Docs: docs, Require: require}
}

// docs parses what put and insert write: an object, a list of objects (or
// parameters), or a parameter. Values may not name fields.
func (p *parser) docs() Expr {
	var e Expr
	switch {
	case p.tok.is("{"):
		e = p.object()
	case p.tok.is("["):
		e = p.list()
	case p.tok.kind == tParam:
		e = p.primary()
	default:
		p.expected("an object, a list of objects or a parameter")
	}
	p.checkHeight(e)
	if l, ok := e.(*ListLit); ok {
		for _, x := range l.Elems {
			switch x.(type) {
			case *ObjectLit, *Param:
			default:
				p.fail(x.Pos(), "expected an object or a parameter in the list of documents, found %s", snippet(x))
			}
		}
	}
	Inspect(e, func(n Node) bool {
		if f, ok := n.(*Field); ok {
			p.fail(f.At, "a document value cannot name a field (%s); quote text as \"...\"", snippet(f))
		}
		return true
	})
	return e
}

func (p *parser) require() *int64 {
	p.advance()
	v, _ := p.intLit("a row count after require")
	return &v
}

func (p *parser) set() Stmt {
	at := p.advance().pos
	s := &Set{At: at, Coll: p.collName()}
	if !p.tok.is("{") {
		p.expected("'{' with the fields to set")
	}
	obj := p.object()
	for _, f := range obj.Fields {
		if f.Key == "id" {
			p.fail(f.At, "the id of a row cannot be set")
		}
		s.Assigns = append(s.Assigns, Assign{At: f.At, Field: f.Key, Value: f.Value})
	}
	if len(s.Assigns) == 0 {
		p.fail(obj.At, "set needs at least one field")
	}
	w := p.writeClauses()
	s.Where, s.Order, s.Limit, s.Returning, s.Require = w.where, w.order, w.limit, w.returning, w.require
	return s
}

func (p *parser) del() Stmt {
	at := p.advance().pos
	d := &Del{At: at, Coll: p.collName()}
	w := p.writeClauses()
	d.Where, d.Order, d.Limit, d.Returning, d.Require = w.where, w.order, w.limit, w.returning, w.require
	return d
}

// writeClauses are the clauses of set and del, in any order, each once.
type writeClauses struct {
	where     Expr
	order     []OrderKey
	limit     *int64
	returning *Returning
	require   *int64
}

func (p *parser) writeClauses() writeClauses {
	var w writeClauses
	seen := map[string]bool{}
	for !p.atEnd() {
		kw := p.keyword()
		switch kw {
		case "where", "order", "limit", "returning", "require":
		default:
			p.expected("where, order, limit, returning, require or end of statement")
		}
		if seen[kw] {
			p.fail(p.tok.pos, "%q given twice", kw)
		}
		seen[kw] = true
		switch kw {
		case "where":
			w.where = p.where()
		case "order":
			w.order = p.order()
		case "limit":
			w.limit = p.limit()
		case "returning":
			w.returning = p.returning()
		case "require":
			w.require = p.require()
		}
	}
	return w
}

func (p *parser) where() Expr {
	p.advance()
	return p.expr()
}

func (p *parser) limit() *int64 {
	p.advance()
	v := p.rowCount("the row count after limit")
	return &v
}

func (p *parser) returning() *Returning {
	r := &Returning{At: p.advance().pos}
	if p.accept("*") {
		r.Star = true
		return r
	}
	r.Fields = append(r.Fields, p.path("'*' or a field after returning"))
	for p.accept(",") {
		r.Fields = append(r.Fields, p.path("a field after ','"))
	}
	return r
}

// order parses order KEY [asc|desc], ... where a key is a path or an
// aggregate.
func (p *parser) order() []OrderKey {
	p.advance()
	p.refuseBy("order")
	var keys []OrderKey
	for {
		k := OrderKey{At: p.tok.pos}
		k.Agg, k.Star, k.Path = p.aggOrPath("a field to order by")
		if k.Star && k.Agg == AggNone {
			p.fail(k.At, "cannot order by *")
		}
		if p.acceptKw("desc") {
			k.Desc = true
		} else {
			p.acceptKw("asc")
		}
		keys = append(keys, k)
		if !p.accept(",") {
			return keys
		}
	}
}

// aggOrPath parses *, AGG(*|PATH) or PATH.
func (p *parser) aggOrPath(what string) (AggKind, bool, Path) {
	if p.accept("*") {
		return AggNone, true, nil
	}
	if p.tok.kind == tIdent && p.peek().is("(") {
		agg := aggKinds[strings.ToLower(p.tok.val)]
		if agg == AggNone {
			p.fail(p.tok.pos, "unknown aggregate %s (count, sum, avg, min, max)", p.tok.describe())
		}
		p.advance()
		p.advance()
		if p.tok.is("*") {
			if agg != AggCount {
				p.fail(p.tok.pos, "only count takes *")
			}
			p.advance()
			p.expect(")", "after count(*")
			return agg, true, nil
		}
		path := p.path("a field in " + agg.String() + "(...)")
		p.expect(")", "after the aggregate's field")
		return agg, false, path
	}
	return AggNone, false, p.path(what)
}

var aggKinds = map[string]AggKind{
	"count": AggCount, "sum": AggSum, "avg": AggAvg, "min": AggMin, "max": AggMax,
}
