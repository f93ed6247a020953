package engine

import (
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/fenec-go/fenec/engine/fql"
)

// runner runs statements against a state: for a block under the write
// lock (t set), for a read under the read lock (t nil).
type runner struct {
	st     *state
	t      *txn
	params []any
	now    int64 // ms
	// sets are the hashed lists of the statement's ins (fql.SetCache).
	sets map[*fql.In]*fql.ValueSet
	// stop ends the statement with its context (stop.go); nil never does.
	stop *stopper
	// lazy: a get's rows may be left to encode after the lock
	// (DB.ReadStream, answer.go).
	lazy bool
	// charge is told the bytes of answer rows as they are built (nil: not
	// counted).
	charge func(int64) error
}

// run executes one parsed statement. A statement stopped part way
// answers ErrStopped whatever its loops made of the stop.
func (r *runner) run(stmt fql.Stmt) (_ *Result, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer catchFault(&err)
	if r.stop.check() {
		return nil, r.stop.err
	}
	res, err := r.runStmt(stmt)
	if err := r.stop.stopped(); err != nil {
		return nil, err
	}
	return res, err
}

func (r *runner) runStmt(stmt fql.Stmt) (*Result, error) {
	switch s := stmt.(type) {
	case *fql.Get:
		return r.runGet(s)
	case *fql.CreateCollection:
		return r.runCreate(s)
	case *fql.DropCollection:
		return r.runDrop(s)
	case *fql.CreateIndex:
		return r.runIndex(s)
	case *fql.Put:
		return r.runPut(s.Coll, s.Docs, s.IfAbsent, false, s.Require)
	case *fql.Insert:
		return r.runPut(s.Coll, s.Docs, false, true, s.Require)
	case *fql.Set:
		return r.runSet(s)
	case *fql.Del:
		return r.runDel(s)
	case *fql.Compact:
		return nil, fmt.Errorf("%w: compact runs on its own, not in a block with other statements", ErrInvalid)
	}
	return nil, fmt.Errorf("%w: statement %T", ErrInvalid, stmt)
}

// isWrite says whether a statement needs the write lock: whatever does
// not only read.
func isWrite(stmt fql.Stmt) bool { return !stmt.ReadOnly() }

func (r *runner) coll(name string) (*collection, error) {
	c := r.st.colls[name]
	if c == nil {
		return nil, fmt.Errorf("%w: %s", ErrUnknownCollection, name)
	}
	return c, nil
}

func (r *runner) needTxn() error {
	if r.t == nil {
		return fmt.Errorf("%w: a write outside a block", ErrInvalid)
	}
	return nil
}

func (r *runner) runCreate(s *fql.CreateCollection) (*Result, error) {
	if err := r.needTxn(); err != nil {
		return nil, err
	}
	if err := checkName(s.Name); err != nil {
		return nil, err
	}
	if _, ok := r.st.colls[s.Name]; ok {
		if s.IfNotExists {
			return &Result{Kind: ResultMessage, Message: "collection " + s.Name + " exists"}, nil // nothing written
		}
		return nil, fmt.Errorf("%w: collection %s exists", ErrInvalid, s.Name)
	}
	fields := make([]fieldSpec, len(s.Fields))
	for i, fd := range s.Fields {
		f, err := fieldFromAST(fd.Name, fd.Type, fd.Required, fd.Annots)
		if err != nil {
			return nil, err
		}
		fields[i] = f
	}
	sch, err := newSchema(s.Name, fields)
	if err != nil {
		return nil, err
	}
	if _, err := r.t.createColl(sch); err != nil {
		return nil, err
	}
	return &Result{Kind: ResultMessage, Write: true, Message: "created collection " + s.Name}, nil
}

func checkName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("%w: collection name %q", ErrInvalid, name)
	}
	return nil
}

func (r *runner) runDrop(s *fql.DropCollection) (*Result, error) {
	if err := r.needTxn(); err != nil {
		return nil, err
	}
	if _, ok := r.st.colls[s.Name]; !ok {
		if s.IfExists {
			return &Result{Kind: ResultMessage, Message: "no collection " + s.Name}, nil // nothing written
		}
		return nil, fmt.Errorf("%w: %s", ErrUnknownCollection, s.Name)
	}
	if err := r.t.dropColl(s.Name); err != nil {
		return nil, err
	}
	return &Result{Kind: ResultMessage, Write: true, Message: "dropped collection " + s.Name}, nil
}

func (r *runner) runIndex(s *fql.CreateIndex) (*Result, error) {
	if err := r.needTxn(); err != nil {
		return nil, err
	}
	c, err := r.coll(s.Coll)
	if err != nil {
		return nil, err
	}
	i := c.sch.field(s.Field)
	if i < 0 {
		return nil, fmt.Errorf("%w: %s in %s", ErrUnknownField, s.Field, s.Coll)
	}
	spec := c.sch.Fields[i]
	if err := applyAnnot(&spec, s.Annot); err != nil {
		return nil, err
	}
	if err := r.t.createIndex(c, spec); err != nil {
		return nil, err
	}
	return &Result{Kind: ResultMessage, Write: true, Message: "created index on " + s.Coll + " (" + s.Field + ")"}, nil
}

