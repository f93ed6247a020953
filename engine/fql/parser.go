package fql

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// parser is a recursive-descent parser over the lexer with one token of
// lookahead beyond the current one. Errors unwind by panicking with a
// *Error, recovered in Parse and ParseExpr only.
type parser struct {
	lx       lexer
	tok      token // current token
	ahead    token // the token after tok, when hasAhead
	hasAhead bool
	depth    int // current nesting of (, [, {, not and unary minus
}

// Parse parses one statement. An optional ';' may end it. Every error is
// an *Error with the byte offset where the text went wrong.
func Parse(text string) (st Stmt, err error) {
	p, err := newParser(text)
	if err != nil {
		return nil, err
	}
	defer p.recover(&err)
	p.tok = p.lex()
	st = p.statement()
	p.end()
	Inspect(st, func(n Node) bool {
		if e, ok := n.(Expr); ok {
			p.checkHeight(e)
			return false
		}
		return true
	})
	return st, nil
}

// ParseExpr parses a condition or expression on its own (the text after
// where, as a filter compiled by the engine). Field paths name the row's
// fields.
func ParseExpr(text string) (e Expr, err error) {
	p, err := newParser(text)
	if err != nil {
		return nil, err
	}
	defer p.recover(&err)
	p.tok = p.lex()
	e = p.expr()
	p.end()
	p.checkHeight(e)
	return e, nil
}

