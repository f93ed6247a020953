package fql

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file prints expressions: parentheses only where precedence needs
// them, numbers and strings so that they read back as the same values.

// Precedence levels, loosest first; a child printed under a parent of
// higher level than its own is parenthesised.
const (
	precOr = iota + 1
	precAnd
	precNot
	precCmp
	precAdd
	precMul
	precNeg
	precPrimary
)

func exprString(e Expr) string {
	var b strings.Builder
	writeExpr(&b, e, precOr)
	return b.String()
}

func exprPrec(e Expr) int {
	switch e := e.(type) {
	case *Binary:
		switch e.Op {
		case OpOr:
			return precOr
		case OpAnd:
			return precAnd
		case OpAdd, OpSub:
			return precAdd
		case OpMul, OpDiv:
			return precMul
		}
		return precCmp
	case *Regex, *In, *IsNull:
		return precCmp
	case *Unary:
		if e.Op == OpNot {
			return precNot
		}
		return precNeg
	}
	return precPrimary
}

func writeExpr(b *strings.Builder, e Expr, min int) {
	if e == nil {
		b.WriteString("?nil")
		return
	}
	if exprPrec(e) < min {
		b.WriteByte('(')
		writeExpr(b, e, precOr)
		b.WriteByte(')')
		return
	}
	switch e := e.(type) {
	case *Binary:
		writeBinary(b, e)
	case *Regex:
		writeExpr(b, e.X, precAdd)
		b.WriteString(" ~ ")
		writeExpr(b, e.Pattern, precAdd)
	case *In:
		writeExpr(b, e.X, precAdd)
		b.WriteString(" in ")
		if l, ok := e.Set.(*ListLit); ok {
			b.WriteByte('(')
			writeList(b, l.Elems)
			b.WriteByte(')')
		} else {
			writeExpr(b, e.Set, precPrimary)
		}
	case *IsNull:
		writeExpr(b, e.X, precAdd)
		if e.Not {
			b.WriteString(" is not null")
		} else {
			b.WriteString(" is null")
		}
	case *Unary:
		writeUnary(b, e)
	default:
		b.WriteString(e.String())
	}
}

var binaryOps = map[BinaryOp]string{
	OpAdd: "+", OpSub: "-", OpMul: "*", OpDiv: "/",
	OpEq: "=", OpNe: "!=", OpLt: "<", OpLe: "<=", OpGt: ">", OpGe: ">=",
	OpHas: "has", OpAnd: "and", OpOr: "or",
}

// String returns the operator as written.
func (op BinaryOp) String() string {
	if s, ok := binaryOps[op]; ok {
		return s
	}
	return "?op"
}

func writeBinary(b *strings.Builder, e *Binary) {
	p := exprPrec(e)
	left, right := p, p+1 // left-associative
	if p == precCmp {
		left, right = precAdd, precAdd // comparisons do not chain
	}
	writeExpr(b, e.L, left)
	b.WriteByte(' ')
	b.WriteString(e.Op.String())
	b.WriteByte(' ')
	writeExpr(b, e.R, right)
}

func writeUnary(b *strings.Builder, e *Unary) {
	if e.Op == OpNot {
		b.WriteString("not ")
		writeExpr(b, e.X, precNot)
		return
	}
	b.WriteByte('-')
	var inner strings.Builder
	writeExpr(&inner, e.X, precNeg)
	s := inner.String()
	if lit, ok := e.X.(*Literal); ok && isNumber(lit.Value) {
		// -(5) is a negation of a literal; -5 would parse as the literal -5.
		s = "(" + s + ")"
	} else if strings.HasPrefix(s, "-") {
		b.WriteByte(' ')
	}
	b.WriteString(s)
}

func isNumber(v any) bool {
	switch v.(type) {
	case int64, float64:
		return true
	}
	return false
}

func writeList(b *strings.Builder, elems []Expr) {
	for i, x := range elems {
		if i > 0 {
			b.WriteString(", ")
		}
		writeExpr(b, x, precOr)
	}
}

func (n *Literal) String() string { return literalString(n.Value) }

func literalString(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		if v {
			return "true"
		}
		return "false"
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return formatFloat(v)
	case string:
		return quote(v)
	}
	return "?literal"
}

// formatFloat writes f so that it reads back as the same float64 (and as a
// float, not an integer).
func formatFloat(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return "?float"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

// quote writes s as a double-quoted string literal.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				b.WriteString(`\u00`)
				b.WriteByte("0123456789abcdef"[r>>4])
				b.WriteByte("0123456789abcdef"[r&15])
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// keyString writes an object key bare when it reads back as an identifier.
func keyString(k string) string {
	if isIdent(k) {
		return k
	}
	return quote(k)
}

func isIdent(s string) bool {
	if s == "" || len(s) > MaxIdent || !utf8.ValidString(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func (n *Param) String() string { return "$" + strconv.Itoa(n.N) }
func (n *Field) String() string { return n.Path.String() }
func (n *Now) String() string   { return "now()" }

func (n *ListLit) String() string {
	var b strings.Builder
	b.WriteByte('[')
	writeList(&b, n.Elems)
	b.WriteByte(']')
	return b.String()
}

func (n *ObjectLit) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, f := range n.Fields {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(keyString(f.Key))
		b.WriteString(": ")
		writeExpr(&b, f.Value, precOr)
	}
	b.WriteByte('}')
	return b.String()
}

func (n *Unary) String() string  { return exprString(n) }
func (n *Binary) String() string { return exprString(n) }
func (n *Regex) String() string  { return exprString(n) }
func (n *In) String() string     { return exprString(n) }
func (n *IsNull) String() string { return exprString(n) }
