package fql

import (
	"strconv"
	"strings"
)

// Expression grammar, loosest first:
//
//	expr    = and {"or" and}
//	and     = not {"and" not}
//	not     = "not" not | cmp
//	cmp     = add [("=" | "!=" | "<" | "<=" | ">" | ">=" | "~" | "has") add
//	              | "in" ("(" [expr {"," expr}] ")" | list | param)
//	              | "is" ["not"] "null"]
//	add     = mul {("+" | "-") mul}
//	mul     = unary {("*" | "/") unary}
//	unary   = "-" unary | primary
//	primary = literal | param | "now" "(" ")" | path | "(" expr ")" | list | object

func (p *parser) expr() Expr {
	l := p.and()
	for p.tok.isKw("or") {
		p.advance()
		l = &Binary{At: l.Pos(), Op: OpOr, L: l, R: p.and()}
	}
	return l
}

func (p *parser) and() Expr {
	l := p.not()
	for p.tok.isKw("and") {
		p.advance()
		l = &Binary{At: l.Pos(), Op: OpAnd, L: l, R: p.not()}
	}
	return l
}

func (p *parser) not() Expr {
	if !p.tok.isKw("not") {
		return p.cmp()
	}
	at := p.advance().pos
	p.enter(at)
	x := p.not()
	p.leave()
	return &Unary{At: at, Op: OpNot, X: x}
}

var cmpOps = map[string]BinaryOp{"=": OpEq, "!=": OpNe, "<": OpLt, "<=": OpLe, ">": OpGt, ">=": OpGe}

func (p *parser) cmp() Expr {
	l := p.add()
	switch {
	case p.tok.kind == tPunct && cmpOps[p.tok.val] != 0:
		opTok := p.advance()
		switch next := p.tok; {
		case opTok.val == "=" && next.is("=") && next.pos == opTok.end:
			p.fail(opTok.pos, "write = to compare, not ==")
		case opTok.val == "<" && next.is(">") && next.pos == opTok.end:
			p.fail(opTok.pos, "write != to compare, not <>")
		}
		return &Binary{At: l.Pos(), Op: cmpOps[opTok.val], L: l, R: p.add()}
	case p.tok.isKw("has"):
		p.advance()
		return &Binary{At: l.Pos(), Op: OpHas, L: l, R: p.add()}
	case p.tok.is("~"):
		p.advance()
		return p.regex(l)
	case p.tok.isKw("in"):
		p.advance()
		in := &In{At: l.Pos(), X: l, Set: p.inSet()}
		if l := literalList(in.Set); l != nil {
			in.konst = NewValueSet(l)
		}
		in.fixed = readsNoRow(in.Set)
		return in
	case p.tok.isKw("is"):
		p.advance()
		not := p.acceptKw("not")
		p.expectKw("null", "after is")
		return &IsNull{At: l.Pos(), X: l, Not: not}
	}
	return l
}

// regex parses the pattern of X ~ PATTERN; a literal pattern is compiled
// here so a bad one is a parse error.
func (p *parser) regex(x Expr) Expr {
	pat := p.add()
	r := &Regex{At: x.Pos(), X: x, Pattern: pat}
	if lit, ok := pat.(*Literal); ok {
		s, ok := lit.Value.(string)
		if !ok {
			p.fail(lit.At, "the pattern after ~ must be text, found %s", snippet(lit))
		}
		c, err := compileRegex(s)
		if err != nil {
			p.fail(lit.At, "%s", err.Error())
		}
		r.re.Store(c)
	}
	return r
}

// inSet parses what follows in: a parenthesised or bracketed list, or a
// parameter holding a list.
func (p *parser) inSet() Expr {
	switch {
	case p.tok.is("("):
		at := p.advance().pos
		p.enter(at)
		l := &ListLit{At: at, Elems: p.exprList(")", "after the values of in")}
		p.leave()
		return l
	case p.tok.is("["):
		return p.list()
	case p.tok.kind == tParam:
		return p.primary()
	}
	p.expected("'(' with values or a parameter after in")
	return nil
}

// literalList returns the values of a list made only of literals, or nil.
func literalList(e Expr) []any {
	l, ok := e.(*ListLit)
	if !ok {
		return nil
	}
	vals := make([]any, len(l.Elems))
	for i, x := range l.Elems {
		lit, ok := x.(*Literal)
		if !ok {
			return nil
		}
		vals[i] = lit.Value
	}
	return vals
}

