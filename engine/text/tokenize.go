package text

import (
	"unicode"
	"unicode/utf8"
)

// MaxTokenBytes is the longest token kept, in bytes of UTF-8. A longer run
// of letters and digits is cut at the last whole rune that fits in
// MaxTokenBytes, and the rest of that run is dropped (it does not start a
// new token).
const MaxTokenBytes = 64

// Tokenize splits s into tokens. Runs of Unicode letters and digits
// (unicode.IsLetter, unicode.IsDigit) form tokens; every other rune,
// including punctuation, spaces, symbols and combining marks, separates
// them. Each rune is lower-cased (unicode.ToLower). There is no stemming
// and no stop-word list. Invalid UTF-8 bytes separate tokens.
func Tokenize(s string) []string {
	var out []string
	forEachToken(s, func(tok []byte) { out = append(out, string(tok)) })
	return out
}

// forEachToken calls fn with each token of s; fn must not keep tok.
func forEachToken(s string, fn func(tok []byte)) {
	var buf [MaxTokenBytes + utf8.UTFMax]byte
	n := 0
	in := false   // inside a run of letters and digits
	full := false // the current run has been cut
	for _, r := range s {
		if r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			in = true
			if full {
				continue
			}
			r = unicode.ToLower(r)
			w := utf8.RuneLen(r)
			if n+w > MaxTokenBytes {
				full = true
				continue
			}
			n += utf8.EncodeRune(buf[n:], r)
			continue
		}
		if in {
			fn(buf[:n])
		}
		n, in, full = 0, false, false
	}
	if in {
		fn(buf[:n])
	}
}
