package region

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"time"

	"github.com/fenec-go/fenec/internal/badtoken"
)

// The router's own surface (/_shard/, /_metrics) takes the router token,
// and keeps the nodes' bad-token back-off (package badtoken): after
// badtoken.Limit wrong or missing tokens within a minute from one client
// address (an IPv6 address by its /64), that address is answered 429 with
// Retry-After for a minute, whatever token it sends. Other addresses are
// served as before. An address that presented the right token lately (an
// operator's machine, the router's peers) is never refused unheard: its
// right token is taken even while a stranger's guesses from the same
// address hold that address off. The data path (/t/) is the nodes': they
// keep their own back-off, keyed on the client the router names.

// backoffError is ErrBackoff with the time left.
type backoffError struct{ left time.Duration }

func (e backoffError) Error() string {
	return fmt.Sprintf("%s: wait %d s (Retry-After), then send the token fenec-shard --token-file reads", ErrBackoff, retrySeconds(e.left))
}
func (e backoffError) Unwrap() error             { return ErrBackoff }
func (e backoffError) RetryAfter() time.Duration { return e.left }

// retrySeconds is d in whole seconds, rounded up, at least 1.
func retrySeconds(d time.Duration) int {
	return max(1, int((d+time.Second-1)/time.Second))
}

// authorize checks the router token in constant time; a missing or wrong
// one is answered 401 with WWW-Authenticate, and one from an address held
// off 429 with Retry-After. No token configured: open.
func (rt *Router) authorize(w http.ResponseWriter, r *http.Request) bool {
	if !rt.clientCertOK(w, r) {
		return false
	}
	want := rt.token()
	if want == "" {
		return true
	}
	got, ok := badtoken.Bearer(r.Header.Get("Authorization"))
	right := ok && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
	var err error
	switch v, left := rt.badTokens.Check(badtoken.ClientKey(badtoken.RemoteHost(r)), right, true, time.Now()); v {
	case badtoken.Pass:
		return true
	case badtoken.HeldOff:
		err = backoffError{left}
		rt.metrics.refused.WithLabelValues("held_off").Inc()
	default:
		w.Header().Set("WWW-Authenticate", `Bearer realm="fenec-shard"`)
		err = ErrUnauthorized
		rt.metrics.refused.WithLabelValues("unauthorized").Inc()
	}
	cpError(w, err)
	// Counted against the address, not a line each: a stranger's flood
	// costs the log two lines a minute (package audit).
	e := rt.auditOf(r, "auth", "", "", err, shardCode(err))
	e.Path = r.URL.Path
	if aerr := rt.audit.Refused(badtoken.ClientKey(badtoken.RemoteHost(r)), e); aerr != nil {
		rt.log.Error("audit", "err", aerr)
	}
	return false
}
