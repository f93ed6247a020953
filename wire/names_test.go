package wire

import (
	"strings"
	"testing"
)

func TestValidName(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"a", true},
		{"acme", true},
		{"t_1-b", true},
		{"0", true},
		{strings.Repeat("x", 64), true},
		{"", false},
		{strings.Repeat("x", 65), false},
		{"Acme", false},
		{"a.b", false},
		{"a/b", false},
		{"a b", false},
		{"..", false},
		{"a\n", false},
		{"é", false},
		{"a%2f", false},
	} {
		if got := ValidName(tc.name); got != tc.want {
			t.Errorf("ValidName(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}
