package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/fenec-go/fenec/engine"
	"github.com/fenec-go/fenec/engine/fql"
)

// Query-string keys that are not filters.
var reservedKeys = map[string]bool{
	"select": true, "order": true, "limit": true, "offset": true, "count": true, "since": true,
}

// stmtBuilder collects a statement's text and its $n parameters. User
// text only ever becomes a parameter or a checked identifier.
type stmtBuilder struct {
	params []any
}

// param adds v and returns its placeholder.
func (b *stmtBuilder) param(v any) string {
	b.params = append(b.params, v)
	return "$" + strconv.Itoa(len(b.params))
}

// fieldPath checks a field path (a, a.b) of identifiers.
func fieldPath(s string) (string, error) {
	if s == "" || len(s) > 256 {
		return "", fmt.Errorf("%w: bad field %q", ErrBadRequest, s)
	}
	for _, p := range strings.Split(s, ".") {
		if !ident.MatchString(p) {
			return "", fmt.Errorf("%w: bad field %q", ErrBadRequest, s)
		}
	}
	return s, nil
}

// where translates the filters of a query string (every key not
// reserved) into a where clause, "" when there are none. Keys are taken
// in sorted order so one request always makes one statement.
func (b *stmtBuilder) where(q url.Values) (string, error) {
	keys := make([]string, 0, len(q))
	for k := range q {
		if !reservedKeys[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var conds []string
	for _, k := range keys {
		f, err := fieldPath(k)
		if err != nil {
			return "", err
		}
		for _, v := range q[k] {
			cond, err := b.cond(f, v)
			if err != nil {
				return "", err
			}
			conds = append(conds, cond)
		}
	}
	return strings.Join(conds, " and "), nil
}

// cond translates one filter value: [not.]op.value with op one of eq neq
// lt lte gt gte in has is.
func (b *stmtBuilder) cond(f, v string) (string, error) {
	neg := false
	if rest, ok := strings.CutPrefix(v, "not."); ok {
		neg, v = true, rest
	}
	op, val, ok := strings.Cut(v, ".")
	if !ok {
		return "", fmt.Errorf("%w: filter %s=%s: a filter is FIELD=OP.VALUE, e.g. %s=eq.%s (OP one of eq, neq, lt, lte, gt, gte, in, has, is; not. before it negates)",
			ErrBadRequest, f, v, f, v)
	}
	var cond string
	switch op {
	case "eq", "neq", "lt", "lte", "gt", "gte":
		cond = f + " " + compareOps[op] + " " + b.param(filterValue(val))
	case "has":
		cond = f + " has " + b.param(filterValue(val))
	case "in":
		list, err := filterList(val)
		if err != nil {
			return "", fmt.Errorf("filter %s: %w", f, err)
		}
		cond = f + " in " + b.param(list)
	case "is":
		if val != "null" {
			return "", fmt.Errorf("%w: filter %s: is takes only null", ErrBadRequest, f)
		}
		if neg {
			return f + " is not null", nil
		}
		return f + " is null", nil
	default:
		return "", fmt.Errorf("%w: filter %s: unknown op %q: OP is one of eq, neq, lt, lte, gt, gte, in, has, is (%s=eq.%s to match the value)",
			ErrBadRequest, f, op, f, v)
	}
	if neg {
		return "not (" + cond + ")", nil
	}
	return cond, nil
}

var compareOps = map[string]string{"eq": "=", "neq": "!=", "lt": "<", "lte": "<=", "gt": ">", "gte": ">="}

// filterValue reads a filter's value: a JSON number, true, false, null or
// a "quoted" JSON string as what it says, anything else as text.
func filterValue(s string) any {
	switch s {
	case "true":
		return true
	case "false":
		return false
	case "null":
		return nil
	}
	if strings.HasPrefix(s, `"`) {
		var str string
		if json.Unmarshal([]byte(s), &str) == nil {
			return str
		}
		return s
	}
	if looksNumeric(s) {
		var n json.Number
		if json.Unmarshal([]byte(s), &n) == nil {
			return n
		}
	}
	return s
}

func looksNumeric(s string) bool {
	return s != "" && (s[0] == '-' || (s[0] >= '0' && s[0] <= '9'))
}

// filterList reads in.(a,b,"c,d"): comma-separated values, a quoted one
// may hold commas.
func filterList(s string) ([]any, error) {
	if len(s) < 2 || s[0] != '(' || s[len(s)-1] != ')' {
		return nil, fmt.Errorf("%w: in wants (a,b,...)", ErrBadRequest)
	}
	s = s[1 : len(s)-1]
	list := []any{}
	if s == "" {
		return list, nil
	}
	for len(s) > 0 {
		var item string
		if s[0] == '"' {
			end := closingQuote(s)
			if end < 0 {
				return nil, fmt.Errorf("%w: in: unterminated quote", ErrBadRequest)
			}
			item, s = s[:end+1], s[end+1:]
			if s != "" && s[0] != ',' {
				return nil, fmt.Errorf("%w: in: want ',' after a quoted value", ErrBadRequest)
			}
		} else {
			i := strings.IndexByte(s, ',')
			if i < 0 {
				i = len(s)
			}
			item, s = s[:i], s[i:]
		}
		list = append(list, filterValue(item))
		if s != "" {
			s = s[1:]
			if s == "" {
				list = append(list, "")
			}
		}
	}
	return list, nil
}

// closingQuote is the index of the quote ending the JSON string s starts
// with, or -1.
func closingQuote(s string) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// readClauses translates select, order, limit, offset and count.
type readClauses struct {
	sel, order, limit, offset string
	count                     bool
}

func parseReadClauses(q url.Values) (readClauses, error) {
	var rc readClauses
	if v := q.Get("select"); v != "" {
		var fs []string
		for _, f := range strings.Split(v, ",") {
			p, err := fieldPath(strings.TrimSpace(f))
			if err != nil {
				return rc, err
			}
			fs = append(fs, p)
		}
		rc.sel = strings.Join(fs, ", ")
	}
	if v := q.Get("order"); v != "" {
		var keys []string
		for _, item := range strings.Split(v, ",") {
			f, dir := strings.TrimSpace(item), ""
			if p, ok := strings.CutSuffix(f, ".desc"); ok {
				f, dir = p, " desc"
			} else if p, ok := strings.CutSuffix(f, ".asc"); ok {
				f = p
			}
			p, err := fieldPath(f)
			if err != nil {
				return rc, err
			}
			keys = append(keys, p+dir)
		}
		rc.order = strings.Join(keys, ", ")
	}
	var rows uint64 // limit + offset
	for _, lim := range []struct {
		key string
		dst *string
	}{{"limit", &rc.limit}, {"offset", &rc.offset}} {
		if v := q.Get(lim.key); v != "" {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil || n > fql.MaxRows {
				return rc, fmt.Errorf("%w: %s=%s: %s is a whole number from 0 to %d", ErrBadRequest, lim.key, v, lim.key, fql.MaxRows)
			}
			*lim.dst = strconv.FormatUint(n, 10)
			rows += n
		}
	}
	if rc.limit != "" && rows > fql.MaxRows {
		return rc, fmt.Errorf("%w: limit plus offset is at most %d: read further pages by a filter on a field you order by (id=gt.LAST)", engine.ErrTooMany, fql.MaxRows)
	}
	_, rc.count = q["count"]
	return rc, nil
}

// getStatement builds `get coll [select] [where] [order] [limit] [offset]
// [count]` from a query string.
func getStatement(coll string, q url.Values) (string, []any, error) {
	var b stmtBuilder
	w, err := b.where(q)
	if err != nil {
		return "", nil, err
	}
	rc, err := parseReadClauses(q)
	if err != nil {
		return "", nil, err
	}
	var s strings.Builder
	s.WriteString("get " + coll)
	if rc.sel != "" {
		s.WriteString(" select " + rc.sel)
	}
	if w != "" {
		s.WriteString(" where " + w)
	}
	if rc.order != "" {
		s.WriteString(" order " + rc.order)
	}
	if rc.limit != "" {
		s.WriteString(" limit " + rc.limit)
	}
	if rc.offset != "" {
		s.WriteString(" offset " + rc.offset)
	}
	if rc.count {
		s.WriteString(" count")
	}
	return s.String(), b.params, nil
}

// builtError is a parse error of a statement the node built from a
// request's path and query string: its offset points into text the client
// never wrote, so it is answered without it. It is still the
// *engine.ParseError (and its sentinel), for the status table.
type builtError struct{ pe *engine.ParseError }

func (e *builtError) Error() string {
	return "the query string makes no statement the query language takes: " + e.pe.Msg
}

func (e *builtError) Unwrap() error { return e.pe }

// built is err as answered for a statement the node built: a parse
// error's offset left out; any other error as it is.
func built(err error) error {
	var pe *engine.ParseError
	if errors.As(err, &pe) {
		return &builtError{pe: pe}
	}
	return err
}
