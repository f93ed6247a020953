package region

import (
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
