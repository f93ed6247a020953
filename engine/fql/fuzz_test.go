package fql

import (
	"errors"
	"testing"
	"unicode/utf8"
)

// fuzzSeeds holds one statement of every form, and a few broken ones.
var fuzzSeeds = []string{
	`create collection if not exists users (name text required @hash, age int @sorted, email text @unique, bio text @text(k1=1.5, b=0.5), at timestamp @ttl(30m), emb vector<4> @hnsw(cosine, m=8, ef_construction=100, ef_search=32), tags [text], ns [int], fs [float], ok bool, meta json, f float)`,
	`drop collection if exists users`,
	`compact`,
	`create index on users (email) @unique`,
	`put users {name: "a", "quoted key": 1, n: $2, tags: ["x", 'y'], at: now() + 1000}`,
	`put users [{name: "a"}, {id: 7}, $1] if absent require 2`,
	`insert users $1 require 1`,
	`set users {n: n + 1, gone: null} where id = $1 order id desc limit 1 returning * require 1`,
	`del users where age < 18 or name ~ "^x" order age limit 10 returning id, name`,
	`get users select name, meta.city as city where age >= 18 and not (tags has "x") and s in ("a", "b") and t in $3 and u is not null order age desc limit 10 offset 5`,
	`get orders select status, count(*) as n, sum(total), avg(total), min(total), max(total) group status order n desc limit 5`,
	`get users where x = 1 count`,
	`get docs match body "hello" near emb [0.1, -2, 3e-2] ef 10 exact fuse k=30 order _score desc limit 3`,
	`get users lookup orders on user_id required select id, total where total > 10 order total desc limit 5 lookup items on order_id`,
	`get t where a = -9223372036854775808 and b = 1.5e300 / -(2) - - -c * "s\u00e9\n"`,
	`get t where (((a)))`,
	`get t where a = "unterminated`,
	`get t limit 9998 offset 2`,
}

func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		st, err := Parse(text)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			if pe.Pos < 0 || pe.Pos > len(text) || pe.Msg == "" || !utf8.ValidString(pe.Msg) {
				t.Fatalf("bad error %q at %d for %d bytes", pe.Msg, pe.Pos, len(text))
			}
			return
		}
		// The canonical text parses again, to itself.
		canon := st.String()
		again, err := Parse(canon)
		if err != nil {
			t.Fatalf("canonical text %q of %q does not parse: %v", canon, text, err)
		}
		if got := again.String(); got != canon {
			t.Fatalf("canonical text changes when parsed again:\n%s\n%s", canon, got)
		}
		// Evaluating what the statement holds never panics.
		env := newTestEnv()
		Inspect(st, func(n Node) bool {
			if e, ok := n.(Expr); ok {
				_, _ = Eval(e, env)
				return false
			}
			return true
		})
	})
}

func TestFuzzSeedsParse(t *testing.T) {
	for _, s := range fuzzSeeds {
		_, err := Parse(s)
		wantErr := s == `get t where a = "unterminated`
		if (err != nil) != wantErr {
			t.Errorf("Parse(%q) error = %v, want error %v", s, err, wantErr)
		}
	}
}
