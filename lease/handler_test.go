package lease

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// post sends g to h as the router's transport would, decoding the reply
// with DecodeReply.
func post(t testing.TB, h http.Handler, g any) (Answer, error) {
	t.Helper()
	b, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/_admin/lease", bytes.NewReader(b)))
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("content type %q", ct)
	}
	body, _ := io.ReadAll(rec.Body)
	return DecodeReply(rec.Code, body)
}

func TestHandler(t *testing.T) {
	clock := NewManualClock(time.Hour)
	var taken []Status
	h := &Handler{Lease: NewNodeLease(Binding{Term: 2}, nil), Clock: clock, OnTaken: func(s Status) { taken = append(taken, s) }}
	a := []string{"a"}

	if _, err := post(t, h, grantOf("r", 2, 1, 0, 1000, nil, a)); !errors.Is(err, ErrNeedsList) {
		t.Fatalf("grant without a list: %v, want ErrNeedsList", err)
	}
	if ans, err := post(t, h, grantOf("r", 2, 1, 0, 1000, a, nil)); err != nil || !ans.Took || ans.LeftMS != 0 {
		t.Fatalf("first grant: %+v %v", ans, err)
	}
	clock.Advance(10 * ms)
	if ans, err := post(t, h, grantOf("r", 2, 2, 1, 1000, nil, a)); err != nil || !ans.Ran || ans.LeftMS != 990 {
		t.Fatalf("second grant: %+v %v", ans, err)
	}
	var te *TermError
	if _, err := post(t, h, grantOf("old", 1, 5, 4, 1000, a, nil)); !errors.As(err, &te) || te.Highest != 2 {
		t.Fatalf("lower term: %v", err)
	}
	if _, err := post(t, h, map[string]any{"term": 2, "router": "r", "n": 3, "ack": 2, "ms": 1000, "list": "x", "bogus": 1}); !errors.Is(err, ErrBadGrant) {
		t.Fatalf("unknown field: %v", err)
	}
	if len(taken) != 2 || taken[1].LeftMS != 990 || taken[1].Tenants[0] != "a" {
		t.Fatalf("OnTaken saw %+v", taken)
	}

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/_admin/lease", nil))
	var st map[string]any
	if err := json.NewDecoder(rec.Body).Decode(&st); err != nil || rec.Code != 200 {
		t.Fatalf("GET: %d %v", rec.Code, err)
	}
	for _, k := range []string{"term", "n", "tenants", "left_ms", "ran"} {
		if _, ok := st[k]; !ok {
			t.Errorf("status lacks %q: %v", k, st)
		}
	}

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodDelete, "/_admin/lease", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("DELETE: %d", rec.Code)
	}
}

func TestHandlerTakesNoLease(t *testing.T) {
	h := &Handler{Clock: NewManualClock(0)}
	if _, err := post(t, h, grantOf("r", 1, 1, 0, 1000, []string{"a"}, nil)); !errors.Is(err, ErrTakesNoLease) {
		t.Fatalf("node without --lease: %v", err)
	}
}
