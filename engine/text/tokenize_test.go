package text

import (
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestTokenize(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"empty", "", nil},
		{"only separators", " ,.;!? -- ", nil},
		{"case", "Hello WORLD hello", []string{"hello", "world", "hello"}},
		{"punctuation splits", "e-mail don't a_b x.y/z", []string{"e", "mail", "don", "t", "a", "b", "x", "y", "z"}},
		{"digits", "route 66, 3.14 and 1st", []string{"route", "66", "3", "14", "and", "1st"}},
		{"latin with accents", "Grüße aus MÜNCHEN", []string{"grüße", "aus", "münchen"}},
		{"cyrillic and greek", "Привет, Мир! ΣΊΣΥΦΟΣ", []string{"привет", "мир", "σίσυφοσ"}},
		{"cjk and kana", "東京タワー、大阪。", []string{"東京タワー", "大阪"}},
		{"arabic with its digits", "مرحبا ٣٤", []string{"مرحبا", "٣٤"}},
		{"emoji and symbols split", "go🚀fast €5 a+b", []string{"go", "fast", "5", "a", "b"}},
		{"combining marks split", "cafe\u0301 café", []string{"cafe", "café"}},
		{"invalid utf-8 splits", "ab\xffcd", []string{"ab", "cd"}},
		{"tabs and newlines", "a\tb\nc\r\nd", []string{"a", "b", "c", "d"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Tokenize(tt.in); !slices.Equal(got, tt.want) {
				t.Fatalf("Tokenize(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestTokenizeCutsLongTokens(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"ascii", strings.Repeat("a", 70), strings.Repeat("a", 64)},
		{"exactly 64", strings.Repeat("b", 64), strings.Repeat("b", 64)},
		{"two-byte runes", strings.Repeat("É", 40), strings.Repeat("é", 32)},
		// 21 three-byte runes are 63 bytes; a 22nd would pass 64.
		{"three-byte runes", strings.Repeat("東", 30), strings.Repeat("東", 21)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Tokenize(tt.in + " next")
			if want := []string{tt.want, "next"}; !slices.Equal(got, want) {
				t.Fatalf("got %q, want %q", got, want)
			}
			if len(got[0]) > MaxTokenBytes {
				t.Fatalf("token of %d bytes", len(got[0]))
			}
		})
	}
}

// Every token is a non-empty run of lower-cased letters and digits of at
// most MaxTokenBytes, and tokenizing the tokens again gives them back.
func FuzzTokenize(f *testing.F) {
	for _, s := range []string{"", "Hello, World!", "Grüße 東京タワー ٣٤", "ab\xffcd", strings.Repeat("É", 40), "cafe\u0301"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		toks := Tokenize(s)
		for _, tok := range toks {
			if tok == "" || len(tok) > MaxTokenBytes || !utf8.ValidString(tok) {
				t.Fatalf("bad token %q from %q", tok, s)
			}
			for _, r := range tok {
				if !unicode.IsLetter(r) && !unicode.IsDigit(r) || unicode.ToLower(r) != r {
					t.Fatalf("token %q from %q holds %q", tok, s, r)
				}
			}
		}
		if again := Tokenize(strings.Join(toks, " ")); !slices.Equal(again, toks) {
			t.Fatalf("tokens %q tokenize again to %q", toks, again)
		}
	})
}
