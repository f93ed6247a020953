package node

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/fenec-go/fenec/engine"
	"github.com/fenec-go/fenec/internal/jsonerr"
	"github.com/fenec-go/fenec/wire"
)

// statusRule maps one error to the status it is answered with.
type statusRule struct {
	err        error
	status     int
	retryAfter int // seconds; 0: no Retry-After header
}

// statusTable is the one table of the node's answers to errors, engine's
// and its own. The first rule whose error matches (errors.Is) wins.
var statusTable = []statusRule{
	{ErrBadRequest, http.StatusBadRequest, 0},
	{ErrCannotFollow, http.StatusBadRequest, 0},
	{ErrBadName, http.StatusBadRequest, 0},
	{ErrBadPath, http.StatusBadRequest, 0},
	{engine.ErrType, http.StatusBadRequest, 0},
	{engine.ErrInvalid, http.StatusBadRequest, 0},
	{engine.ErrNotRead, http.StatusBadRequest, 0},
	{engine.ErrTooMany, http.StatusBadRequest, 0},
	{engine.ErrUnknownField, http.StatusBadRequest, 0},
	{engine.ErrBadImage, http.StatusBadRequest, 0},
	{ErrUnauthorized, http.StatusUnauthorized, 0},
	{ErrBadProof, http.StatusUnauthorized, 0},
	{ErrClientCert, http.StatusForbidden, 0},
	{ErrNoRoute, http.StatusNotFound, 0},
	{ErrUnknownTenant, http.StatusNotFound, 0},
	{engine.ErrNotExist, http.StatusNotFound, 0},
	{engine.ErrUnknownCollection, http.StatusNotFound, 0},
	{ErrMethod, http.StatusMethodNotAllowed, 0},
	{ErrStale, wire.StatusDeclined, 0},
	{ErrBehind, wire.StatusDeclined, 0},
	{ErrWriteToCopy, wire.StatusDeclined, 0},
	{ErrTenantExists, http.StatusConflict, 0},
	{ErrPromoteRefused, http.StatusConflict, 0},
	{ErrImageLineage, http.StatusConflict, 0},
	{ErrNotThisNode, http.StatusConflict, 0},
	{engine.ErrExist, http.StatusConflict, 0},
	{engine.ErrTaken, http.StatusConflict, 0},
	{engine.ErrCursorGone, http.StatusGone, 0},
	{engine.ErrRequire, http.StatusPreconditionFailed, 0},
	{ErrNotFrozen, http.StatusPreconditionFailed, 0},
	{ErrBodyTooLarge, http.StatusRequestEntityTooLarge, 0},
	{ErrImageTooLarge, http.StatusRequestEntityTooLarge, 0},
	{ErrBodyStalled, http.StatusRequestTimeout, 0},
	{ErrKeyReused, http.StatusUnprocessableEntity, 0},
	{ErrBackoff, http.StatusTooManyRequests, 60},
	{ErrTooManyStreams, http.StatusTooManyRequests, 1},
	{ErrTooManyRequests, http.StatusTooManyRequests, 1},
	{ErrRateLimited, http.StatusTooManyRequests, 1},
	{ErrFrozen, http.StatusServiceUnavailable, 1},
	{ErrReplica, http.StatusServiceUnavailable, 1},
	{ErrTenantClosing, http.StatusServiceUnavailable, 1},
	{ErrTenantGone, http.StatusServiceUnavailable, 1},
	{ErrTenantRestored, http.StatusServiceUnavailable, 1},
	{ErrShuttingDown, http.StatusServiceUnavailable, 1},
	{ErrStarting, http.StatusServiceUnavailable, 1},
	{ErrNodeClosed, http.StatusServiceUnavailable, 1},
	{ErrNoDescriptors, http.StatusServiceUnavailable, 1},
	{ErrHoldNotRun, http.StatusServiceUnavailable, 1},
	{ErrNoLease, http.StatusServiceUnavailable, 1},
	{ErrLeaseLapsed, http.StatusInternalServerError, 0},
	{ErrPartlyLanded, http.StatusInternalServerError, 0},
	{engine.ErrLocked, http.StatusServiceUnavailable, 1},
	{engine.ErrClosed, http.StatusServiceUnavailable, 1},
	{ErrAfterTimeout, http.StatusGatewayTimeout, 0},
	{ErrHistoryForked, http.StatusGatewayTimeout, 0},
	{ErrMemoryFull, http.StatusInsufficientStorage, 0},
	{ErrQuotaBytes, http.StatusInsufficientStorage, 0},
	{ErrQuotaRows, http.StatusInsufficientStorage, 0},
	{ErrAnswerTooLarge, http.StatusBadRequest, 0},
	{ErrAnswerMemory, http.StatusServiceUnavailable, 1},
	// A stopped statement is answered by its cause: a tenant going or the
	// node stopping, above; its time bound (no Retry-After: the same
	// statement meets the same bound); or its client gone, 499 as nginx
	// counts it, for the metrics and the log, since no one reads it.
	{ErrStatementTime, http.StatusServiceUnavailable, 0},
	{ErrClientGone, statusClientGone, 0},
	{engine.ErrStopped, http.StatusServiceUnavailable, 1},
}

