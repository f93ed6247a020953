package fql

import (
	"errors"
	"fmt"
)

// Sentinel errors of the evaluator. Eval wraps them with the operator or
// parameter at fault; test with errors.Is.
var (
	// ErrType is an operand of the wrong type for its operator
	// (text * int, a list where a number belongs).
	ErrType = errors.New("wrong type")
	// ErrOverflow is an integer + - * / that does not fit in int64, or a
	// float result that is not finite.
	ErrOverflow = errors.New("numeric overflow")
	// ErrDivZero is a division by zero (integer or float).
	ErrDivZero = errors.New("division by zero")
	// ErrParam is a $n the caller did not supply, or a value a parameter
	// cannot hold.
	ErrParam = errors.New("bad parameter")
	// ErrRegex is a pattern for ~ that does not compile.
	ErrRegex = errors.New("bad regular expression")
	// ErrTooMany is a limit, an offset or the two together past MaxRows:
	// a parse Error that wraps it.
	ErrTooMany = errors.New("limit and offset past 10000")
)

// Error is a statement the parser refused: Pos is the byte offset in the
// text where the problem was found, Msg says what is wrong in words a
// person understands.
type Error struct {
	Pos int
	Msg string
	// Err is the sentinel the refusal is an instance of, if any
	// (ErrTooMany).
	Err error
}

func (e *Error) Error() string { return fmt.Sprintf("parse error at %d: %s", e.Pos, e.Msg) }
func (e *Error) Unwrap() error { return e.Err }
