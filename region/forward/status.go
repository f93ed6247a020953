package forward

import (
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
)

// errorAnswer is how the router itself answers an error.
type errorAnswer struct {
	code        int
	body        []byte // {"error": ...}
	bodyUnknown []byte // {"error": ..., "outcome": "unknown"}
	retryAfter  bool
}

// forwardStatus is the forwarding path's one table from error to status.
var forwardStatus = func() map[error]*errorAnswer {
	t := map[error]*errorAnswer{
		ErrBadTarget:       {code: http.StatusBadRequest},
		ErrBadTenant:       {code: http.StatusBadRequest},
		ErrUnknownTenant:   {code: http.StatusNotFound},
		ErrUnknownInRegion: {code: http.StatusNotFound},
		ErrReplicationFeed: {code: http.StatusNotFound},
		ErrNotReady:        {code: http.StatusServiceUnavailable, retryAfter: true},
		ErrBodyTooLarge:    {code: http.StatusRequestEntityTooLarge},
		ErrBodyRead:        {code: http.StatusBadRequest},
		ErrBodyMemory:      {code: http.StatusServiceUnavailable, retryAfter: true},
		ErrBodyMemoryAddr:  {code: http.StatusTooManyRequests, retryAfter: true},
		ErrBodyStalled:     {code: http.StatusRequestTimeout},
		ErrUnreachable:     {code: http.StatusBadGateway},
		ErrUntrustedNode:   {code: http.StatusBadGateway},
		ErrMayHaveRun:      {code: http.StatusBadGateway},
		ErrUpstreamTimeout: {code: http.StatusBadGateway},
		ErrBadAnswer:       {code: http.StatusBadGateway},
		ErrNotSent:         {code: http.StatusBadGateway},
		ErrClosed:          {code: http.StatusServiceUnavailable, retryAfter: true},
	}
	for err, a := range t {
		msg := strconv.Quote(err.Error())
		a.body = []byte(`{"error": ` + msg + "}\n")
		a.bodyUnknown = []byte(`{"error": ` + msg + `, "outcome": "unknown"}` + "\n")
	}
	return t
}()

var (
	jsonType   = []string{"application/json"}
	retryOne   = []string{"1"}
	lengthMemo sync.Map // int → []string
)

func lengthValue(n int) []string {
	if v, ok := lengthMemo.Load(n); ok {
		return v.([]string)
	}
	v := []string{strconv.Itoa(n)}
	lengthMemo.Store(n, v)
	return v
}

// writeError answers err as its table row says; unknown adds
// "outcome": "unknown" (a write that may have run). It returns the status.
func writeError(w http.ResponseWriter, err error, unknown bool) int {
	a := forwardStatus[err]
	if a == nil {
		a = forwardStatus[ErrUnreachable]
	}
	body := a.body
	if unknown {
		body = a.bodyUnknown
	}
	h := w.Header() // the request's id, set before, stays
	h["Content-Type"] = jsonType
	h["Content-Length"] = lengthValue(len(body))
	if a.retryAfter {
		h["Retry-After"] = retryOne
	}
	w.WriteHeader(a.code)
	_, _ = w.Write(body)
	return a.code
}

func asOpError(err error, target **net.OpError) bool { return errors.As(err, target) }

// bufPool hands out fixed-size byte slices.
type bufPool struct{ p sync.Pool }

func newBufPool(size int) *bufPool {
	return &bufPool{p: sync.Pool{New: func() any { b := make([]byte, size); return &b }}}
}

func (b *bufPool) Get() any  { return b.p.Get() }
func (b *bufPool) Put(v any) { b.p.Put(v) }
