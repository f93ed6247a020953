package jsonerr

import (
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

type handoffBody struct {
	To    string `json:"to"`
	Force bool   `json:"force"`
}

type nestedBody struct {
	Merge struct {
		Order []string `json:"order"`
		By    string   `json:"by"`
	} `json:"merge"`
	Rows   []handoffBody          `json:"rows"`
	ByName map[string]handoffBody `json:"by_name"`
	Params json.RawMessage        `json:"params"`
	Any    any                    `json:"any"`
}

func TestDecodeRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		into       func() any
		want       string
	}{
		{"trailing object", `{"to":"region"}{"to":"global"}`, func() any { return new(handoffBody) },
			"the body goes on after its JSON value, at byte 15: send one JSON value"},
		{"trailing brace", `{"to":"region"}}`, func() any { return new(handoffBody) }, "at byte 15"},
		{"trailing word after space", "{\"to\":\"region\"}\n x", func() any { return new(handoffBody) }, "at byte 17"},
		{"duplicate", `{"to":"region","to":"global"}`, func() any { return new(handoffBody) },
			`key "to" appears twice in the body (again at byte 15): send each key of an object once`},
		{"duplicate by case", `{"to":"region","TO":"global"}`, func() any { return new(handoffBody) },
			`key "TO" appears twice in the body`},
		{"duplicate by escape", `{"to":"region","\u0074o":"global"}`, func() any { return new(handoffBody) },
			`key "to" appears twice in the body`},
		{"nested duplicate", `{"merge":{"by":"a","order":[],"by":"b"}}`, func() any { return new(nestedBody) },
			`key "by" appears twice in "merge"`},
		{"duplicate in an array's object", `{"rows":[{"to":"a"},{"to":"a","Force":true,"force":false}]}`, func() any { return new(nestedBody) },
			`key "force" appears twice in "rows[1]"`},
		{"duplicate in a map's value", `{"by_name":{"x":{"to":"a","tO":"b"}}}`, func() any { return new(nestedBody) },
			`key "tO" appears twice in "by_name.x"`},
		{"duplicate map key", `{"by_name":{"x":{},"x":{}}}`, func() any { return new(nestedBody) },
			`key "x" appears twice in "by_name"`},
		{"duplicate in raw params", `{"params":[1,{"a":1,"a":2}]}`, func() any { return new(nestedBody) },
			`key "a" appears twice in "params[1]"`},
		{"duplicate in any", `{"any":{"a":{"b":1,"b":1}}}`, func() any { return new(nestedBody) },
			`key "b" appears twice in "any.a"`},
		{"duplicate in a document", `[{"a":1},{"a":1,"a":1}]`, func() any { var v any; return &v },
			`key "a" appears twice in "[1]"`},
		{"invalid UTF-8 read as one key", "{\"a\xff\":1,\"a\xfe\":2}", func() any { var v any; return &v },
			"appears twice in the body"},
		{"long key cut", `{"` + strings.Repeat("k", 100) + `":1,"` + strings.Repeat("k", 100) + `":2}`, func() any { var v any; return &v },
			`key "` + strings.Repeat("k", 64) + `…" appears twice`},
		{"unknown field", `{"too":"x"}`, func() any { return new(handoffBody) }, `unknown field "too": the body takes "to", "force"`},
		{"empty", ``, func() any { return new(handoffBody) }, "the body is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Decode([]byte(tc.body), tc.into(), Numbers|KnownFields)
			if err == nil {
				t.Fatalf("%s: taken", tc.body)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%s:\n got %q\nwant %q", tc.body, err, tc.want)
			}
		})
	}
}

func TestDecodeTakes(t *testing.T) {
	for _, body := range []string{
		`{"to":"region"}`,
		" \n{\"to\":\"region\", \"force\": true}\r\n\t ",
		`{"merge":{"by":"a","order":["a","a"]},"rows":[{"to":"a"},{"to":"a"}],"by_name":{"x":{"to":"a"},"X":{"to":"b"}}}`,
		`{"any":{"a":1,"A":2,"b":{"a":1}},"params":{"a":{"a":{"a":1}},"b":[{"a":1},{"a":1}]}}`,
		`{"any":{"a":"\"}","b":"{\"a\":1,\"a\":1}"}}`,
		`{"any":{"":1,"\u0000":2," ":3}}`,
	} {
		if err := Decode([]byte(body), new(nestedBody), KnownFields); err != nil && !strings.Contains(body, `"to"`) {
			t.Errorf("%s: %v", body, err)
		}
		var v any
		if err := Decode([]byte(body), &v, Numbers); err != nil {
			t.Errorf("%s into any: %v", body, err)
		}
	}
	var n any
	if err := Decode([]byte(`{"n":12345678901234567890}`), &n, Numbers); err != nil || n.(map[string]any)["n"] != json.Number("12345678901234567890") {
		t.Fatalf("numbers: %v %v", n, err)
	}
}

type embedded struct {
	Name string `json:"name"`
	Both int
}

type withEmbedded struct {
	embedded
	Both  int    // shallower: takes "Both" from the embedded one
	Other string `json:"other"`
}

func TestDuplicateThroughEmbedded(t *testing.T) {
	for body, dup := range map[string]bool{
		`{"name":"a","NAME":"b"}`: true,
		`{"both":1,"Both":2}`:     true,
		`{"name":"a","both":1}`:   false,
		`{"other":"a","x":1}`:     false,
		`{"x":1,"X":1}`:           false, // not fields: keys differ
		`{"x":1,"x":1}`:           true,
	} {
		err := Decode([]byte(body), new(withEmbedded), 0)
		var d *Duplicate
		if got := errors.As(err, &d); got != dup {
			t.Errorf("%s: duplicate %v, want %v (%v)", body, got, dup, err)
		}
	}
}

