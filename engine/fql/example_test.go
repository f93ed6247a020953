package fql_test

import (
	"fmt"

	"github.com/fenec-go/fenec/engine/fql"
)

func ExampleParse() {
	st, err := fql.Parse(`GET orders SELECT status, count(*) AS n WHERE total > $1 GROUP status ORDER n DESC LIMIT 3`)
	if err != nil {
		fmt.Println(err)
		return
	}
	g := st.(*fql.Get)
	fmt.Println(g.Coll, len(g.Select), g.Select[1].Name(), *g.Limit, fql.Params(st))
	fmt.Println(st)

	_, err = fql.Parse(`get orders where (total > 1`)
	fmt.Println(err)
	// Output:
	// orders 2 n 3 1
	// get orders select status, count(*) as n where total > $1 group status order n desc limit 3
	// parse error at 27: expected ')' to close '(', found end of statement
}

// row is an Env over one flat row with a fixed clock.
type row map[string]any

func (r row) Field(path []string) (any, bool) { v, ok := r[path[0]]; return v, ok }
func (r row) Param(n int) (any, error)        { return []any{"open", "paid"}, nil }
func (r row) Now() int64                      { return 1_700_000_000_000 }

func ExampleEval() {
	cond, err := fql.ParseExpr(`status in $1 and total * 2 >= 20.5 and note is null`)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range []row{
		{"status": "paid", "total": int64(11)},
		{"status": "paid", "total": 10.0},
		{"status": "new", "total": int64(99)},
	} {
		v, err := fql.Eval(cond, r)
		fmt.Println(fql.Truthy(v), err)
	}
	_, err = fql.Eval(&fql.Binary{Op: fql.OpMul, L: &fql.Literal{Value: "a"}, R: &fql.Literal{Value: int64(2)}}, row{})
	fmt.Println(err)
	// Output:
	// true <nil>
	// false <nil>
	// false <nil>
	// text * int: wrong type
}
