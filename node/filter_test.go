package node

import (
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"testing"
)

func TestGetStatement(t *testing.T) {
	n := func(s string) json.Number { return json.Number(s) }
	tests := []struct {
		query      string
		wantText   string
		wantParams []any
	}{
		{"", "get c", nil},
		{"age=eq.5", "get c where age = $1", []any{n("5")}},
		{"age=gt.5&age=lte.9", "get c where age > $1 and age <= $2", []any{n("5"), n("9")}},
		{"name=neq.bob&age=lt.-1.5", "get c where age < $1 and name != $2", []any{n("-1.5"), "bob"}},
		{"name=eq.\"5\"", "get c where name = $1", []any{"5"}},
		{"ok=eq.true&x=eq.null", "get c where ok = $1 and x = $2", []any{true, nil}},
		{"tag=in.(a,b,\"c,d\")", "get c where tag in $1", []any{[]any{"a", "b", "c,d"}}},
		{"n=in.(1,2)", "get c where n in $1", []any{[]any{n("1"), n("2")}}},
		{"tags=has.x", "get c where tags has $1", []any{"x"}},
		{"owner=is.null", "get c where owner is null", nil},
		{"owner=not.is.null", "get c where owner is not null", nil},
		{"age=not.eq.5", "get c where not (age = $1)", []any{n("5")}},
		{"a.b=eq.x", "get c where a.b = $1", []any{"x"}},
		{"select=a,b&order=a.desc,b&limit=10&offset=5", "get c select a, b order a desc, b limit 10 offset 5", nil},
		{"age=gt.1&count", "get c where age > $1 count", []any{n("1")}},
		// User text never reaches the statement: it is a parameter.
		{"name=eq.x or 1 = 1", "get c where name = $1", []any{"x or 1 = 1"}},
		{"name=eq.\") or (", "get c where name = $1", []any{"\") or ("}},
	}
	for _, tt := range tests {
		q, err := url.ParseQuery(tt.query)
		if err != nil {
			t.Fatal(err)
		}
		got, params, err := getStatement("c", q)
		if err != nil {
			t.Errorf("%q: %v", tt.query, err)
			continue
		}
		if got != tt.wantText || !reflect.DeepEqual(params, tt.wantParams) {
			t.Errorf("%q:\n got %q %#v\nwant %q %#v", tt.query, got, params, tt.wantText, tt.wantParams)
		}
	}
}

func TestGetStatementRefuses(t *testing.T) {
	for _, query := range []string{
		"age=5",        // no op
		"age=like.5",   // unknown op
		"age=is.5",     // is takes only null
		"a%20b=eq.1",   // field not an identifier
		"a'drop=eq.1",  // field not an identifier
		"n=in.1,2",     // in wants parentheses
		"n=in.(\"a,b)", // unterminated quote
		"select=a,b'c", // bad select field
		"order=a desc", // bad order key
		"limit=-1",     // not a whole number
		"limit=ten",    // not a number
		"offset=1e3",   // not a whole number
		"x.=eq.1",      // empty path part
		"_ok.1a=eq.1",  // part not an identifier
	} {
		q, err := url.ParseQuery(query)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := getStatement("c", q); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%q: err %v, want ErrBadRequest", query, err)
		}
	}
}

func TestFilterValue(t *testing.T) {
	tests := []struct {
		in   string
		want any
	}{
		{"abc", "abc"},
		{"12", json.Number("12")},
		{"-3.5e2", json.Number("-3.5e2")},
		{"12abc", "12abc"},
		{`"12"`, "12"},
		{`"unterminated`, `"unterminated`},
		{"true", true},
		{"null", nil},
		{"", ""},
	}
	for _, tt := range tests {
		if got := filterValue(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("filterValue(%q) = %#v, want %#v", tt.in, got, tt.want)
		}
	}
}
