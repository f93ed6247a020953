package fql

import (
	"fmt"
	"math"
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

// rowCount consumes an integer literal counting rows (a limit or an
// offset), refusing one past MaxRows with ErrTooMany.
func (p *parser) rowCount(what string) int64 {
	v, pos := p.intIn(what, 0, math.MaxInt64)
	if v > MaxRows {
		p.failRows(pos, "%s must be between 0 and %d, not %d", what, MaxRows, v)
	}
	return v
}

// failRows fails at pos with ErrTooMany.
func (p *parser) failRows(pos int, format string, args ...any) {
	panic(&Error{Pos: pos, Msg: fmt.Sprintf(format, args...), Err: ErrTooMany})
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
	case t.isKw("compact"):
		return &Compact{At: p.advance().pos}
	}
	p.expected("a statement (get, put, insert, set, del, create, drop, compact)")
	return nil
}

// collName consumes a collection name.
func (p *parser) collName() string { return p.ident("a collection name").val }

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
