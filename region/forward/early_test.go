package forward

import (
	"net/http"
	"testing"
)

// TestEarlyAnswerBeforeBodyRead: a node that answers before reading a big
// body (a refused token, say) has that answer passed back, not a 502.
func TestEarlyAnswerBeforeBodyRead(t *testing.T) {
	node := newRecorderRaw(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "25")
		w.WriteHeader(401)
		_, _ = w.Write([]byte(`{"error": "bad token"}` + "\n  "))
	})
	place := newPlacements(map[string]Target{"acme": {Node: "n1", Addr: node}})
	r := newRouter(t, place, fwdOpts{})
	resp, body := do(t, client(t), "POST", r.url+"/t/acme/batch", randomBytes(16<<20, 9), nil)
	if resp.StatusCode != 401 {
		t.Fatalf("status %d %s, want the node's 401", resp.StatusCode, body)
	}
}
