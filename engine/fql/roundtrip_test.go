package fql

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// exprGen builds random expression trees, including shapes the parser
// only makes from parenthesised text, to check that printing and parsing
// agree.
type exprGen struct{ r *rand.Rand }

var genNames = []string{"a", "b", "_x", "Tags", "meta", "n1", "count", "order", "is"}

func (g exprGen) name() string { return genNames[g.r.IntN(len(genNames))] }

func (g exprGen) literal() Expr {
	var v any
	switch g.r.IntN(8) {
	case 0:
		v = nil
	case 1:
		v = g.r.IntN(2) == 0
	case 2:
		v = g.r.Int64() - g.r.Int64()
	case 3:
		v = int64(g.r.IntN(100)) - 50
	case 4:
		v = (g.r.Float64() - 0.5) * 1e6
	case 5:
		v = g.r.NormFloat64() * 1e-300
	case 6:
		v = []string{"", "x", `q"uote`, "back\\slash", "tab\tnl\n", "é€😀", "\x00\x1f\x7f", "'"}[g.r.IntN(8)]
	default:
		v = float64(g.r.IntN(10))
	}
	return &Literal{Value: v}
}

func (g exprGen) expr(depth int) Expr {
	if depth <= 0 {
		switch g.r.IntN(4) {
		case 0:
			return g.literal()
		case 1:
			return &Param{N: 1 + g.r.IntN(9)}
		case 2:
			return &Now{}
		}
		path := Path{g.name()}
		for g.r.IntN(3) == 0 {
			path = append(path, g.name())
		}
		return &Field{Path: path}
	}
	d := depth - 1
	switch g.r.IntN(9) {
	case 0:
		n := g.r.IntN(3)
		l := &ListLit{}
		for range n {
			l.Elems = append(l.Elems, g.expr(d))
		}
		return l
	case 1:
		o := &ObjectLit{}
		for i := range g.r.IntN(3) {
			key := []string{"k", "with space", "é", "1x", "ok_2"}[g.r.IntN(5)] + strings.Repeat("z", i)
			o.Fields = append(o.Fields, ObjField{Key: key, Value: g.expr(d)})
		}
		return o
	case 2:
		op := OpNeg
		if g.r.IntN(2) == 0 {
			op = OpNot
		}
		return &Unary{Op: op, X: g.expr(d)}
	case 3:
		pat := Expr(&Param{N: 1})
		if g.r.IntN(2) == 0 {
			pat = &Literal{Value: []string{"^a", "b+$", `\d`, "(?i)x|y"}[g.r.IntN(4)]}
		}
		return &Regex{X: g.expr(d), Pattern: pat}
	case 4:
		set := Expr(&Param{N: 2})
		if g.r.IntN(2) == 0 {
			set = g.expr(d)
			if _, ok := set.(*ListLit); !ok {
				set = &ListLit{Elems: []Expr{set}}
			}
		}
		return &In{X: g.expr(d), Set: set}
	case 5:
		return &IsNull{X: g.expr(d), Not: g.r.IntN(2) == 0}
	}
	return &Binary{Op: BinaryOp(1 + g.r.IntN(int(OpOr))), L: g.expr(d), R: g.expr(d)}
}

// TestPrintParseRoundTrip prints random trees and parses them back: the
// text must parse, and to a tree that prints the same.
func TestPrintParseRoundTrip(t *testing.T) {
	g := exprGen{r: rand.New(rand.NewPCG(1, 2))}
	for i := range 3000 {
		e := g.expr(1 + i%6)
		text := e.String()
		back, err := ParseExpr(text)
		if err != nil {
			t.Fatalf("printed %q does not parse: %v", text, err)
		}
		if got := back.String(); got != text {
			t.Fatalf("round trip changed the text:\n%s\n%s", text, got)
		}
		// The same tree inside statements.
		for _, st := range []string{"get t where " + text, "set t {a: " + text + "} where " + text} {
			s, err := Parse(st)
			if err != nil {
				t.Fatalf("Parse(%q): %v", st, err)
			}
			if got := s.String(); got != st {
				t.Fatalf("statement round trip:\n%s\n%s", st, got)
			}
		}
	}
}
