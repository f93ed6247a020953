package node

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestReady: /_ready answers 503 with Retry-After before the node serves,
// 200 (no token) while it does, and 503 once it shuts down; the wrong
// method is 405.
func TestReady(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Dir, cfg.HTTP, cfg.AdminToken = t.TempDir(), "127.0.0.1:0", adminToken
	cfg.HTTPToken = "data-secret"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ready := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/_ready", nil))
		return w
	}
	if w := ready(); w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), "starting") {
		t.Fatalf("before Start: %d %v %s", w.Code, w.Header(), w.Body)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if w := ready(); w.Code != http.StatusOK || strings.TrimSpace(w.Body.String()) != `{"ready":true}` {
		t.Fatalf("serving: %d %s", w.Code, w.Body)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/_ready", nil))
	if w.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", w.Code)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if w := ready(); w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "shutting down") {
		t.Fatalf("after Close: %d %s", w.Code, w.Body)
	}
}
