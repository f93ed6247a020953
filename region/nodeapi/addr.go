package nodeapi

import (
	"fmt"
	"net/url"
	"strings"
)

// NormalizeAddr is the one spelling of a node's address the directory
// keeps: scheme (http:// when none is given) and host in lower case, no
// trailing slash, no path, query, fragment or user. Its error says what is
// wrong with s; the router answers it as a bad request.
func NormalizeAddr(s string) (string, error) {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("addr %q: %v", s, err)
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme != "http" && scheme != "https":
		return "", fmt.Errorf("addr %q: the scheme must be http or https", s)
	case u.Host == "" || u.Hostname() == "":
		return "", fmt.Errorf("addr %q: no host", s)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return "", fmt.Errorf("addr %q: want scheme://host:port and nothing else", s)
	case u.Path != "" && u.Path != "/":
		return "", fmt.Errorf("addr %q: a node's address has no path", s)
	}
	return scheme + "://" + strings.ToLower(u.Host), nil
}

// SameAddr says whether two recorded addresses are one spelling apart.
func SameAddr(a, b string) bool {
	na, errA := NormalizeAddr(a)
	nb, errB := NormalizeAddr(b)
	return errA == nil && errB == nil && na == nb
}
