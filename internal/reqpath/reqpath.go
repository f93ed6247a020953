package reqpath

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// ErrBadPath: the request's path is refused (400).
var ErrBadPath = errors.New("bad path")

// Segments checks r's path and splits it into its segments: "/t/a/c"
// is [t a c], and a "/" at the end is dropped ("/_admin/tenants/" is
// [_admin tenants]). The error, wrapping ErrBadPath, says what is wrong
// and what to send instead.
func Segments(r *http.Request) ([]string, error) {
	raw := r.URL.EscapedPath()
	if !strings.HasPrefix(raw, "/") {
		return nil, fmt.Errorf("%w: the path must begin with /", ErrBadPath)
	}
	low := strings.ToLower(raw)
	for _, enc := range []string{"%2f", "%5c", "%2e", "%00"} {
		if strings.Contains(low, enc) {
			return nil, fmt.Errorf("%w: %s encodes a separator, a dot or NUL: send each name as it is; no name holds /, \\ or a NUL, and no segment is . or ..", ErrBadPath, enc)
		}
	}
	if strings.Contains(raw, `\`) {
		return nil, fmt.Errorf(`%w: a backslash: no name holds one; separate names with /`, ErrBadPath)
	}
	rawSegs := strings.Split(raw[1:], "/")
	if n := len(rawSegs); n > 1 && rawSegs[n-1] == "" {
		rawSegs = rawSegs[:n-1]
	}
	control := strings.HasPrefix(rawSegs[0], "_")
	for i, s := range rawSegs {
		switch {
		case s == "" && raw != "/":
			return nil, fmt.Errorf("%w: an empty segment (//): send one / between names", ErrBadPath)
		case s == "." || s == "..":
			return nil, fmt.Errorf("%w: a %q segment: send the route's own path, with no . or .. segment", ErrBadPath, s)
		case strings.Contains(s, "%") && i == 0:
			return nil, fmt.Errorf("%w: the route's first segment is percent-encoded: send it as it is (t, _admin, _shard...)", ErrBadPath)
		case strings.Contains(s, "%") && control:
			return nil, fmt.Errorf("%w: a name below /%s is percent-encoded: send it as it is (names there are lower-case letters, digits, _ and -)", ErrBadPath, rawSegs[0])
		}
	}
	segs := make([]string, len(rawSegs))
	for i, s := range rawSegs {
		segs[i] = s
		if strings.Contains(s, "%") {
			segs[i] = decoded(r.URL.Path, i)
		}
	}
	return segs, nil
}

// decoded is the i-th segment of the decoded path, which has as many
// segments as the raw one once no raw segment holds an encoded "/".
func decoded(path string, i int) string {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if i < len(segs) {
		return segs[i]
	}
	return ""
}
