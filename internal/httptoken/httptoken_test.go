package httptoken

import (
	"net/textproto"
	"strings"
	"testing"
)

func TestHasToken(t *testing.T) {
	for _, tc := range []struct {
		v, tok string
		want   bool
	}{
		{"close", "close", true},
		{"Keep-Alive, CLOSE", "close", true},
		{" \tclose\t ", "close", true},
		{"closed", "close", false},
		{"clos", "close", false},
		{"x-close, keep-alive", "close", false},
		{",,close,", "close", true},
		{"", "close", false},
	} {
		if got := HasToken(tc.v, tc.tok); got != tc.want {
			t.Errorf("HasToken(%q, %q) = %v", tc.v, tc.tok, got)
		}
		if got := HasToken([]byte(tc.v), tc.tok); got != tc.want {
			t.Errorf("HasToken([]byte %q, %q) = %v", tc.v, tc.tok, got)
		}
	}
}

func TestDecimal(t *testing.T) {
	for _, tc := range []struct {
		s    string
		max  int
		n    int64
		want bool
	}{
		{"0", 18, 0, true}, {"123", 18, 123, true}, {"999999999999999999", 18, 999999999999999999, true},
		{"1234567890123456789", 18, 0, false}, {"", 18, 0, false}, {"+1", 18, 0, false},
		{" 1", 18, 0, false}, {"1a", 18, 0, false}, {"1234567890123", 12, 0, false},
	} {
		n, ok := Decimal(tc.s, tc.max)
		if ok != tc.want || ok && n != tc.n {
			t.Errorf("Decimal(%q, %d) = %d, %v", tc.s, tc.max, n, ok)
		}
	}
}

// Canonical agrees with net/textproto on every name of token bytes.
func TestCanonical(t *testing.T) {
	for _, k := range []string{"Host", "host", "X-Request-Id", "X-REQUEST-ID", "Fenec-Wait", "x_y", "A-", "-A", "Www-Authenticate", "A1-b2"} {
		want := textproto.CanonicalMIMEHeaderKey(k) == k
		if got := Canonical(k); got != want {
			t.Errorf("Canonical(%q) = %v, textproto says %v", k, got, want)
		}
	}
	for c := 0; c < 256; c++ {
		want := c < 0x80 && c > ' ' && !strings.ContainsRune("\"(),/:;<=>?@[\\]{}\x7f", rune(c))
		if got := IsTokenByte(byte(c)); got != want {
			t.Errorf("IsTokenByte(%q) = %v", byte(c), got)
		}
	}
}
