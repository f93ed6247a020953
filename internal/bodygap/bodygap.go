// Package bodygap bounds the silence of a request body a server reads:
// once no byte of it has arrived for the gap, the body is cut, however
// long the whole takes. So a client that declares a body and stops holds
// a handler, and what it holds, no longer than the gap, while a large
// upload that keeps coming (a tenant's image) is never cut for its size.
//
// It works on the connection's read deadline, through
// http.ResponseController: Arm sets it as a request with a body comes in,
// which bounds a body no handler reads (the server reads what is left of a
// small one before it answers); Reader moves it on before each read and
// clears it at the body's end, leaving the connection as the server had
// it. A handler that streams a body with pauses of its own (a duplex feed)
// clears the deadline itself. Where the connection takes no deadline
// (httptest recorders), bodies are read unbounded, as before.
package bodygap

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// ErrStalled is a read of a body that sent no byte for the gap.
var ErrStalled = errors.New("request body stopped arriving")

// Arrived is a body that can tell it is already read off the connection
// whole (package h1's, when its buffer holds all of it): its reads never
// wait, so no deadline is set for it.
type Arrived interface{ Arrived() bool }

func arrived(body io.Reader) bool {
	a, ok := body.(Arrived)
	return ok && a.Arrived()
}

// Arm sets w's connection's read deadline gap from now when r has a body;
// false when it did nothing.
func Arm(w http.ResponseWriter, r *http.Request, gap time.Duration) bool {
	if gap <= 0 || r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 || arrived(r.Body) {
		return false
	}
	return http.NewResponseController(w).SetReadDeadline(time.Now().Add(gap)) == nil
}

// Reader reads body with w's connection's read deadline moved gap past
// the start of each read; a read that waits longer fails with an error
// wrapping ErrStalled. At the body's end (io.EOF) the deadline is cleared.
func Reader(w http.ResponseWriter, body io.Reader, gap time.Duration) io.Reader {
	if gap <= 0 || arrived(body) {
		return body
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(gap)) != nil {
		return body
	}
	return &reader{body: body, rc: rc, gap: gap}
}

type reader struct {
	body io.Reader
	rc   *http.ResponseController
	gap  time.Duration
	done bool // the body ended; the deadline was cleared
}

func (g *reader) Read(p []byte) (int, error) {
	if g.done {
		return g.body.Read(p)
	}
	_ = g.rc.SetReadDeadline(time.Now().Add(g.gap))
	n, err := g.body.Read(p)
	var ne net.Error
	switch {
	case err == io.EOF:
		g.done = true
		_ = g.rc.SetReadDeadline(time.Time{})
	case errors.As(err, &ne) && ne.Timeout():
		return n, fmt.Errorf("%w: no byte for %v", ErrStalled, g.gap)
	}
	return n, err
}
