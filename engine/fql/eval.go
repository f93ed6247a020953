package fql

import (
	"fmt"
	"math"
)

// Env is what an expression sees while it is evaluated against one row.
type Env interface {
	// Field returns the value at path in the current row (path[0] a
	// field, the rest keys into a json value); false when it is missing.
	// Values follow the package's convention (nil, bool, int64, float64,
	// string, []float32, []any, map[string]any).
	Field(path []string) (any, bool)
	// Param returns parameter n (1-based) as the caller received it
	// (JSON-decoded); Eval normalises it. An error for an n not supplied.
	Param(n int) (any, error)
	// Now is the statement's clock in milliseconds since the epoch; it
	// should return the same value for every row of one statement.
	Now() int64
}

// Eval evaluates e against env. Conditions give a bool (see Truthy);
// arithmetic gives int64, float64 or string; a missing field is nil. The
// errors wrap ErrType, ErrOverflow, ErrDivZero, ErrParam or ErrRegex.
func Eval(e Expr, env Env) (any, error) {
	switch e := e.(type) {
	case *Literal:
		return e.Value, nil
	case *Field:
		v, _ := env.Field(e.Path)
		return v, nil
	case *Param:
		return evalParam(e.N, env)
	case *Now:
		return env.Now(), nil
	case *Binary:
		return evalBinary(e, env)
	case *Unary:
		return evalUnary(e, env)
	case *IsNull:
		v, err := Eval(e.X, env)
		if err != nil {
			return nil, err
		}
		return (v == nil) != e.Not, nil
	case *In:
		return evalIn(e, env)
	case *Regex:
		return evalRegex(e, env)
	case *ListLit:
		out := make([]any, len(e.Elems))
		for i, x := range e.Elems {
			v, err := Eval(x, env)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case *ObjectLit:
		out := make(map[string]any, len(e.Fields))
		for _, f := range e.Fields {
			v, err := Eval(f.Value, env)
			if err != nil {
				return nil, err
			}
			out[f.Key] = v
		}
		return out, nil
	case nil:
		return nil, fmt.Errorf("nil expression: %w", ErrType)
	}
	return nil, fmt.Errorf("expression %T: %w", e, ErrType)
}

func evalParam(n int, env Env) (any, error) {
	v, err := env.Param(n)
	if err != nil {
		return nil, fmt.Errorf("$%d: %w", n, err)
	}
	v, err = Normalize(v)
	if err != nil {
		return nil, fmt.Errorf("$%d: %w", n, err)
	}
	return v, nil
}

func evalUnary(e *Unary, env Env) (any, error) {
	x, err := Eval(e.X, env)
	if err != nil {
		return nil, err
	}
	if e.Op == OpNot {
		return !Truthy(x), nil
	}
	switch x := x.(type) {
	case nil:
		return nil, nil
	case int64:
		if x == math.MinInt64 {
			return nil, fmt.Errorf("-(%d): %w", x, ErrOverflow)
		}
		return -x, nil
	case float64:
		return -x, nil
	}
	return nil, fmt.Errorf("-%s: %w", TypeName(x), ErrType)
}

func evalBinary(e *Binary, env Env) (any, error) {
	l, err := Eval(e.L, env)
	if err != nil {
		return nil, err
	}
	switch e.Op {
	case OpAnd:
		if !Truthy(l) {
			return false, nil
		}
		r, err := Eval(e.R, env)
		return Truthy(r), err
	case OpOr:
		if Truthy(l) {
			return true, nil
		}
		r, err := Eval(e.R, env)
		return Truthy(r), err
	}
	r, err := Eval(e.R, env)
	if err != nil {
		return nil, err
	}
	switch e.Op {
	case OpAdd, OpSub, OpMul, OpDiv:
		return Arith(e.Op, l, r)
	case OpEq:
		return Equal(l, r), nil
	case OpNe:
		return l != nil && r != nil && !Equal(l, r), nil
	case OpLt, OpLe, OpGt, OpGe:
		c, ok := Compare(l, r)
		if !ok {
			return false, nil
		}
		switch e.Op {
		case OpLt:
			return c < 0, nil
		case OpLe:
			return c <= 0, nil
		case OpGt:
			return c > 0, nil
		}
		return c >= 0, nil
	case OpHas:
		return Has(l, r), nil
	}
	return nil, fmt.Errorf("operator %d: %w", e.Op, ErrType)
}

// Has reports whether list holds an element Equal to v; false when list
// is not a list or v is null.
func Has(list, v any) bool {
	if v == nil {
		return false
	}
	switch l := list.(type) {
	case []any:
		for _, x := range l {
			if Equal(x, v) {
				return true
			}
		}
	case []float32:
		for _, x := range l {
			if Equal(float64(x), v) {
				return true
			}
		}
	}
	return false
}

func evalIn(e *In, env Env) (any, error) {
	x, err := Eval(e.X, env)
	if err != nil {
		return nil, err
	}
	if e.konst != nil {
		return e.konst.Has(x), nil
	}
	if sc, ok := env.(SetCache); ok && e.fixed {
		s := sc.InSet(e)
		if s == nil {
			if s, err = evalSet(e, env); err != nil {
				return nil, err
			}
			sc.KeepInSet(e, s)
		}
		return s.Has(x), nil
	}
	set, err := Eval(e.Set, env)
	if err != nil {
		return nil, err
	}
	switch set.(type) {
	case nil:
		return false, nil
	case []any, []float32:
		return Has(set, x), nil
	}
	return nil, fmt.Errorf("in %s: %w", TypeName(set), ErrType)
}

// SetCache is what an Env may also be: the keeper, for one statement, of
// the hashed list of each in whose list reads no field and no clock (a
// parameter, a list of parameters), so that the list is evaluated and
// hashed once rather than walked again for every row.
type SetCache interface {
	// InSet returns the set kept for e, or nil.
	InSet(e *In) *ValueSet
	// KeepInSet keeps s for e.
	KeepInSet(e *In, s *ValueSet)
}

// evalSet evaluates an in's list into a ValueSet: null is the empty set, and
// anything else but a list is ErrType.
func evalSet(e *In, env Env) (*ValueSet, error) {
	set, err := Eval(e.Set, env)
	if err != nil {
		return nil, err
	}
	switch set.(type) {
	case nil:
		return NewValueSet(nil), nil
	case []any, []float32:
		return NewValueSet(set), nil
	}
	return nil, fmt.Errorf("in %s: %w", TypeName(set), ErrType)
}

// readsNoRow says whether x reads neither a field nor the clock: its
// value is the same for every row of one evaluation's parameters.
func readsNoRow(x Expr) bool {
	fixed := true
	Inspect(x, func(n Node) bool {
		switch n.(type) {
		case *Field, *Now:
			fixed = false
		}
		return fixed
	})
	return fixed
}

// Arith applies + - * or / to two values: int64 with int64 stays int64
// (overflow is ErrOverflow; / truncates toward zero), a float64 on either
// side makes float64 (a result that is not finite is ErrOverflow), + joins
// two strings, a nil on either side gives nil, anything else is ErrType.
// Dividing by zero is ErrDivZero.
func Arith(op BinaryOp, l, r any) (any, error) {
	if l == nil || r == nil {
		return nil, nil
	}
	if li, ok := l.(int64); ok {
		if ri, ok := r.(int64); ok {
			return intArith(op, li, ri)
		}
	}
	lf, lok := toFloat(l)
	rf, rok := toFloat(r)
	if lok && rok {
		return floatArith(op, lf, rf)
	}
	if op == OpAdd {
		if ls, ok := l.(string); ok {
			if rs, ok := r.(string); ok {
				return ls + rs, nil
			}
		}
	}
	return nil, fmt.Errorf("%s %s %s: %w", TypeName(l), op, TypeName(r), ErrType)
}

func intArith(op BinaryOp, a, b int64) (any, error) {
	switch op {
	case OpAdd:
		if (b > 0 && a > math.MaxInt64-b) || (b < 0 && a < math.MinInt64-b) {
			return nil, fmt.Errorf("%d + %d: %w", a, b, ErrOverflow)
		}
		return a + b, nil
	case OpSub:
		if (b < 0 && a > math.MaxInt64+b) || (b > 0 && a < math.MinInt64+b) {
			return nil, fmt.Errorf("%d - %d: %w", a, b, ErrOverflow)
		}
		return a - b, nil
	case OpMul:
		if a == 0 || b == 0 {
			return int64(0), nil
		}
		c := a * b
		if c/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
			return nil, fmt.Errorf("%d * %d: %w", a, b, ErrOverflow)
		}
		return c, nil
	case OpDiv:
		if b == 0 {
			return nil, fmt.Errorf("%d / 0: %w", a, ErrDivZero)
		}
		if a == math.MinInt64 && b == -1 {
			return nil, fmt.Errorf("%d / -1: %w", a, ErrOverflow)
		}
		return a / b, nil
	}
	return nil, fmt.Errorf("operator %s on numbers: %w", op, ErrType)
}

func floatArith(op BinaryOp, a, b float64) (any, error) {
	var c float64
	switch op {
	case OpAdd:
		c = a + b
	case OpSub:
		c = a - b
	case OpMul:
		c = a * b
	case OpDiv:
		if b == 0 {
			return nil, fmt.Errorf("%s / 0: %w", formatFloat(a), ErrDivZero)
		}
		c = a / b
	default:
		return nil, fmt.Errorf("operator %s on numbers: %w", op, ErrType)
	}
	if math.IsInf(c, 0) || math.IsNaN(c) {
		return nil, fmt.Errorf("%s %s %s: %w", formatFloat(a), op, formatFloat(b), ErrOverflow)
	}
	return c, nil
}

// toFloat converts an int64 or float64 to float64.
func toFloat(v any) (float64, bool) {
	switch v := v.(type) {
	case int64:
		return float64(v), true
	case float64:
		return v, true
	}
	return 0, false
}

// TypeName names a value's type for an error message, as the query
// language spells types (a map is json).
func TypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case int64:
		return "int"
	case float64:
		return "float"
	case string:
		return "text"
	case []float32:
		return "vector"
	case []any:
		return "list"
	case map[string]any:
		return "json"
	}
	return fmt.Sprintf("%T", v)
}
