package audit

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// bound cuts every text field of e to its bound.
func bound(e *Entry) {
	for _, f := range []*string{&e.Router, &e.Who, &e.Via, &e.What, &e.Path, &e.Tenant, &e.Node, &e.RequestID} {
		*f = clip(*f, MaxField)
	}
	e.Outcome = clip(e.Outcome, MaxText)
	e.Detail = clip(e.Detail, MaxText)
}

// clip returns s with control characters and bytes that are not UTF-8
// replaced by '?', cut to at most max bytes (on a character's boundary)
// and, when cut, followed by a marker naming the bytes left out.
func clip(s string, max int) string {
	if len(s) <= max && printable(s) {
		return s
	}
	var b strings.Builder
	b.Grow(min(len(s), max) + 32)
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		out := size
		if r == utf8.RuneError && size <= 1 || r < 0x20 || r == 0x7f {
			r, out = '?', 1
		}
		if b.Len()+out > max {
			break
		}
		b.WriteRune(r)
		i += size
	}
	if i < len(s) {
		b.WriteString("…[")
		b.WriteString(strconv.Itoa(len(s) - i))
		b.WriteString(" bytes cut]")
	}
	return b.String()
}

// printable says whether s is UTF-8 with no control character.
func printable(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}
