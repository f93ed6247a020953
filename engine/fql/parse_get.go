package fql

const getClauses = "select, where, match, near, fuse, group, order, limit, offset, count, lookup"

// get parses get COLL and its clauses. The clauses before the first
// lookup may come in any order, each once; everything after a lookup
// belongs to it.
func (p *parser) get() Stmt {
	g := &Get{At: p.advance().pos, Coll: p.collName()}
	seen := map[string]int{}
	for !p.atEnd() && !p.tok.isKw("lookup") {
		kw := p.keyword()
		if _, dup := seen[kw]; dup {
			p.fail(p.tok.pos, "%q given twice", kw)
		}
		seen[kw] = p.tok.pos
		switch kw {
		case "select":
			g.Select = p.selectList()
		case "where":
			g.Where = p.where()
		case "match":
			g.Match = p.match()
		case "near":
			g.Near = p.near()
		case "fuse":
			g.Fuse = p.fuse()
		case "group":
			p.advance()
			p.refuseBy("group")
			g.Group = append(g.Group, p.path("a field to group by"))
			for p.accept(",") {
				g.Group = append(g.Group, p.path("a field to group by after ','"))
			}
		case "order":
			g.Order = p.order()
		case "limit":
			g.Limit = p.limit()
		case "offset":
			p.advance()
			g.Offset = p.rowCount("the row count after offset")
		case "count":
			p.advance()
			g.Count = true
		default:
			p.expected(getClauses + " or end of statement")
		}
	}
	if p.tok.isKw("lookup") {
		g.Lookup = p.lookup(1)
	}
	p.checkGet(g, seen)
	return g
}

// checkGet refuses clause combinations that mean nothing.
func (p *parser) checkGet(g *Get, seen map[string]int) {
	if g.Limit != nil && *g.Limit+g.Offset > MaxRows {
		p.failRows(seen["offset"], "limit plus offset must be at most %d", MaxRows)
	}
	switch {
	case g.Fuse != nil && (g.Match == nil || g.Near == nil):
		p.fail(g.Fuse.At, "fuse needs both match and near")
	case g.Fuse == nil && g.Match != nil && g.Near != nil:
		p.fail(g.Near.At, "match and near together need fuse")
	}
	if g.Count && len(g.Group) > 0 {
		p.fail(seen["count"], "count cannot be used with group (select count(*) instead)")
	}
	p.checkSelect(g.Select, g.Group)
}

// checkSelect refuses a select list whose items cannot all be answered in
// one row: * beside other items, plain fields beside aggregates that are
// not group keys, two items with one name.
func (p *parser) checkSelect(items []SelectItem, group []Path) {
	aggs := false
	for _, it := range items {
		if it.Agg != AggNone {
			aggs = true
		}
	}
	grouped := map[string]bool{}
	for _, g := range group {
		grouped[g.String()] = true
	}
	names := map[string]bool{}
	for _, it := range items {
		if it.Star && it.Agg == AggNone && len(items) > 1 {
			p.fail(it.At, "* must be the only item of select")
		}
		if it.Star && it.Agg == AggNone && len(group) > 0 {
			p.fail(it.At, "select * cannot be used with group")
		}
		if it.Agg == AggNone && !it.Star && (aggs || len(group) > 0) && !grouped[it.Path.String()] {
			p.fail(it.At, "%s is neither a group key nor an aggregate", cutText(it.Path.String()))
		}
		if names[it.Name()] {
			p.fail(it.At, "two select items are named %s (use as)", cutText(it.Name()))
		}
		names[it.Name()] = true
	}
}

// selectList parses select ITEM [as ALIAS], ...
func (p *parser) selectList() []SelectItem {
	p.advance()
	var items []SelectItem
	for {
		it := SelectItem{At: p.tok.pos}
		it.Agg, it.Star, it.Path = p.aggOrPath("'*', an aggregate or a field to select")
		if p.acceptKw("as") {
			if it.Star && it.Agg == AggNone {
				p.fail(it.At, "* cannot take an alias")
			}
			it.Alias = p.ident("an alias after as").val
		}
		items = append(items, it)
		if !p.accept(",") {
			return items
		}
	}
}

func (p *parser) match() *Match {
	m := &Match{At: p.advance().pos}
	m.Field = p.ident("a @text field after match").val
	m.Query = p.primary()
	if lit, ok := m.Query.(*Literal); ok {
		if _, ok := lit.Value.(string); ok {
			return m
		}
	} else if _, ok := m.Query.(*Param); ok {
		return m
	}
	p.fail(m.Query.Pos(), "match takes a string or a parameter, found %s", snippet(m.Query))
	return nil
}

func (p *parser) near() *Near {
	n := &Near{At: p.advance().pos}
	n.Field = p.ident("a vector field after near").val
	n.Vector = p.primary()
	p.checkHeight(n.Vector)
	switch v := n.Vector.(type) {
	case *Param:
	case *ListLit:
		if len(v.Elems) == 0 {
			p.fail(v.At, "near needs a vector of at least one number")
		}
		for _, x := range v.Elems {
			if lit, ok := x.(*Literal); !ok || !isNumber(lit.Value) {
				p.fail(x.Pos(), "a vector holds numbers, found %s", snippet(x))
			}
		}
	default:
		p.fail(v.Pos(), "near takes a list of numbers or a parameter, found %s", snippet(v))
	}
	for {
		switch {
		case p.tok.isKw("ef") && n.Ef == 0:
			p.advance()
			ef, _ := p.intIn("ef", 1, 10000)
			n.Ef = int(ef)
			continue
		case p.tok.isKw("exact") && !n.Exact:
			p.advance()
			n.Exact = true
			continue
		}
		return n
	}
}

func (p *parser) fuse() *Fuse {
	f := &Fuse{At: p.advance().pos, K: DefaultFuseK}
	if p.tok.isKw("k") && p.peek().is("=") {
		p.advance()
		p.advance()
		k, _ := p.intIn("k of fuse", 1, 10000)
		f.K = int(k)
	}
	return f
}

// lookup parses lookup CHILD on FIELD [required] and its own clauses;
// level counts the lookups of the chain so far, this one included.
func (p *parser) lookup(level int) *Lookup {
	at := p.advance().pos
	if level > MaxLookupDepth {
		p.fail(at, "lookups nest at most %d deep", MaxLookupDepth)
	}
	l := &Lookup{At: at, Child: p.ident("a collection after lookup").val}
	p.expectKw("on", "after the collection of lookup")
	l.On = p.ident("the field of " + l.Child + " that holds the parent's id").val
	l.Required = p.acceptKw("required")
	seen := map[string]bool{}
	for !p.atEnd() && !p.tok.isKw("lookup") {
		kw := p.keyword()
		if seen[kw] {
			p.fail(p.tok.pos, "%q given twice in one lookup", kw)
		}
		seen[kw] = true
		switch kw {
		case "select":
			l.Select = p.selectList()
			for _, it := range l.Select {
				if it.Agg != AggNone {
					p.fail(it.At, "a lookup's select takes fields, not aggregates")
				}
			}
			p.checkSelect(l.Select, nil)
		case "where":
			l.Where = p.where()
		case "order":
			l.Order = p.order()
			for _, k := range l.Order {
				if k.Agg != AggNone {
					p.fail(k.At, "a lookup orders by fields, not aggregates")
				}
			}
		case "limit":
			l.Limit = p.limit()
		default:
			p.expected("select, where, order, limit, lookup or end of statement (a lookup's clauses come after it)")
		}
	}
	if p.tok.isKw("lookup") {
		l.Lookup = p.lookup(level + 1)
	}
	return l
}
