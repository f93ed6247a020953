package region

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/fenec-go/fenec/region/merge"
)

// TestMergeRefusalsAre400: the merge's refusals of a whole read are the
// client's to fix, by the control plane's one table.
func TestMergeRefusalsAre400(t *testing.T) {
	for _, err := range []error{merge.ErrBadRule, merge.ErrTooManyRows} {
		if got := shardCode(fmt.Errorf("wrapped: %w", err)); got != http.StatusBadRequest {
			t.Errorf("%v: %d", err, got)
		}
	}
	if got := shardCode(errors.New("other")); got != http.StatusInternalServerError {
		t.Errorf("other error: %d", got)
	}
}

func TestCapturedBound(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 100)
	// A length past the bound is refused before a byte is kept.
	w := &captured{header: http.Header{}, limit: 50}
	aborted := serveCaptured(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusOK)
		if _, err := w.Write(big); err == nil {
			t.Error("write past the bound taken")
		}
	}), w, &http.Request{})
	if aborted || !w.over || w.body.Len() != 0 {
		t.Fatalf("over %v, kept %d, aborted %v", w.over, w.body.Len(), aborted)
	}
	// No length: writes are taken up to the bound; a handler that aborts
	// is recovered.
	w = &captured{header: http.Header{}, limit: 150}
	aborted = serveCaptured(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(big)
		if _, err := w.Write(big); err != nil {
			panic(http.ErrAbortHandler)
		}
	}), w, &http.Request{})
	if !aborted || !w.over || w.body.Len() != 100 || w.code != http.StatusOK {
		t.Fatalf("over %v, kept %d, aborted %v, code %d", w.over, w.body.Len(), aborted, w.code)
	}
}
