package region

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

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

func TestReadTimeout(t *testing.T) {
	for _, c := range []struct {
		raw      string
		upstream time.Duration
		want     time.Duration
		bad      bool
	}{
		{"", time.Minute, defaultReadTimeout, false},
		{"null", time.Minute, defaultReadTimeout, false},
		{"", 4 * time.Second, 4 * time.Second, false},
		{"1", time.Minute, time.Millisecond, false},
		{"60000", time.Minute, time.Minute, false},
		{"60001", time.Minute, 0, true},
		{"0", time.Minute, 0, true},
		{"-5", time.Minute, 0, true},
		{"2.5", time.Minute, 0, true},
		{"1e3", time.Minute, 0, true},
		{`"10"`, time.Minute, 0, true},
		{"99999999999999999999999", time.Minute, 0, true},
	} {
		got, err := readTimeout(json.RawMessage(c.raw), c.upstream)
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("readTimeout(%s, %v) = %v, %v", c.raw, c.upstream, got, err)
		}
		if c.bad && (!errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "from 1 to")) {
			t.Errorf("readTimeout(%s): %v does not say the range", c.raw, err)
		}
	}
}