// duplicateByTokens is FirstDuplicate(b, nil) found another way: with
// encoding/json's tokens, keys equal when decoded.
func duplicateByTokens(b []byte) bool {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	type level struct {
		object bool
		keys   map[string]bool
		key    bool // the next string is a key
	}
	var stack []*level
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return false
		}
		if err != nil {
			return false
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.key {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].object {
					stack[len(stack)-1].key = true
				}
				continue
			}
			k := tok.(string)
			if top.keys[k] {
				return true
			}
			top.keys[k] = true
			top.key = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &level{object: true, keys: map[string]bool{}, key: true})
			continue
		case json.Delim('['):
			stack = append(stack, &level{})
			continue
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].key = true
		}
	}
}

// FuzzFirstDuplicate: for any valid JSON, the byte walk finds a
// duplicate exactly when the token walk does, and Decode takes the body
// exactly when encoding/json does and neither finds one.
func FuzzFirstDuplicate(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `{"a":1}`, `{"a":1,"a":2}`, `{"a":{"a":1},"b":{"a":1}}`,
		`{"a":{"b":1,"b":2}}`, `[{"a":1,"a":1}]`, `{"a":[{"b":1},{"b":2,"c":{"d":1,"d":2}}]}`,
		`{"\u0061":1,"a":2}`, `{"a\"":1,"a\\":2,"a\"":3}`, `{"a\ud834\udd1e":1,"a𝄞":2}`,
		"{\"a\xff\":1,\"a\xfe\":2}", `{"":1,"":2}`, `{"a":"}","b":"{","a":"]"}`,
		`{"x":[[[[{"y":1}]]]],"x ":1}`, " {\"a\" : 1 , \"b\" :\t{ } }\n", `{"a":1}{"a":1}`,
		`{"a":1}}`, `[1,2,3] x`, `"str"`, `-1.5e10`, `null`, `{"a":true,"b":false,"c":null,"a":null}`,
		`{"k":"\\","k2":"\\\"","k":0}`, `{"A":1,"a":1}`, `{"a":[],"b":[{}],"a":{}}`,
		`{"rows":[{"to":"a","To":"b"}]}`, `{"merge":{"by":"a"},"MERGE":{}}`, `{"by_name":{"x":{"force":true,"force":false}}}`,
		`{"params":{"a":1,"a":2}}`, `{"any":[{"b":1,"b":2}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v any
		err := Decode(b, &v, Numbers)
		if !json.Valid(b) {
			if err == nil {
				t.Fatalf("%q: taken, and not JSON", b)
			}
			return
		}
		walked := FirstDuplicate(b, nil)
		if tokens := duplicateByTokens(b); (walked != nil) != tokens {
			t.Fatalf("%q: byte walk %v, token walk %v", b, walked, tokens)
		}
		if (err == nil) != (walked == nil) {
			t.Fatalf("%q: decode %v, walk %v", b, err, walked)
		}
		if walked != nil && !strings.HasPrefix(string(b[walked.Offset:]), `"`) {
			t.Fatalf("%q: the duplicate's offset %d is not at a key", b, walked.Offset)
		}
		// Read into a struct, keys equal as strings are still one key
		// (the typed walk finds at least what the untyped one does).
		var typed nestedBody
		if json.Unmarshal(b, &typed) == nil && walked != nil {
			if err := Decode(b, &typed, 0); err == nil {
				t.Fatalf("%q: into a struct, the duplicate %v is taken", b, walked)
			}
		}
	})
}

// caseFields has fields a key may reach in more ways than one.
type caseFields struct {
	embedded
	Alpha int `json:"alpha"`
	ALPHA int `json:"ALPHA"`
	Beta  int
	K     int `json:"k"` // "\u212a" (Kelvin) folds to it
	S     int `json:"s"` // and "\u017f" (long s) to this
	Skip  int `json:"-"`
	lower int
}

// fieldSet is the index of the field of caseFields that decoding
// {key: 1} sets, by encoding/json itself; -1 for none.
func fieldSet(key string) (int, string) {
	var c caseFields
	b, _ := json.Marshal(map[string]int{key: 1})
	if json.Unmarshal(b, &c) != nil { // the key reaches Name, a string
		c = caseFields{}
		b, _ = json.Marshal(map[string]string{key: "x"})
		if json.Unmarshal(b, &c) != nil {
			return -1, ""
		}
	}
	names := []string{"name", "Both", "alpha", "ALPHA", "Beta", "k", "s"}
	for i, got := range []int{len(c.Name), c.Both, c.Alpha, c.ALPHA, c.Beta, c.K, c.S} {
		if got != 0 {
			return i, names[i]
		}
	}
	return -1, ""
}

// FuzzMatch: a key reaches the field encoding/json decodes it into.
func FuzzMatch(f *testing.F) {
	for _, k := range []string{"alpha", "ALPHA", "Alpha", "beta", "BETA", "k", "K", "\u212a", "s", "\u017f", "skip", "lower", "name", "NAME", "both", "x", ""} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		_, want := fieldSet(key)
		got := ""
		if fd := match(fieldsFor(reflect.TypeFor[caseFields]()), decodedKey(key)); fd != nil {
			got = fd.name
		}
		if got != want {
			t.Fatalf("%q: matched %q, encoding/json %q", key, got, want)
		}
	})
}

// decodedKey is key as a body's key decodes: written by encoding/json
// and read back, invalid UTF-8 as U+FFFD.
func decodedKey(key string) string {
	b, _ := json.Marshal(key)
	var s string
	_ = json.Unmarshal(b, &s)
	return s
}
