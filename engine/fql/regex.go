package fql

import (
	"fmt"
	"io"
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode/utf8"
)

// What ~ costs. Go's regexp is RE2: no backtracking, so a match costs at
// most the pattern's program size times the subject's length, never more.
// Two bounds make that product small or stoppable:
//
//   - MaxRegexInsts bounds the program (what a pattern compiles to; a
//     repetition x{n} is n copies), so that one pattern holds kilobytes,
//     not the 128 MB Go's own limit allows, and costs at most that many
//     steps a byte of subject;
//   - a subject whose length times the pattern's program passes
//     regexWork is matched through a reader that asks the Env, if it is a
//     Stopper, whether its statement must stop, every regexWork steps'
//     worth of runes: one long value under a large pattern is stopped
//     within that, as a statement's rows are between them.
const (
	// MaxRegexInsts is the largest program a pattern may compile to.
	MaxRegexInsts = 1 << 14
	// regexWork is the steps a match may take between two looks at its
	// statement's stop: a few milliseconds.
	regexWork = 1 << 20
)

// Stopper is what an Env may also be: a statement that can be stopped
// (its client left, its time ran out). Stopped returns the reason once
// it must stop, nil before; a long evaluation (a large pattern over a
// long value) asks it as it goes and returns that error.
type Stopper interface {
	Stopped() error
}

// compileRegex compiles pat as ~ does, refusing a program past
// MaxRegexInsts; the errors wrap ErrRegex.
func compileRegex(pat string) (*compiledRegex, error) {
	re, err := regexp.Compile(pat)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrRegex, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	// regexp keeps its program to itself: compile it again here to count
	// it (what regexp.Compile did, so it cannot fail now).
	parsed, err := syntax.Parse(pat, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRegex, err)
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRegex, err)
	}
	if n := len(prog.Inst); n > MaxRegexInsts {
		return nil, fmt.Errorf("%w: the pattern compiles to %d steps, past the %d a pattern may take: narrow its repetition counts ({n}) or split it into several ~ joined by and/or",
			ErrRegex, n, MaxRegexInsts)
	}
	return &compiledRegex{src: pat, re: re, insts: len(prog.Inst)}, nil
}

// compiled returns pat compiled, from the node's cache when the pattern
// text is the one compiled last. Safe for concurrent use: racing
// compilations store equal values.
func (e *Regex) compiled(pat string) (*compiledRegex, error) {
	if c := e.re.Load(); c != nil && c.src == pat {
		return c, nil
	}
	c, err := compileRegex(pat)
	if err != nil {
		return nil, err
	}
	e.re.Store(c)
	return c, nil
}

func evalRegex(e *Regex, env Env) (any, error) {
	x, err := Eval(e.X, env)
	if err != nil {
		return nil, err
	}
	pv, err := Eval(e.Pattern, env)
	if err != nil {
		return nil, err
	}
	var pat string
	switch p := pv.(type) {
	case nil:
		return false, nil
	case string:
		pat = p
	default:
		return nil, fmt.Errorf("~ %s: %w", TypeName(pv), ErrType)
	}
	s, ok := x.(string)
	if !ok {
		return false, nil
	}
	c, err := e.compiled(pat)
	if err != nil {
		return nil, err
	}
	if st, ok := env.(Stopper); ok && c.insts*len(s) > regexWork {
		return c.matchStoppable(s, st)
	}
	return c.re.MatchString(s), nil
}

// matchStoppable matches s through a reader that asks st every so many
// runes whether to stop; stopped, the answer is st's error.
func (c *compiledRegex) matchStoppable(s string, st Stopper) (bool, error) {
	r := &stopReader{s: s, st: st, every: max(1, regexWork/max(1, c.insts))}
	matched := c.re.MatchReader(r)
	if r.err != nil {
		return false, r.err
	}
	return matched, nil
}

// stopReader reads a string's runes as regexp reads a string's (invalid
// UTF-8 a byte at a time, as U+FFFD), and ends it early once its Stopper
// says to stop.
type stopReader struct {
	s     string
	i     int
	left  int // runes until the next look at st
	every int
	st    Stopper
	err   error // why it stopped
}

func (r *stopReader) ReadRune() (rune, int, error) {
	if r.i >= len(r.s) || r.err != nil {
		return 0, 0, io.EOF
	}
	if r.left--; r.left <= 0 {
		r.left = r.every
		if r.err = r.st.Stopped(); r.err != nil {
			return 0, 0, io.EOF
		}
	}
	if c := r.s[r.i]; c < utf8.RuneSelf {
		r.i++
		return rune(c), 1, nil
	}
	c, n := utf8.DecodeRuneInString(r.s[r.i:])
	r.i += n
	return c, n, nil
}
