// Package docs holds fenec's reference, design and runbook. Its test keeps
// the HTTP reference (http.md) and the routing code from drifting apart.
package docs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// routers maps every function that picks a route by comparing a request's
// path (or its segments) with literals to the path its comparisons are
// below. The scan finds such functions by what they do, wherever they are:
// one it finds that is not here fails the test, as does one here that it
// no longer finds, or that yields no route. "" for a prefix means its
// comparisons are with whole paths; skip marks a function that compares
// paths without routing (a metrics label).
var routers = map[string]string{
	"Server.ServeHTTP":  "/",                    // node: /_health, /_ready, /_metrics
	"call.admin":        "/_admin/",             // node: /_admin/...
	"call.adminTenant":  "/_admin/tenants/<t>/", // node: /_admin/tenants/<t>/...
	"call.data":         "/t/<t>/",              // node: /t/<t>/_health
	"call.dataRoute":    "/t/<t>/",              // node: the data routes
	"Router.ServeHTTP":  "",                     // router: /_metrics, /_ready, /_health, /_shard/leases
	"Router.serveShard": "/_shard/",
	"routeOf":           skip, // router: the route label of a forwarded request
}

const skip = "\x00skip"

// opaque are case conditions that route without comparing a literal the
// scan can read, by their source text, with the routes they stand for.
var opaque = map[string][]string{
	"notBuilt(seg)": {"POST /_shard/regions/<>/handoff"},
}

// route is one route the code serves: its path with <> for a segment that
// varies, and the methods named where it is picked (none: they are checked
// further in).
type route struct {
	path    string
	methods []string
	at      string // file:line, for messages
}