// exprList parses [expr {"," expr}] and the closing punctuation.
func (p *parser) exprList(closer, context string) []Expr {
	var xs []Expr
	if p.accept(closer) {
		return xs
	}
	for {
		xs = append(xs, p.expr())
		if !p.accept(",") {
			break
		}
	}
	p.expect(closer, context)
	return xs
}

func (p *parser) add() Expr {
	l := p.mul()
	for p.tok.is("+") || p.tok.is("-") {
		op := OpAdd
		if p.advance().val == "-" {
			op = OpSub
		}
		l = &Binary{At: l.Pos(), Op: op, L: l, R: p.mul()}
	}
	return l
}

func (p *parser) mul() Expr {
	l := p.unary()
	for p.tok.is("*") || p.tok.is("/") {
		op := OpMul
		if p.advance().val == "/" {
			op = OpDiv
		}
		l = &Binary{At: l.Pos(), Op: op, L: l, R: p.unary()}
	}
	return l
}

func (p *parser) unary() Expr {
	if !p.tok.is("-") {
		return p.primary()
	}
	if next := p.peek(); next.kind == tInt || next.kind == tFloat {
		at := p.advance().pos
		return p.numberLit(at, "-")
	}
	at := p.advance().pos
	p.enter(at)
	x := p.unary()
	p.leave()
	return &Unary{At: at, Op: OpNeg, X: x}
}

// numberLit consumes a number token as a literal, with sign ("" or "-")
// written before it at position at.
func (p *parser) numberLit(at int, sign string) Expr {
	t := p.advance()
	if t.kind == tInt {
		v, err := strconv.ParseInt(sign+t.val, 10, 64)
		if err != nil {
			p.fail(at, "integer %s%s does not fit in 64 bits", sign, cutText(t.val))
		}
		return &Literal{At: at, Value: v}
	}
	v, err := strconv.ParseFloat(sign+t.val, 64)
	if err != nil {
		p.fail(at, "number %s%s is out of range", sign, cutText(t.val))
	}
	return &Literal{At: at, Value: v}
}

func (p *parser) primary() Expr {
	t := p.tok
	switch t.kind {
	case tInt, tFloat:
		return p.numberLit(t.pos, "")
	case tString:
		p.advance()
		return &Literal{At: t.pos, Value: t.val}
	case tParam:
		p.advance()
		n, err := strconv.Atoi(t.val)
		if err != nil || n < 1 || n > MaxParam {
			p.fail(t.pos, "parameters are numbered $1 to $%d, not $%s", MaxParam, cutText(t.val))
		}
		return &Param{At: t.pos, N: n}
	case tIdent:
		return p.identExpr()
	}
	switch {
	case t.is("("):
		p.advance()
		p.enter(t.pos)
		e := p.expr()
		p.expect(")", "to close '('")
		p.leave()
		return e
	case t.is("["):
		return p.list()
	case t.is("{"):
		return p.object()
	}
	p.expected("an expression")
	return nil
}

// identExpr parses true, false, null, now() or a field path.
func (p *parser) identExpr() Expr {
	t := p.tok
	switch strings.ToLower(t.val) {
	case "true", "false":
		p.advance()
		return &Literal{At: t.pos, Value: strings.EqualFold(t.val, "true")}
	case "null":
		p.advance()
		return &Literal{At: t.pos}
	case "now":
		if p.peek().is("(") {
			p.advance()
			p.advance()
			p.expect(")", "after now(")
			return &Now{At: t.pos}
		}
	}
	return &Field{At: t.pos, Path: p.path("a field")}
}

func (p *parser) list() *ListLit {
	at := p.expect("[", "to open a list").pos
	p.enter(at)
	l := &ListLit{At: at, Elems: p.exprList("]", "to close the list")}
	p.leave()
	return l
}

// object parses {KEY: EXPR, ...} with bare or quoted keys, each once.
func (p *parser) object() *ObjectLit {
	at := p.expect("{", "to open an object").pos
	p.enter(at)
	o := &ObjectLit{At: at}
	seen := map[string]bool{}
	if !p.accept("}") {
		for {
			k := p.tok
			if k.kind != tIdent && k.kind != tString {
				p.expected("a key (a name or a quoted string)")
			}
			p.advance()
			if seen[k.val] {
				p.fail(k.pos, "key %s given twice", strconv.Quote(k.val))
			}
			seen[k.val] = true
			p.expect(":", "after the key "+strconv.Quote(k.val))
			o.Fields = append(o.Fields, ObjField{At: k.pos, Key: k.val, Value: p.expr()})
			if !p.accept(",") {
				break
			}
		}
		p.expect("}", "to close the object")
	}
	p.leave()
	return o
}
