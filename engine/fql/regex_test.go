package fql

import (
	"errors"
	"strings"
	"testing"
)

// A pattern whose program passes MaxRegexInsts is refused, as text in the
// statement (a parse error) and as a parameter (ErrRegex as it is
// evaluated); one just under it is taken.
func TestRegexProgramBounded(t *testing.T) {
	big := strings.Repeat("x{1000}", 17) // 17 000 steps and a few
	if _, err := Parse(`get t where a ~ "` + big + `"`); err == nil || !strings.Contains(err.Error(), "narrow its repetition counts") {
		t.Fatalf("a pattern of 17 000 steps in the text: %v, want a parse error saying what to do", err)
	}
	st, err := Parse(`get t where a ~ $1`)
	if err != nil {
		t.Fatal(err)
	}
	env := testEnv{row: map[string]any{"a": "xxx"}, params: []any{big}}
	if _, err := Eval(st.(*Get).Where, env); !errors.Is(err, ErrRegex) {
		t.Fatalf("a pattern of 17 000 steps as a parameter: %v, want ErrRegex", err)
	}
	if _, err := Parse(`get t where a ~ "` + strings.Repeat("x{1000}", 16) + `"`); err != nil {
		t.Fatalf("a pattern of 16 000 steps: %v", err)
	}
}

// neverStop is a Stopper that never stops, counting how often it is asked.
type neverStop struct{ asked int }

func (s *neverStop) Stopped() error { s.asked++; return nil }

// The reader a long match goes through answers as a match of the string
// does: anchors, word boundaries, flags, invalid UTF-8, empty subjects.
func TestStoppableMatchAgrees(t *testing.T) {
	patterns := []string{`^a`, `a$`, `^$`, `\bfoo\b`, `(?m)^bar$`, `(?i)ÉTÉ`, `\x{FFFD}`, `[^a]`, `a.c`, `(?s)a.c`,
		`\B`, `^`, `$`, `é+`, `\Aa`, `b\z`, `.`, `x*`, `[\p{Han}]+`}
	subjects := []string{"", "a", "abc", "foo bar", "xfoo", "a\nbar\nc", "été", "\xff\xfe", "a\xffc", "a\nc", "漢字", "bb"}
	for _, p := range patterns {
		c, err := compileRegex(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range subjects {
			st := &neverStop{}
			got, err := c.matchStoppable(s, st)
			if err != nil {
				t.Fatal(err)
			}
			if want := c.re.MatchString(s); got != want {
				t.Errorf("%q ~ %q: %v through the reader, %v as a string", s, p, got, want)
			}
		}
	}
}

// stopAfter is a Stopper that says to stop once asked n times.
type stopAfter struct {
	n, asked int
}

var errStopTest = errors.New("stopped by the test")

func (s *stopAfter) Stopped() error {
	s.asked++
	if s.asked >= s.n {
		return errStopTest
	}
	return nil
}

// stoppingEnv is a testEnv that is a Stopper.
type stoppingEnv struct {
	testEnv
	*stopAfter
}

// A large pattern over a long value asks its statement's Stopper as it
// goes, and answers with its error once it says to stop; a short one is
// matched whole without asking.
func TestLongMatchStops(t *testing.T) {
	st, err := Parse(`get t where a ~ "[a-z]{1,1000}z"`)
	if err != nil {
		t.Fatal(err)
	}
	where := st.(*Get).Where
	long := strings.Repeat("a", 1<<20)
	env := stoppingEnv{testEnv: testEnv{row: map[string]any{"a": long}}, stopAfter: &stopAfter{n: 3}}
	if _, err := Eval(where, env); !errors.Is(err, errStopTest) {
		t.Fatalf("a match of 2 000 steps over 1 MiB whose statement stops: %v, want the stop's error", err)
	}
	if env.asked != 3 {
		t.Fatalf("asked %d times, want 3 (it stops at the third)", env.asked)
	}
	short := stoppingEnv{testEnv: testEnv{row: map[string]any{"a": "abcz"}}, stopAfter: &stopAfter{n: 1}}
	got, err := Eval(where, short)
	if err != nil || got != true {
		t.Fatalf("a short match: %v %v, want true", got, err)
	}
	if short.asked != 0 {
		t.Fatalf("a short match asked its Stopper %d times", short.asked)
	}
}
