package region

import (
	"net/http"
	"testing"
)

// TestBearerSchemeAnyCaseCP: the router matches the Bearer scheme
// case-insensitively (RFC 7235), and the token exactly.
func TestBearerSchemeAnyCaseCP(t *testing.T) {
	r := startCPRouter(t, nil)
	for _, h := range []string{"Bearer " + cpRouterToken, "bearer " + cpRouterToken, "BEARER  " + cpRouterToken} {
		if st, _, b := cpDo(t, http.MethodGet, r.url+"/_shard/nodes", "", nil, map[string]string{"Authorization": h}); st != http.StatusOK {
			t.Fatalf("%q: %d %s", h, st, b)
		}
	}
	for _, h := range []string{"Bearer X" + cpRouterToken, "Basic " + cpRouterToken, cpRouterToken, "Bearer"} {
		if st, _, b := cpDo(t, http.MethodGet, r.url+"/_shard/nodes", "", nil, map[string]string{"Authorization": h}); st != http.StatusUnauthorized {
			t.Fatalf("%q: %d %s", h, st, b)
		}
	}
}
