package region

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/fenec-go/fenec/internal/jsonerr"
	"github.com/fenec-go/fenec/region/trust"
)

// cpJSON answers v as JSON with code (a nil v and 204: no body); <, >
// and & as they are.
func cpJSON(w http.ResponseWriter, code int, v any) {
	if code == http.StatusNoContent {
		w.WriteHeader(code)
		return
	}
	b, err := jsonerr.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":"encode answer"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// cpError answers err by the control plane's table.
func cpError(w http.ResponseWriter, err error) {
	code := shardCode(err)
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		w.Header().Set("Retry-After", strconv.Itoa(trust.RetrySeconds(ra.RetryAfter())))
	} else if code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	cpJSON(w, code, shardErrorBody(err))
}
