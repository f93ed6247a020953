package lease

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/fenec-go/fenec/internal/jsonerr"
)

// maxGrantBytes bounds a grant's body: a list of many tenants' names.
const maxGrantBytes = 8 << 20

// Handler serves /_admin/lease for a node: POST takes a grant (API.md §3),
// GET reports the lease. Authorization is the node's, before it. A nil
// lease is a node started without --lease: every grant is answered 409
// "this node takes no lease". OnTaken, if set, is called after each grant
// the node took, with the lease's status (the node uses it to see which of
// its primaries' files the lease no longer names).
//
// Report, if set, is asked after each grant answered 200 for the copies the
// node wants recorded behind (tenant: the seq a write waits at) and those
// it says caught up; they go in the answer.
//
// OnBinding, if set, is called for each grant that moved the node's
// binding (another directory, epoch or term: was and now differ, err is
// nil) and each refused past the bounds (err is a *BoundError): the node
// writes them to its audit log.
type Handler struct {
	Lease     *NodeLease
	Clock     Clock
	OnTaken   func(Status)
	Report    func() (behind map[string]uint64, caught []string)
	OnBinding func(r *http.Request, was, now Binding, g Grant, err error)
}

// ServeHTTP answers a grant or a status request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if h.Lease == nil {
			writeJSON(w, http.StatusConflict, ErrorBody{Error: ErrTakesNoLease.Error()})
			return
		}
		writeJSON(w, http.StatusOK, h.Lease.Status(h.Clock.Now()))
	case http.MethodPost:
		h.grant(w, r)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		writeJSON(w, http.StatusMethodNotAllowed, ErrorBody{Error: "method not allowed"})
	}
}

func (h *Handler) grant(w http.ResponseWriter, r *http.Request) {
	if h.Lease == nil {
		status, body := ReplyStatus(ErrTakesNoLease)
		writeJSON(w, status, body)
		return
	}
	g, err := decodeGrant(r.Body)
	if err != nil {
		status, body := ReplyStatus(err)
		writeJSON(w, status, body)
		return
	}
	// The moment read here is the answer's: the lease a later grant runs
	// from it ends no later than one run from the bytes going out.
	a, was, err := h.Lease.Judge(h.Clock.Now(), g)
	if h.OnBinding != nil {
		now := Binding{Dir: a.Dir, Epoch: a.Epoch, Term: a.Term}
		switch {
		case errors.Is(err, ErrEpochBound):
			h.OnBinding(r, was, was, g, err)
		case err == nil && now != was:
			h.OnBinding(r, was, now, g, nil)
		}
	}
	if err != nil {
		status, body := ReplyStatus(err)
		writeJSON(w, status, body)
		return
	}
	if a.Took && h.OnTaken != nil {
		h.OnTaken(h.Lease.Status(h.Clock.Now()))
	}
	if h.Report != nil {
		a.Behind, a.Caught = h.Report()
	}
	writeJSON(w, http.StatusOK, a)
}

func decodeGrant(body io.Reader) (Grant, error) {
	var g Grant
	b, err := io.ReadAll(io.LimitReader(body, maxGrantBytes))
	if err != nil {
		return Grant{}, fmt.Errorf("%w: read body: %v", ErrBadGrant, err)
	}
	// One grant, each key once: a body read two ways could grant twice.
	if err := jsonerr.Decode(b, &g, jsonerr.KnownFields); err != nil {
		return Grant{}, fmt.Errorf("%w: %w", ErrBadGrant, err)
	}
	return g, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client went away: nothing to do
}
