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

// appendChildren appends the expressions directly under e to dst.
func appendChildren(dst []Expr, e Expr) []Expr {
	switch e := e.(type) {
	case *ListLit:
		dst = append(dst, e.Elems...)
	case *ObjectLit:
		for _, f := range e.Fields {
			dst = append(dst, f.Value)
		}
	case *Unary:
		dst = append(dst, e.X)
	case *Binary:
		dst = append(dst, e.L, e.R)
	case *Regex:
		dst = append(dst, e.X, e.Pattern)
	case *In:
		dst = append(dst, e.X, e.Set)
	case *IsNull:
		dst = append(dst, e.X)
	}
	return dst
}

// exprHeight returns the number of levels of e's tree, stopping early
// (with a node past the limit) once it passes limit. It walks with its own
// stack, so a tree of any height is safe to measure.
func exprHeight(e Expr, limit int) (int, Expr) {
	type item struct {
		e Expr
		d int
	}
	var buf [32]item
	stack := append(buf[:0], item{e, 1})
	var kbuf [16]Expr
	kids := kbuf[:0]
	height := 0
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if it.d > height {
			height = it.d
			if height > limit {
				return height, it.e
			}
		}
		kids = appendChildren(kids[:0], it.e)
		for _, k := range kids {
			if k != nil {
				stack = append(stack, item{k, it.d + 1})
			}
		}
	}
	return height, nil
}
