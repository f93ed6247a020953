package fql

import (
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// tokenKind is the kind of a lexical token.
type tokenKind int

const (
	tEOF    tokenKind = iota
	tIdent            // [A-Za-z_][A-Za-z0-9_]*; keywords are identifiers matched by the parser
	tInt              // digits
	tFloat            // digits with a fraction and/or an exponent
	tString           // "..." or '...', val holds the decoded text
	tParam            // $N, val holds the digits
	tPunct            // one of ( ) [ ] { } , : . * + - / = != < <= > >= ~ @ ;
)

// token is one lexical token. pos and end are byte offsets of its text.
type token struct {
	kind tokenKind
	pos  int
	end  int
	val  string // identifier or punctuation text, number digits, decoded string
}

// lexer cuts statement text into tokens on demand.
type lexer struct {
	src string
	off int
}

// is reports whether t is the punctuation p.
func (t token) is(p string) bool { return t.kind == tPunct && t.val == p }

// isKw reports whether t is the keyword kw (case-insensitive).
func (t token) isKw(kw string) bool { return t.kind == tIdent && strings.EqualFold(t.val, kw) }

// describe names t for an error message.
func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "end of statement"
	case tString:
		return "string " + strconv.Quote(cutText(t.val))
	case tParam:
		return "$" + cutText(t.val)
	}
	return strconv.Quote(cutText(t.val))
}

// next returns the next token, or an *Error for text that is no token.
func (l *lexer) next() (token, *Error) {
	l.skipSpace()
	if l.off >= len(l.src) {
		return token{kind: tEOF, pos: len(l.src), end: len(l.src)}, nil
	}
	start := l.off
	c := l.src[l.off]
	switch {
	case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		return l.ident()
	case c >= '0' && c <= '9':
		return l.number(), nil
	case c == '"' || c == '\'':
		return l.str()
	case c == '$':
		l.off++
		for l.off < len(l.src) && isDigit(l.src[l.off]) {
			l.off++
		}
		if l.off == start+1 {
			return token{}, &Error{Pos: start, Msg: "expected a parameter number after '$'"}
		}
		return token{kind: tParam, pos: start, end: l.off, val: l.src[start+1 : l.off]}, nil
	}
	if l.off+1 < len(l.src) {
		two := l.src[l.off : l.off+2]
		switch two {
		case "!=", "<=", ">=":
			l.off += 2
			return token{kind: tPunct, pos: start, end: l.off, val: two}, nil
		}
	}
	if strings.IndexByte("()[]{},:.*+-/=<>~@;", c) >= 0 {
		l.off++
		return token{kind: tPunct, pos: start, end: l.off, val: l.src[start:l.off]}, nil
	}
	r, _ := utf8.DecodeRuneInString(l.src[l.off:])
	msg := "unexpected character " + strconv.QuoteRune(r)
	switch {
	case strings.HasPrefix(l.src[start:], "&&"):
		msg += " (write and)"
	case strings.HasPrefix(l.src[start:], "||"):
		msg += " (write or)"
	case r == '!':
		msg += " (write not, or != to compare)"
	}
	return token{}, &Error{Pos: start, Msg: msg}
}

func (l *lexer) skipSpace() {
	for l.off < len(l.src) {
		switch l.src[l.off] {
		case ' ', '\t', '\n', '\r':
			l.off++
		default:
			return
		}
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c)
}

func (l *lexer) ident() (token, *Error) {
	start := l.off
	for l.off < len(l.src) && isIdentByte(l.src[l.off]) {
		l.off++
	}
	if l.off-start > MaxIdent {
		return token{}, &Error{Pos: start, Msg: "identifier longer than " + strconv.Itoa(MaxIdent) + " bytes"}
	}
	return token{kind: tIdent, pos: start, end: l.off, val: l.src[start:l.off]}, nil
}

