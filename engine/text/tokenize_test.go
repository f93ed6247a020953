package text

import (
	"slices"
	"strings"
	"testing"
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
