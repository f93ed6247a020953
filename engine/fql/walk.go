package fql

// Inspect walks the AST below n depth-first, calling f for n and then for
// each expression it holds (statements' documents, values, conditions,
// lookups' conditions). If f returns false, Inspect does not go below that
// node. Nil expressions are skipped.
func Inspect(n Node, f func(Node) bool) {
	if n == nil || !f(n) {
		return
	}
	expr := func(e Expr) {
		if e != nil {
			Inspect(e, f)
		}
	}
	switch n := n.(type) {
	case *Put:
		expr(n.Docs)
	case *Insert:
		expr(n.Docs)
	case *Set:
		for _, a := range n.Assigns {
			expr(a.Value)
		}
		expr(n.Where)
	case *Del:
		expr(n.Where)
	case *Get:
		expr(n.Where)
		if n.Match != nil {
			expr(n.Match.Query)
		}
		if n.Near != nil {
			expr(n.Near.Vector)
		}
		for l := n.Lookup; l != nil; l = l.Lookup {
			expr(l.Where)
		}
	case *ListLit:
		for _, x := range n.Elems {
			expr(x)
		}
	case *ObjectLit:
		for _, fl := range n.Fields {
			expr(fl.Value)
		}
	case *Unary:
		expr(n.X)
	case *Binary:
		expr(n.L)
		expr(n.R)
	case *Regex:
		expr(n.X)
		expr(n.Pattern)
	case *In:
		expr(n.X)
		expr(n.Set)
	case *IsNull:
		expr(n.X)
	}
}

// Params returns the highest $n the node uses (0 for none), so a caller
// can check that enough parameters were sent.
func Params(n Node) int {
	max := 0
	Inspect(n, func(n Node) bool {
		if p, ok := n.(*Param); ok && p.N > max {
			max = p.N
		}
		return true
	})
	return max
}