// fieldFromAST turns a parsed field declaration into a fieldSpec.
func fieldFromAST(name string, t fql.Type, required bool, annots []fql.Annot) (fieldSpec, error) {
	f := fieldSpec{Name: name, Required: required}
	switch t.Kind {
	case fql.TypeBool:
		f.Type.kind = tBool
	case fql.TypeInt:
		f.Type.kind = tInt
	case fql.TypeFloat:
		f.Type.kind = tFloat
	case fql.TypeText:
		f.Type.kind = tText
	case fql.TypeTimestamp:
		f.Type.kind = tTimestamp
	case fql.TypeJSON:
		f.Type.kind = tJSON
	case fql.TypeVector:
		f.Type = fieldType{kind: tVector, dim: t.Dim}
	case fql.TypeTextList:
		f.Type.kind = tListText
	case fql.TypeIntList:
		f.Type.kind = tListInt
	case fql.TypeFloatList:
		f.Type.kind = tListFloat
	default:
		return f, fmt.Errorf("%w: type of %s", ErrInvalid, name)
	}
	for _, a := range annots {
		if err := applyAnnot(&f, a); err != nil {
			return f, err
		}
	}
	return f, checkAnnotations(&f)
}

func applyAnnot(f *fieldSpec, a fql.Annot) error {
	switch a.Kind {
	case fql.AnnotHash:
		f.Hash = true
	case fql.AnnotUnique:
		f.Unique = true
	case fql.AnnotSorted:
		f.Sorted = true
	case fql.AnnotText:
		f.Text, f.TextK1, f.TextB = true, a.K1, a.B
	case fql.AnnotTTL:
		f.TTLms = a.TTLms
	case fql.AnnotHNSW:
		f.HNSW = &hnswSpec{Metric: a.Metric, M: a.M, EfConstruction: a.EfConstruction, EfSearch: a.EfSearch}
	default:
		return fmt.Errorf("%w: annotation on %s", ErrInvalid, f.Name)
	}
	return nil
}

// rowEnv evaluates expressions against one document (or none).
type rowEnv struct {
	r     *runner
	c     *collection
	d     *doc
	score float64
	hasSc bool
}

func (e *rowEnv) Field(p []string) (any, bool) {
	if e.d == nil || len(p) == 0 {
		return nil, false
	}
	var v any
	switch p[0] {
	case "id":
		v = e.d.id
	case "_score":
		if !e.hasSc {
			return nil, false
		}
		v = e.score
	default:
		i := e.c.sch.field(p[0])
		if i < 0 {
			return nil, false
		}
		v = e.d.val(i)
	}
	for _, k := range p[1:] {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, v != nil
}

func (e *rowEnv) Param(n int) (any, error) {
	if n < 1 || n > len(e.r.params) {
		return nil, fmt.Errorf("%w: $%d of %d", fql.ErrParam, n, len(e.r.params))
	}
	return e.r.params[n-1], nil
}

func (e *rowEnv) Now() int64 { return e.r.now }

// InSet and KeepInSet keep, for the statement, the hashed list of each in
// whose list is the same for every row (fql.SetCache).
func (e *rowEnv) InSet(x *fql.In) *fql.ValueSet {
	if e.r == nil {
		return nil
	}
	return e.r.sets[x]
}

func (e *rowEnv) KeepInSet(x *fql.In, s *fql.ValueSet) {
	if e.r == nil {
		return
	}
	if e.r.sets == nil {
		e.r.sets = make(map[*fql.In]*fql.ValueSet)
	}
	e.r.sets[x] = s
}

// eval evaluates x with no row (literals, params, now(), arithmetic).
func (r *runner) eval(x fql.Expr) (any, error) {
	v, err := fql.Eval(x, &rowEnv{r: r})
	return v, evalErr(err)
}

// evalErr maps the evaluator's errors to the engine's.
func evalErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrStopped):
		return err
	case errors.Is(err, fql.ErrType), errors.Is(err, fql.ErrOverflow), errors.Is(err, fql.ErrDivZero):
		return fmt.Errorf("%w: %v", ErrType, err)
	}
	return fmt.Errorf("%w: %v", ErrInvalid, err)
}

// checkFields refuses an expression naming a field c does not have.
func checkFields(c *collection, x fql.Expr) error {
	var err error
	walkExpr(x, func(e fql.Expr) {
		f, ok := e.(*fql.Field)
		if !ok || err != nil {
			return
		}
		if n := f.Path[0]; n != "id" && n != "_score" && c.sch.field(n) < 0 {
			err = fmt.Errorf("%w: %s in %s", ErrUnknownField, n, c.sch.Name)
		}
	})
	return err
}

// walkExpr calls fn on x and every expression under it.
func walkExpr(x fql.Expr, fn func(fql.Expr)) {
	if x == nil {
		return
	}
	fn(x)
	switch e := x.(type) {
	case *fql.ListLit:
		for _, el := range e.Elems {
			walkExpr(el, fn)
		}
	case *fql.ObjectLit:
		for _, f := range e.Fields {
			walkExpr(f.Value, fn)
		}
	case *fql.Unary:
		walkExpr(e.X, fn)
	case *fql.Binary:
		walkExpr(e.L, fn)
		walkExpr(e.R, fn)
	case *fql.Regex:
		walkExpr(e.X, fn)
		walkExpr(e.Pattern, fn)
	case *fql.In:
		walkExpr(e.X, fn)
		walkExpr(e.Set, fn)
	case *fql.IsNull:
		walkExpr(e.X, fn)
	}
}

// holds says whether x has a node of type T anywhere in it.
func holds[T fql.Expr](x fql.Expr) bool {
	found := false
	walkExpr(x, func(e fql.Expr) {
		if _, ok := e.(T); ok {
			found = true
		}
	})
	return found
}

// isConst says whether x reads no field of a row.
func isConst(x fql.Expr) bool { return !holds[*fql.Field](x) }

func usesNow(x fql.Expr) bool { return holds[*fql.Now](x) }

func checkRequire(req *int64, n int64) error {
	if req != nil && *req != n {
		return fmt.Errorf("%w: wanted %d rows, affected %d", ErrRequire, *req, n)
	}
	return nil
}