// number lexes digits [. digits] [e [+-] digits]. A '.' or 'e' not
// followed by a digit ends the number before it (so 30m and a.1 lex as
// two tokens).
func (l *lexer) number() token {
	start := l.off
	kind := tInt
	l.digits()
	if l.off+1 < len(l.src) && l.src[l.off] == '.' && isDigit(l.src[l.off+1]) {
		kind = tFloat
		l.off++
		l.digits()
	}
	if l.off < len(l.src) && (l.src[l.off] == 'e' || l.src[l.off] == 'E') {
		i := l.off + 1
		if i < len(l.src) && (l.src[i] == '+' || l.src[i] == '-') {
			i++
		}
		if i < len(l.src) && isDigit(l.src[i]) {
			kind = tFloat
			l.off = i
			l.digits()
		}
	}
	return token{kind: kind, pos: start, end: l.off, val: l.src[start:l.off]}
}

func (l *lexer) digits() {
	for l.off < len(l.src) && isDigit(l.src[l.off]) {
		l.off++
	}
}

// str lexes a quoted string with backslash escapes:
// \" \' \\ \/ \n \t \r \b \f \0 and \uXXXX (a UTF-16 pair for runes past
// U+FFFF).
func (l *lexer) str() (token, *Error) {
	start := l.off
	q := l.src[l.off]
	l.off++
	// Fast path: no escapes, the text is a slice of the source.
	for i := l.off; i < len(l.src) && l.src[i] != '\\'; i++ {
		if l.src[i] == q {
			l.off = i + 1
			return token{kind: tString, pos: start, end: l.off, val: l.src[start+1 : i]}, nil
		}
	}
	var b strings.Builder
	for {
		if l.off >= len(l.src) {
			return token{}, &Error{Pos: start, Msg: "string not closed"}
		}
		c := l.src[l.off]
		switch {
		case c == q:
			l.off++
			return token{kind: tString, pos: start, end: l.off, val: b.String()}, nil
		case c == '\\':
			if err := l.escape(&b); err != nil {
				return token{}, err
			}
		default:
			b.WriteByte(c)
			l.off++
		}
	}
}

func (l *lexer) escape(b *strings.Builder) *Error {
	at := l.off
	if l.off+1 >= len(l.src) {
		return &Error{Pos: at, Msg: "string not closed"}
	}
	c := l.src[l.off+1]
	l.off += 2
	switch c {
	case '"', '\'', '\\', '/':
		b.WriteByte(c)
	case 'n':
		b.WriteByte('\n')
	case 't':
		b.WriteByte('\t')
	case 'r':
		b.WriteByte('\r')
	case 'b':
		b.WriteByte('\b')
	case 'f':
		b.WriteByte('\f')
	case '0':
		b.WriteByte(0)
	case 'u':
		r, ok := l.hex4()
		if !ok {
			return &Error{Pos: at, Msg: `expected four hex digits after \u`}
		}
		if utf16.IsSurrogate(r) {
			if r >= 0xdc00 || !strings.HasPrefix(l.src[l.off:], `\u`) {
				return &Error{Pos: at, Msg: `lone UTF-16 surrogate in \u escape`}
			}
			l.off += 2
			r2, ok := l.hex4()
			if !ok {
				return &Error{Pos: at, Msg: `expected four hex digits after \u`}
			}
			r = utf16.DecodeRune(r, r2)
			if r == utf8.RuneError {
				return &Error{Pos: at, Msg: `lone UTF-16 surrogate in \u escape`}
			}
		}
		b.WriteRune(r)
	default:
		r, _ := utf8.DecodeRuneInString(l.src[at+1:])
		return &Error{Pos: at, Msg: "unknown escape \\" + string(r) + " in string"}
	}
	return nil
}

func (l *lexer) hex4() (rune, bool) {
	if l.off+4 > len(l.src) {
		return 0, false
	}
	v, err := strconv.ParseUint(l.src[l.off:l.off+4], 16, 32)
	if err != nil {
		return 0, false
	}
	l.off += 4
	return rune(v), true
}
