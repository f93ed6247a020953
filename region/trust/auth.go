package trust

import (
	"crypto/subtle"
	"net/http"
	"time"

	"github.com/fenec-go/fenec/internal/badtoken"
	"github.com/fenec-go/fenec/internal/tlsx"
)

// The router's own surface (/_shard/, /_metrics) takes the router token,
// and keeps the nodes' bad-token back-off (package badtoken): after
// badtoken.Limit wrong or missing tokens within a minute from one client
// address (an IPv6 address by its /64), that address is held off for a
// minute, whatever token it sends. Other addresses are served as before.
// An address that presented the right token lately (an operator's
// machine, the router's peers) is never refused unheard: its right token
// is taken even while a stranger's guesses from the same address hold
// that address off. The data path (/t/) is the nodes': they keep their
// own back-off, keyed on the client the router names.

// Authorize checks that r may call the router's own surface: under
// --tls-client-auth admin, a client certificate the bundle verified
// (ErrClientCert), then the router token, compared in constant time
// (ErrUnauthorized when missing or wrong, a BackoffError when r's address
// is held off). No token configured: open. now is the back-off's clock.
func (t *Trust) Authorize(r *http.Request, now time.Time) error {
	if t.cfg.ClientAuth == ClientAuthAdmin && !tlsx.HasClientCert(r) {
		return ErrClientCert
	}
	want := t.token()
	if want == "" {
		return nil
	}
	got, ok := badtoken.Bearer(r.Header.Get("Authorization"))
	right := ok && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
	switch v, left := t.badTokens.Check(ClientKey(r), right, true, now); v {
	case badtoken.Pass:
		return nil
	case badtoken.HeldOff:
		return BackoffError{Left: left}
	default:
		return ErrUnauthorized
	}
}

// ClientKey is the address r's refusals are counted against (an IPv6
// address by its /64).
func ClientKey(r *http.Request) string { return badtoken.ClientKey(badtoken.RemoteHost(r)) }
