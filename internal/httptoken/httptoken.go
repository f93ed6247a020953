// Package httptoken holds the small rules of HTTP/1.1's grammar that both
// the router's serving loop (package h1) and its forwarder (reading a
// node's answers) apply: token bytes, canonical header names, decimal
// lengths, and comma-separated lists of tokens.
package httptoken

// IsTokenByte reports whether c may appear in a token (RFC 9110 §5.6.2).
func IsTokenByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}

// Canonical reports whether a header name is already in net/textproto's
// canonical form: upper case first and after each hyphen, lower elsewhere.
func Canonical(k string) bool {
	upper := true
	for i := 0; i < len(k); i++ {
		c := k[i]
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			return false
		}
		upper = c == '-'
	}
	return true
}

// Decimal reads a non-negative decimal of 1 to maxDigits digits and
// nothing else (no sign, no blank); maxDigits at most 18 keeps it in an
// int64.
func Decimal[T ~string | ~[]byte](s T, maxDigits int) (int64, bool) {
	if len(s) == 0 || len(s) > maxDigits {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// HasToken reports whether a comma-separated header value lists tok, in
// any case and with blanks around it.
func HasToken[T ~string | ~[]byte](v T, tok string) bool {
	start := 0
	for i := 0; i <= len(v); i++ {
		if i < len(v) && v[i] != ',' {
			continue
		}
		a, b := start, i
		for a < b && (v[a] == ' ' || v[a] == '\t') {
			a++
		}
		for b > a && (v[b-1] == ' ' || v[b-1] == '\t') {
			b--
		}
		if b-a == len(tok) && equalFold(v[a:b], tok) {
			return true
		}
		start = i + 1
	}
	return false
}

func equalFold[T ~string | ~[]byte](a T, b string) bool {
	for i := 0; i < len(b); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
