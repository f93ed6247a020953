package engine

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// JSON returns the answer as the node sends it: rows as a JSON array,
// {"affected": N} (with "ids", the rows written in order, for a put or an
// insert), {"count": N} or {"message": "..."}.
func (r *Result) JSON() []byte {
	switch r.Kind {
	case ResultAffected:
		b := strconv.AppendInt([]byte(`{"affected":`), r.Affected, 10)
		if r.IDs != nil {
			b = append(b, `,"ids":[`...)
			for i, id := range r.IDs {
				if i > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendInt(b, id, 10)
			}
			b = append(b, ']')
		}
		return append(b, '}')
	case ResultCount:
		b := strconv.AppendInt([]byte(`{"count":`), r.Count, 10)
		return append(b, '}')
	case ResultMessage:
		b := appendJSONString([]byte(`{"message":`), r.Message)
		return append(b, '}')
	}
	if r.lazy != nil {
		b, _ := r.Encoder().Next(nil, int(^uint(0)>>1))
		return b
	}
	b := make([]byte, 0, 64*len(r.Rows)+2)
	b = append(b, '[')
	for i, row := range r.Rows {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendRowJSON(b, row)
	}
	return append(b, ']')
}

// appendRowJSON writes a row with "id" first, then the other fields in
// name order, so the same row always encodes to the same bytes.
func appendRowJSON(b []byte, row Row) []byte {
	b = append(b, '{')
	first := true
	if id, ok := row["id"]; ok {
		b = append(b, `"id":`...)
		b = appendJSONValue(b, id)
		first = false
	}
	var keysBuf [16]string
	keys := keysBuf[:0]
	for k := range row {
		if k != "id" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendJSONValue(b, row[k])
	}
	return append(b, '}')
}

func appendJSONValue(b []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, x)
	case int64:
		return strconv.AppendInt(b, x, 10)
	case int:
		return strconv.AppendInt(b, int64(x), 10)
	case float64:
		return appendJSONFloat(b, x, 64)
	case float32:
		return appendJSONFloat(b, float64(x), 32)
	case string:
		return appendJSONString(b, x)
	case []float32:
		b = append(b, '[')
		for i, f := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONFloat(b, float64(f), 32)
		}
		return append(b, ']')
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONValue(b, e)
		}
		return append(b, ']')
	case []Row:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendRowJSON(b, e)
		}
		return append(b, ']')
	case Row:
		return appendRowJSON(b, x)
	case map[string]any:
		return appendRowJSON(b, Row(x))
	}
	// Not on the hot path: anything else goes through encoding/json.
	enc, err := json.Marshal(v)
	if err != nil {
		return append(b, "null"...)
	}
	return append(b, enc...)
}

func appendJSONFloat(b []byte, f float64, bits int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		// Integral floats print with no exponent, as JSON numbers.
		return strconv.AppendFloat(b, f, 'f', -1, bits)
	}
	return strconv.AppendFloat(b, f, 'g', -1, bits)
}

const hexDigits = "0123456789abcdef"

// appendJSONString quotes s, escaping what JSON requires and replacing
// invalid UTF-8 with U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
