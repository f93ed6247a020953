package history

import (
	"errors"
	"strings"
	"syscall"
)

// refusedPrefix marks an attempt's Err whose connection was refused: the
// request was never sent.
const refusedPrefix = "connection refused: "

// ErrText is what an attempt records of a request that got no answer.
// A connection refused is marked as such, since Classify takes it for a
// request never sent.
func ErrText(err error) string {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return refusedPrefix + err.Error()
	}
	return err.Error()
}

// Classify says what an attempt's answer tells of its operation, and
// whether sending it again (with its key) may settle it. sent is false
// when the attempt found nowhere to send it; a.Err, when not empty, is
// ErrText of the error that ended it unanswered.
func Classify(a Attempt, sent bool) (Outcome, bool) {
	switch {
	case !sent:
		return Fail, true // nowhere to send it yet
	case a.Err != "":
		if strings.HasPrefix(a.Err, refusedPrefix) {
			return Fail, true // never sent
		}
		return Unknown, true
	case a.Status == 200 || a.Status == 201:
		return OK, false
	case a.Status == 503 || a.Status == 429 || a.Status == 404:
		// Refused unrun: no lease, a copy, frozen, a directory not yet
		// arrived or a handoff in flight; a tenant not where the router or
		// the client thought.
		return Fail, true
	case a.Status >= 500:
		// 500 "outcome": "unknown", a 502 that may have run, a 504.
		return Unknown, true
	}
	return Fail, false
}

// Settle is the outcome of an operation whose attempts all ended without
// one done: the last attempt's class, except that a write any attempt of
// which may have run is unknown.
func Settle(kind Kind, last Outcome, mayHaveRun bool) Outcome {
	if mayHaveRun && kind.Write() {
		return Unknown
	}
	return last
}
