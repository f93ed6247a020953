package jsonerr

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

type inner struct {
	Limit int64 `json:"limit"`
}

type body struct {
	Query  string   `json:"query"`
	Params []any    `json:"params"`
	Force  bool     `json:"force"`
	Rows   uint32   `json:"rows"`
	Tags   []string `json:"tags,omitempty"`
	Skip   string   `json:"-"`
	inner
}

// decode decodes s into a body as the servers do: unknown fields refused.
func decode(s string) error {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	var b body
	return dec.Decode(&b)
}

func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		body string
		want string
	}{
		{``, "the body is empty: send a JSON object"},
		{`{"query": "get c"`, "the body ends before its JSON does"},
		{`hello`, "the body is not JSON: at byte 1, invalid character 'h' looking for beginning of value"},
		{`{"query": 5}`, `"query" must be a string, not a number`},
		{`{"params": "x"}`, `"params" must be an array, not a string`},
		{`{"force": "yes"}`, `"force" must be true or false, not a string`},
		{`{"rows": -1}`, `"rows" must be a whole number from 0 that fits in 32 bits, and -1 is not one`},
		{`{"rows": 1.5}`, `"rows" must be a whole number from 0 that fits in 32 bits, and 1.5 is not one`},
		{`{"limit": 1e400}`, `"limit" must be a whole number that fits in 64 bits, and 1e400 is not one`},
		{`{"tags": {"a": 1}}`, `"tags" must be an array, not an object`},
		{`[1]`, `the body must be an object, not an array`},
		{`{"nope": 1}`, `unknown field "nope": the body takes "query", "params", "force", "rows", "tags", "limit"`},
	} {
		err := decode(tc.body)
		if err == nil {
			t.Fatalf("%s: decoded", tc.body)
		}
		var b body
		got := Describe(err, &b)
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q (raw %q)", tc.body, got, tc.want, err)
		}
		for _, leak := range []string{"Go ", "interface {}", "body.", "jsonerr", "json: ", "int64", "uint32"} {
			if strings.Contains(got, leak) {
				t.Errorf("%s: %q names %q", tc.body, got, leak)
			}
		}
	}
}

func TestDescribeNoTarget(t *testing.T) {
	var v map[string]int
	err := json.Unmarshal([]byte(`{"a": "b"}`), &v)
	if got := Describe(err, nil); got != `a value in the body must be a whole number that fits in 64 bits, not a string` {
		t.Fatalf("got %q", got)
	}
	if Describe(nil, nil) != "" {
		t.Fatal("a nil error described")
	}
}

func TestMarshalKeepsAngles(t *testing.T) {
	b, err := Marshal(map[string]string{"error": "want vector<3> & more"})
	if err != nil || string(b) != `{"error":"want vector<3> & more"}` {
		t.Fatalf("%s %v", b, err)
	}
}
