package reqpath

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

func TestSegments(t *testing.T) {
	for _, tc := range []struct {
		target string
		want   []string // nil: refused
		says   string
	}{
		{"/", []string{""}, ""},
		{"/t/a/c", []string{"t", "a", "c"}, ""},
		{"/t/a/c/", []string{"t", "a", "c"}, ""},
		{"/t/a/c%20d", []string{"t", "a", "c d"}, ""}, // a /t/ name below the tenant may be encoded
		{"/_shard/regions/eu/handoff", []string{"_shard", "regions", "eu", "handoff"}, ""},
		{"/_shard/regions/eu%2fhandoff", nil, "%2f encodes"},
		{"/_shard/regions/eu%2Fhandoff", nil, "%2f encodes"},
		{"/t/a/c%5cd", nil, "%5c encodes"},
		{"/t/a/%2e%2e/c", nil, "%2e encodes"},
		{"/t/a/c%00", nil, "%00 encodes"},
		{"/t/a\\c", nil, "%5c encodes"}, // EscapedPath writes a backslash as %5C
		{"//", nil, "empty segment"},
		{"//_shard/nodes", nil, "empty segment"},
		{"/_shard//nodes", nil, "empty segment"},
		{"/_shard/nodes//", nil, "empty segment"},
		{"/_shard/./nodes", nil, `a "." segment`},
		{"/_shard/x/../nodes", nil, `a ".." segment`},
		{"/_shard/nodes/..", nil, `a ".." segment`},
		{"/%5fshard/nodes", nil, "first segment is percent-encoded"},
		{"/%74/a/c", nil, "first segment is percent-encoded"},
		{"/_admin/tenants/%61", nil, "below /_admin is percent-encoded"},
	} {
		u, err := url.ParseRequestURI(tc.target)
		if err != nil {
			t.Fatalf("%s: %v", tc.target, err)
		}
		got, err := Segments(&http.Request{URL: u})
		switch {
		case tc.want == nil && (err == nil || !errors.Is(err, ErrBadPath) || !strings.Contains(err.Error(), tc.says)):
			t.Errorf("%s: %q %v, want refused saying %q", tc.target, got, err, tc.says)
		case tc.want != nil && (err != nil || !slices.Equal(got, tc.want)):
			t.Errorf("%s: %q %v, want %q", tc.target, got, err, tc.want)
		}
	}
}