// codeTable gives the refusals a caller decides by their stable code,
// the "code" of the answer's body (wire.Error.Code): their messages are
// prose.
var codeTable = []struct {
	err  error
	code string
}{
	{ErrCannotFollow, wire.CodeCannotFollow},
}

// codeOf is err's code ("": none).
func codeOf(err error) string {
	for _, r := range codeTable {
		if errors.Is(err, r.err) {
			return r.code
		}
	}
	return ""
}

// statusClientGone is what a request whose client went away is counted
// as: no one reads it.
const statusClientGone = 499

// statusOf says how err is answered: the status and the Retry-After
// seconds (0: none).
func statusOf(err error) (int, int) {
	for _, r := range statusTable {
		if errors.Is(err, r.err) {
			return r.status, r.retryAfter
		}
	}
	var (
		pe *engine.ParseError
		mb *http.MaxBytesError
		qe *engine.QuotaError
	)
	switch {
	case errors.As(err, &pe):
		return http.StatusBadRequest, 0
	case errors.As(err, &mb):
		return http.StatusRequestEntityTooLarge, 0
	case errors.As(err, &qe):
		return http.StatusInsufficientStorage, 0
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, 0
	}
	return http.StatusInternalServerError, 0
}

// writeError answers err as {"error": "..."} plus fields, with the status
// and Retry-After the table gives it.
func writeError(w http.ResponseWriter, err error, fields map[string]any) int {
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		err = ErrNoDescriptors // what failed is the node's, never a path
	}
	status, retry := statusOf(err)
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		retry = max(1, int((ra.RetryAfter()+time.Second-1)/time.Second))
	}
	if errors.Is(err, ErrNoLease) {
		// Nothing ran: a router may send it again once its grant lands.
		w.Header().Set(wire.HeaderRefused, wire.RefusedLease)
	}
	switch {
	case errors.Is(err, ErrReplica), errors.Is(err, ErrWriteToCopy):
		w.Header().Set(wire.HeaderRefused, wire.RefusedReplica) // a copy: write to its primary
	case errors.Is(err, ErrStale):
		w.Header().Set(wire.HeaderRefused, wire.RefusedStale) // a copy: read from the primary
	case errors.Is(err, ErrBehind):
		w.Header().Set(wire.HeaderRefused, wire.RefusedBehind)
	}
	if retry > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retry))
	}
	if status == http.StatusRequestTimeout {
		w.Header().Set("Connection", "close") // what is left of the body is never read
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="fenec"`)
	}
	body := map[string]any{"error": err.Error()}
	if code := codeOf(err); code != "" {
		body["code"] = code
	}
	if de := (*engine.DamagedError)(nil); errors.As(err, &de) {
		body["damaged"] = true // wire.IsDamaged: a copy's router replaces it
	}
	for k, v := range fields {
		body[k] = v
	}
	writeJSON(w, status, body)
	return status
}

// writeJSON answers v encoded as JSON (<, > and & as they are).
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := jsonerr.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encode answer"}`)
	}
	writeRaw(w, status, b)
}

// writeRaw answers b, which is already JSON.
func writeRaw(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	w.Write(b)
	w.Write([]byte{'\n'})
}
