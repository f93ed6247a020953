package engine

import (
	"context"
	"fmt"
)

// A statement stops when its context ends: its client left, or the time
// its caller gives statements ran out (the node's --max-statement-time).
// It looks every stopEvery steps of work — a row looked at, a row
// compared in a sort, a row grouped or projected, a vector scored — and,
// once the context has ended, makes every loop it is in end at the next
// step and the statement answer ErrStopped wrapping the context's cause.
// A read then answers nothing; a block undoes what it did, as for any
// other failure, so a stopped write lands nothing. Once a block is being
// landed it is no longer looked at: a write is stopped whole or not at
// all.

// stopEvery is how many steps go between two looks at the context: a
// look costs a lock, a step from tens of nanoseconds (a row with no where)
// to a few microseconds (a row's where with a pattern), so a statement
// sees its end within a millisecond or so.
const stopEvery = 256

// stopper is one statement's stop.
type stopper struct {
	ctx context.Context
	n   int
	err error // set once the statement must stop
}

func newStopper(ctx context.Context) *stopper {
	if ctx == nil || ctx.Done() == nil {
		return nil // a context that never ends: nothing to look at
	}
	return &stopper{ctx: ctx}
}

// step counts one step of work and says whether the statement must stop
// (err set). A nil stopper never stops.
func (s *stopper) step() bool {
	if s == nil {
		return false
	}
	if s.err != nil {
		return true
	}
	if s.n++; s.n < stopEvery {
		return false
	}
	s.n = 0
	return s.check()
}

// check looks at the context now.
func (s *stopper) check() bool {
	if s == nil {
		return false
	}
	if s.err == nil && s.ctx.Err() != nil {
		s.err = fmt.Errorf("%w: %w", ErrStopped, context.Cause(s.ctx))
	}
	return s.err != nil
}

// stopped is the error a stopped statement answers (nil: it was not).
func (s *stopper) stopped() error {
	if s == nil {
		return nil
	}
	return s.err
}

// Stopped is the fql.Stopper of a row being evaluated: a long match asks
// it as it goes.
func (e *rowEnv) Stopped() error {
	if e.r == nil || !e.r.stop.check() {
		return nil
	}
	return e.r.stop.err
}