// TestReferenceNamesEveryRoute: every route the node's and the router's
// routing code picks is in http.md with each method it names, and every
// route http.md names is one the code picks.
func TestReferenceNamesEveryRoute(t *testing.T) {
	routes := codeRoutes(t)
	if len(routes) < 40 {
		t.Fatalf("the scan found %d routes: it no longer reads the routing code", len(routes))
	}
	doc, err := os.ReadFile("http.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := docRoutes(string(doc))
	inCode := map[string]bool{}
	for _, r := range routes {
		inCode[r.path] = true
		methods, ok := documented[r.path]
		if !ok {
			t.Errorf("%s: %s is served but not in docs/http.md", r.at, r.path)
			continue
		}
		for _, m := range r.methods {
			if !methods[m] {
				t.Errorf("%s: %s %s is served but docs/http.md does not name that method (it names %v)", r.at, m, r.path, keys(methods))
			}
		}
	}
	for p := range documented {
		if !inCode[p] {
			t.Errorf("docs/http.md names %s, which no routing code picks", p)
		}
	}
}

// docRoutes reads the routes http.md names: `METHOD /path`, optionally
// followed by (also `HEAD`).
func docRoutes(doc string) map[string]map[string]bool {
	re := regexp.MustCompile("`((?:GET|HEAD|POST|PUT|PATCH|DELETE)(?:\\|[A-Z]+)*) (/[^`\\s?]*)`( \\(also `HEAD`\\))?")
	out := map[string]map[string]bool{}
	for _, m := range re.FindAllStringSubmatch(doc, -1) {
		p := normPath(m[2])
		if out[p] == nil {
			out[p] = map[string]bool{}
		}
		for _, meth := range strings.Split(m[1], "|") {
			out[p][meth] = true
		}
		if m[3] != "" {
			out[p]["HEAD"] = true
		}
	}
	return out
}

// normPath writes every <name> segment as <> and drops a trailing slash.
func normPath(p string) string {
	p = regexp.MustCompile(`<[^>]*>`).ReplaceAllString(p, "<>")
	if len(p) > 1 {
		p = strings.TrimSuffix(p, "/")
	}
	return p
}

// codeRoutes scans every non-test Go file of the module (the tests,
// benchmarks, commands and the engine, which serves no HTTP, aside) for
// routing functions, and reads their routes.
func codeRoutes(t *testing.T) []route {
	t.Helper()
	fset := token.NewFileSet()
	seen := map[string]bool{}
	var routes []route
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "tests", "bench", "cmd", "docs", "deploy", "testdata", ".git", "engine": // engine serves no HTTP
				if path != ".." {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || !comparesPaths(fn.Body) {
				continue
			}
			name := funcName(fn)
			prefix, known := routers[name]
			if !known {
				t.Errorf("%s: %s compares request paths with literals: add it to routers in docs/reference_test.go", fset.Position(fn.Pos()), name)
				continue
			}
			seen[name] = true
			if prefix == skip {
				continue
			}
			got := routesOf(t, fset, fn, prefix)
			if len(got) == 0 {
				t.Errorf("%s: %s yields no route: the scan no longer understands it", fset.Position(fn.Pos()), name)
			}
			routes = append(routes, got...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range routers {
		if !seen[name] {
			t.Errorf("routing function %s is gone (renamed, or moved where the scan does not look): update routers in docs/reference_test.go", name)
		}
	}
	return routes
}

// funcName is Recv.Name for a method (pointer or not), Name otherwise.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}

// comparesPaths reports whether body compares a path segment (x[i]) or a
// path (a literal starting with /) with a string literal.
func comparesPaths(body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		if _, _, ok := segCompare(n); ok {
			found = true
		}
		if _, ok := pathCompare(n); ok {
			found = true
		}
		return !found
	})
	return found
}

// segCompare reads x[i] == "lit".
func segCompare(n ast.Node) (int, string, bool) {
	b, ok := n.(*ast.BinaryExpr)
	if !ok || b.Op != token.EQL {
		return 0, "", false
	}
	ix, ok1 := b.X.(*ast.IndexExpr)
	lit, ok2 := b.Y.(*ast.BasicLit)
	if !ok1 || !ok2 || lit.Kind != token.STRING {
		return 0, "", false
	}
	i, ok := intLit(ix.Index)
	if !ok {
		return 0, "", false
	}
	s, _ := strconv.Unquote(lit.Value)
	return i, s, true
}

// pathCompare reads p == "/lit".
func pathCompare(n ast.Node) (string, bool) {
	b, ok := n.(*ast.BinaryExpr)
	if !ok || b.Op != token.EQL {
		return "", false
	}
	lit, ok := b.Y.(*ast.BasicLit)
	if _, isIdent := b.X.(*ast.Ident); !ok || !isIdent || lit.Kind != token.STRING {
		return "", false
	}
	s, _ := strconv.Unquote(lit.Value)
	return s, strings.HasPrefix(s, "/")
}

func intLit(e ast.Expr) (int, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.INT {
		return 0, false
	}
	i, err := strconv.Atoi(lit.Value)
	return i, err == nil
}

// routesOf reads the routes of a routing function: the conditions of its
// switch cases and if statements, each with the methods its body names.
func routesOf(t *testing.T, fset *token.FileSet, fn *ast.FuncDecl, prefix string) []route {
	var out []route
	add := func(cond ast.Expr, body []ast.Stmt) {
		at := fset.Position(cond.Pos()).String()
		src := exprText(fset, cond)
		if rs, ok := opaque[src]; ok {
			for _, r := range rs {
				m, p, _ := strings.Cut(r, " ")
				out = append(out, route{path: normPath(p), methods: []string{m}, at: at})
			}
			return
		}
		paths, ok := condPaths(cond, prefix)
		if !ok {
			return // a prefix handed to another routing function, or no path at all
		}
		if len(paths) == 0 {
			t.Errorf("%s: a case the scan cannot read: %s (add it to opaque in docs/reference_test.go)", at, src)
			return
		}
		methods := methodsIn(body)
		for _, p := range paths {
			out = append(out, route{path: normPath(p), methods: methods, at: at})
		}
	}
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch s := n.(type) {
		case *ast.SwitchStmt:
			if s.Tag != nil {
				return true // a switch on a value (the method), not on the path
			}
			for _, c := range s.Body.List {
				cc := c.(*ast.CaseClause)
				for _, e := range cc.List {
					add(e, cc.Body)
				}
			}
		case *ast.IfStmt:
			if hasPathCompare(s.Cond) {
				add(s.Cond, s.Body.List)
			}
		}
		return true
	})
	return out
}

func hasPathCompare(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if _, _, ok := segCompare(n); ok {
			found = true
		}
		if _, ok := pathCompare(n); ok {
			found = true
		}
		return !found
	})
	return found
}