func newParser(text string) (*parser, error) {
	if len(text) > MaxText {
		return nil, &Error{Pos: MaxText, Msg: fmt.Sprintf("statement longer than %d bytes", MaxText)}
	}
	if !utf8.ValidString(text) {
		at := 0
		for at < len(text) {
			r, n := utf8.DecodeRuneInString(text[at:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			at += n
		}
		return nil, &Error{Pos: at, Msg: "invalid UTF-8"}
	}
	return &parser{lx: lexer{src: text}}, nil
}

// recover turns a *Error panic into the returned error.
func (p *parser) recover(err *error) {
	if r := recover(); r != nil {
		e, ok := r.(*Error)
		if !ok {
			panic(r)
		}
		*err = e
	}
}

func (p *parser) lex() token {
	t, err := p.lx.next()
	if err != nil {
		panic(err)
	}
	return t
}

// advance moves to the next token and returns the one it leaves.
func (p *parser) advance() token {
	t := p.tok
	if p.hasAhead {
		p.tok, p.hasAhead = p.ahead, false
	} else {
		p.tok = p.lex()
	}
	return t
}

// peek returns the token after the current one.
func (p *parser) peek() token {
	if !p.hasAhead {
		p.ahead, p.hasAhead = p.lex(), true
	}
	return p.ahead
}

// fail stops parsing with an error at pos.
func (p *parser) fail(pos int, format string, args ...any) {
	panic(&Error{Pos: pos, Msg: fmt.Sprintf(format, args...)})
}

// expected fails at the current token: "expected WHAT, found TOKEN".
func (p *parser) expected(what string) {
	p.fail(p.tok.pos, "expected %s, found %s", what, p.tok.describe())
}

// acceptKw consumes the keyword kw if it is the current token.
func (p *parser) acceptKw(kw string) bool {
	if p.tok.isKw(kw) {
		p.advance()
		return true
	}
	return false
}

// accept consumes the punctuation s if it is the current token.
func (p *parser) accept(s string) bool {
	if p.tok.is(s) {
		p.advance()
		return true
	}
	return false
}

// expectKw consumes the keyword kw or fails, naming what it belongs to.
func (p *parser) expectKw(kw, context string) token {
	if !p.tok.isKw(kw) {
		p.expected(fmt.Sprintf("%q %s", kw, context))
	}
	return p.advance()
}

// expect consumes the punctuation s or fails, naming what it belongs to.
func (p *parser) expect(s, context string) token {
	if !p.tok.is(s) {
		p.expected(fmt.Sprintf("'%s' %s", s, context))
	}
	return p.advance()
}

// ident consumes an identifier, what saying what it names.
func (p *parser) ident(what string) token {
	if p.tok.kind != tIdent {
		p.expected(what)
	}
	return p.advance()
}

// path consumes IDENT {. IDENT}.
func (p *parser) path(what string) Path {
	path := Path{p.ident(what).val}
	for p.tok.is(".") {
		p.advance()
		path = append(path, p.ident("a field name after '.'").val)
	}
	return path
}

// intLit consumes a non-negative integer literal.
func (p *parser) intLit(what string) (int64, int) {
	if p.tok.kind != tInt {
		p.expected(what)
	}
	t := p.advance()
	v, err := strconv.ParseInt(t.val, 10, 64)
	if err != nil {
		p.fail(t.pos, "integer %s does not fit in 64 bits", cutText(t.val))
	}
	return v, t.pos
}

// intIn consumes an integer literal within [lo, hi].
func (p *parser) intIn(what string, lo, hi int64) (int64, int) {
	v, pos := p.intLit(what)
	if v < lo || v > hi {
		p.fail(pos, "%s must be between %d and %d, not %d", what, lo, hi, v)
	}
	return v, pos
}

// number consumes an integer or float literal as a float64.
func (p *parser) number(what string) (float64, int) {
	if p.tok.kind != tInt && p.tok.kind != tFloat {
		p.expected(what)
	}
	t := p.advance()
	v, err := strconv.ParseFloat(t.val, 64)
	if err != nil {
		p.fail(t.pos, "number %s is out of range", cutText(t.val))
	}
	return v, t.pos
}

// enter counts one level of nesting at pos; leave undoes it.
func (p *parser) enter(pos int) {
	p.depth++
	if p.depth > MaxDepth {
		p.fail(pos, "nesting deeper than %d levels", MaxDepth)
	}
}

func (p *parser) leave() { p.depth-- }

// checkHeight fails when e's tree has more than MaxHeight levels: a
// statement's expressions are walked recursively (by the printer, the
// evaluator, the executor), so their height is bounded here.
func (p *parser) checkHeight(e Expr) {
	if _, deep := exprHeight(e, MaxHeight); deep != nil {
		p.fail(e.Pos(), "expression more than %d levels deep (a long chain of and/or? use in (...))", MaxHeight)
	}
}

// refuseBy fails on SQL's "order by x" / "group by x": by followed by
// another name (a field named by is still allowed: "order by, x").
func (p *parser) refuseBy(clause string) {
	if !p.tok.isKw("by") {
		return
	}
	next := p.peek()
	if next.kind == tIdent && !clauseWords[strings.ToLower(next.val)] {
		p.fail(p.tok.pos, "write %s %s, without by", clause, next.val)
	}
}

// clauseWords are the words that may follow an order or group key.
var clauseWords = map[string]bool{
	"asc": true, "desc": true, "select": true, "where": true, "match": true, "near": true,
	"fuse": true, "group": true, "order": true, "limit": true, "offset": true, "count": true,
	"lookup": true, "returning": true, "require": true,
}

// atEnd reports whether the statement ends here (';' or end of text).
func (p *parser) atEnd() bool { return p.tok.kind == tEOF || p.tok.is(";") }

// keyword is the current token lower-cased if it is an identifier, else "".
func (p *parser) keyword() string {
	if p.tok.kind != tIdent {
		return ""
	}
	return strings.ToLower(p.tok.val)
}

// end requires the end of the statement, after an optional ';'.
func (p *parser) end() {
	p.accept(";")
	if p.tok.kind != tEOF {
		p.expected("end of statement")
	}
}

// statement dispatches on the first keyword.
func (p *parser) statement() Stmt {
	t := p.tok
	switch {
	case t.isKw("get"):
		return p.get()
	case t.isKw("put"), t.isKw("insert"):
		return p.putInsert()
	case t.isKw("set"):
		return p.set()
	case t.isKw("del"):
		return p.del()
	case t.isKw("create"):
		p.advance()
		if p.tok.isKw("collection") {
			return p.createCollection(t.pos)
		}
		if p.tok.isKw("index") {
			return p.createIndex(t.pos)
		}
		p.expected(`"collection" or "index" after create`)
	case t.isKw("drop"):
		return p.dropCollection()
	}
	p.expected("a statement (get, put, insert, set, del, create, drop)")
	return nil
}

// collName consumes a collection name.
func (p *parser) collName() string { return p.ident("a collection name").val }

// ---------------------------------------------------------------------------
// Writes

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
	v, _ := p.intIn("the row count after limit", 0, MaxRows)
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

// ---------------------------------------------------------------------------
// Schema statements

func (p *parser) createCollection(at int) Stmt {
	p.advance() // collection
	c := &CreateCollection{At: at}
	if p.tok.isKw("if") {
		p.advance()
		p.expectKw("not", "after if")
		p.expectKw("exists", "after if not")
		c.IfNotExists = true
	}
	c.Name = p.collName()
	p.expect("(", "before the field list")
	names := map[string]bool{}
	if !p.tok.is(")") {
		for {
			f := p.fieldDef()
			if f.Name == "id" {
				p.fail(f.At, "field id is implicit and cannot be declared")
			}
			if names[f.Name] {
				p.fail(f.At, "field %s declared twice", f.Name)
			}
			names[f.Name] = true
			c.Fields = append(c.Fields, f)
			if !p.accept(",") {
				break
			}
		}
	}
	p.expect(")", "after field list")
	return c
}

func (p *parser) fieldDef() FieldDef {
	name := p.ident("a field name")
	f := FieldDef{At: name.pos, Name: name.val, Type: p.fieldType()}
	kinds := map[AnnotKind]bool{}
	for {
		switch {
		case p.tok.isKw("required"):
			if f.Required {
				p.fail(p.tok.pos, `"required" given twice`)
			}
			p.advance()
			f.Required = true
			continue
		case p.tok.is("@"):
			a := p.annot()
			if kinds[a.Kind] {
				p.fail(a.At, "%s given twice on field %s", a.String(), f.Name)
			}
			kinds[a.Kind] = true
			f.Annots = append(f.Annots, a)
			continue
		}
		return f
	}
}

var scalarTypes = map[string]TypeKind{
	"bool": TypeBool, "int": TypeInt, "float": TypeFloat, "text": TypeText,
	"timestamp": TypeTimestamp, "json": TypeJSON,
}

var listTypes = map[string]TypeKind{"text": TypeTextList, "int": TypeIntList, "float": TypeFloatList}

const typeNames = "bool, int, float, text, timestamp, json, vector<N>, [text], [int] or [float]"

func (p *parser) fieldType() Type {
	if p.accept("[") {
		t := p.ident("a list element type (text, int or float)")
		k, ok := listTypes[strings.ToLower(t.val)]
		if !ok {
			p.fail(t.pos, "lists hold text, int or float, not %s", t.describe())
		}
		p.expect("]", "after the list element type")
		return Type{Kind: k}
	}
	t := p.ident("a type (" + typeNames + ")")
	if t.isKw("vector") {
		p.expect("<", "after vector")
		dim, _ := p.intIn("the vector dimension", 1, MaxVectorDim)
		p.expect(">", "after the vector dimension")
		return Type{Kind: TypeVector, Dim: int(dim)}
	}
	k, ok := scalarTypes[strings.ToLower(t.val)]
	if !ok {
		p.fail(t.pos, "unknown type %s (%s)", t.describe(), typeNames)
	}
	return Type{Kind: k}
}

func (p *parser) createIndex(at int) Stmt {
	p.advance() // index
	p.expectKw("on", "after create index")
	c := &CreateIndex{At: at, Coll: p.collName()}
	p.expect("(", "before the field name")
	c.Field = p.ident("a field name").val
	p.expect(")", "after the field name")
	if !p.tok.is("@") {
		p.expected("an annotation (@hash, @unique, @sorted, @text, @ttl, @hnsw)")
	}
	c.Annot = p.annot()
	return c
}

func (p *parser) dropCollection() Stmt {
	at := p.advance().pos
	p.expectKw("collection", "after drop")
	d := &DropCollection{At: at}
	if p.tok.isKw("if") {
		p.advance()
		p.expectKw("exists", "after if")
		d.IfExists = true
	}
	d.Name = p.collName()
	return d
}

// snippet is n's text for an error message, cut to about 40 bytes.
func snippet(n Node) string {
	if e, ok := n.(Expr); ok {
		if _, deep := exprHeight(e, MaxHeight); deep != nil {
			return "an expression too deep to show"
		}
	}
	return cutText(n.String())
}

// cutText cuts s to about 40 bytes on a rune boundary.
func cutText(s string) string {
	if len(s) <= 40 {
		return s
	}
	cut := 40
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
