package wire

// ValidName reports whether s is a name fenec accepts for a tenant, node,
// region or router: [a-z0-9_-]{1,64}. A tenant's name is also the name of
// its file on the node and a segment of every path that routes to it, so
// the node, the router, the directory and the CLI all check it with this
// one rule.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