// condPaths reads one case's condition: a conjunction of len(x) == N, x[i]
// == "lit" (or a disjunction of those for one i), a call on x[i] (the
// segment varies), and p == "/lit". ok is false for a prefix handed on
// (len(x) >= N, strings.HasPrefix) or a condition naming no path; no paths
// with ok true means the scan could not read it.
func condPaths(cond ast.Expr, prefix string) ([]string, bool) {
	var (
		n      = -1
		segs   = map[int][]string{}
		whole  []string
		varies = map[int]bool{}
	)
	for _, c := range conjuncts(cond) {
		switch e := c.(type) {
		case *ast.BinaryExpr:
			if k, ok := lenCompare(e); ok {
				if e.Op == token.GEQ {
					return nil, false
				}
				n = k
				continue
			}
			if i, s, ok := segCompare(e); ok {
				segs[i] = append(segs[i], s)
				continue
			}
			if s, ok := pathCompare(e); ok {
				whole = append(whole, s)
				continue
			}
			if alts, i, ok := segAlternatives(e); ok {
				segs[i] = append(segs[i], alts...)
				continue
			}
		case *ast.CallExpr:
			if isHasPrefix(e) {
				return nil, false
			}
			for _, a := range e.Args {
				if ix, ok := a.(*ast.IndexExpr); ok {
					if i, ok := intLit(ix.Index); ok {
						varies[i] = true
					}
				}
			}
		}
	}
	if len(whole) > 0 {
		return whole, true
	}
	if len(segs) == 0 && n < 0 {
		return nil, false
	}
	if n < 0 {
		for i := range segs {
			n = max(n, i+1)
		}
	}
	paths := []string{strings.TrimSuffix(prefix, "/")}
	for i := range n {
		var next []string
		choices := segs[i]
		if len(choices) == 0 {
			choices = []string{"<>"}
		}
		for _, p := range paths {
			for _, c := range choices {
				next = append(next, p+"/"+c)
			}
		}
		paths = next
	}
	return paths, true
}

// conjuncts flattens a && b && c.
func conjuncts(e ast.Expr) []ast.Expr {
	if p, ok := e.(*ast.ParenExpr); ok {
		return conjuncts(p.X)
	}
	if b, ok := e.(*ast.BinaryExpr); ok && b.Op == token.LAND {
		return append(conjuncts(b.X), conjuncts(b.Y)...)
	}
	return []ast.Expr{e}
}

// segAlternatives reads (x[i] == "a" || x[i] == "b").
func segAlternatives(e ast.Expr) ([]string, int, bool) {
	if p, ok := e.(*ast.ParenExpr); ok {
		e = p.X
	}
	b, ok := e.(*ast.BinaryExpr)
	if !ok {
		return nil, 0, false
	}
	if i, s, ok := segCompare(b); ok {
		return []string{s}, i, true
	}
	if b.Op != token.LOR {
		return nil, 0, false
	}
	l, i, ok1 := segAlternatives(b.X)
	r, j, ok2 := segAlternatives(b.Y)
	if !ok1 || !ok2 || i != j {
		return nil, 0, false
	}
	return append(l, r...), i, true
}

// lenCompare reads len(x) == N and len(x) >= N.
func lenCompare(b *ast.BinaryExpr) (int, bool) {
	if b.Op != token.EQL && b.Op != token.GEQ {
		return 0, false
	}
	call, ok := b.X.(*ast.CallExpr)
	if !ok {
		return 0, false
	}
	if id, ok := call.Fun.(*ast.Ident); !ok || id.Name != "len" {
		return 0, false
	}
	return intLit(b.Y)
}

func isHasPrefix(c *ast.CallExpr) bool {
	sel, ok := c.Fun.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "HasPrefix"
}

// methodsIn collects the http.MethodX a case's body names.
func methodsIn(body []ast.Stmt) []string {
	var out []string
	for _, s := range body {
		ast.Inspect(s, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "http" && strings.HasPrefix(sel.Sel.Name, "Method") {
				out = append(out, strings.ToUpper(strings.TrimPrefix(sel.Sel.Name, "Method")))
			}
			return true
		})
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func exprText(fset *token.FileSet, e ast.Expr) string {
	p, q := fset.Position(e.Pos()), fset.Position(e.End())
	b, err := os.ReadFile(p.Filename)
	if err != nil || q.Offset > len(b) {
		return fmt.Sprint(e)
	}
	return string(b[p.Offset:q.Offset])
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
