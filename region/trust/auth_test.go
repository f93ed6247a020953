package trust

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/badtoken"
	"github.com/fenec-go/fenec/internal/testkit"
)

// loaded is a Trust over c, its directory given (no secrets looked for);
// its logger discards.
func loaded(tb testing.TB, c Config) *Trust {
	tb.Helper()
	c.DirectoryGiven = true
	tr, err := Load(c, Deps{Log: testkit.Logger()})
	if err != nil {
		tb.Fatal(err)
	}
	return tr
}

// call is a request from addr bearing token ("": none).
func call(addr, token string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/_shard/nodes", nil)
	r.RemoteAddr = addr
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

// TestAuthorizeHoldsOffGuessers: wrong or missing tokens from one address
// hold it off after badtoken.Limit, the right token then refused too and
// the time left said; another address is served, and an address that
// showed the right token before a stranger's guesses from it is still
// heard with it.
func TestAuthorizeHoldsOffGuessers(t *testing.T) {
	tr := loaded(t, Config{Token: "right"})
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := tr.Authorize(call("192.0.2.7:1", "right"), now); err != nil {
		t.Fatalf("the operator's right token: %v", err)
	}
	for i := range badtoken.Limit {
		tok := "wrong"
		if i%2 == 1 {
			tok = ""
		}
		if err := tr.Authorize(call("192.0.2.1:1", tok), now); !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("guess %d: %v, want ErrUnauthorized", i, err)
		}
		if err := tr.Authorize(call("192.0.2.7:2", "wrong"), now); !errors.Is(err, ErrUnauthorized) && !errors.Is(err, ErrBackoff) {
			t.Fatalf("the operator's address guessing too, %d: %v", i, err)
		}
	}
	err := tr.Authorize(call("192.0.2.1:2", "right"), now.Add(time.Second))
	var be BackoffError
	if !errors.As(err, &be) || !errors.Is(err, ErrBackoff) || be.RetryAfter() <= 0 || be.RetryAfter() > time.Minute {
		t.Fatalf("the guesser with the right token: %v, want a BackoffError under a minute", err)
	}
	if err := tr.Authorize(call("192.0.2.2:1", "right"), now.Add(time.Second)); err != nil {
		t.Fatalf("another address: %v", err)
	}
	if err := tr.Authorize(call("192.0.2.7:3", "right"), now.Add(time.Second)); err != nil {
		t.Fatalf("the operator's address, once guessed from: %v", err)
	}
	if err := tr.Authorize(call("192.0.2.1:3", "right"), now.Add(2*time.Minute)); err != nil {
		t.Fatalf("the guesser's address after its minute: %v", err)
	}
}

func TestAuthorizeOpenWithoutToken(t *testing.T) {
	tr := loaded(t, Config{})
	for _, tok := range []string{"", "anything"} {
		if err := tr.Authorize(call("192.0.2.1:1", tok), time.Now()); err != nil {
			t.Errorf("token %q on a router without one: %v", tok, err)
		}
	}
}

// TestAuthorizeAdminNeedsClientCert: under --tls-client-auth admin a call
// without a verified client certificate is refused before its token is
// looked at, and counts no strike against its address.
func TestAuthorizeAdminNeedsClientCert(t *testing.T) {
	p := testkit.NewPKI(t, "ca")
	tr := loaded(t, Config{Token: "right", TLS: p.Issue("router"), ClientAuth: ClientAuthAdmin})
	now := time.Now()
	for range badtoken.Limit + 1 {
		if err := tr.Authorize(call("192.0.2.1:1", "wrong"), now); !errors.Is(err, ErrClientCert) {
			t.Fatalf("no client certificate: %v, want ErrClientCert", err)
		}
	}
	// A verified chain (what the listener's handshake leaves): the token
	// is looked at, and the address held off by none of the above.
	r := call("192.0.2.1:1", "right")
	r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{}}}}
	if err := tr.Authorize(r, now); err != nil {
		t.Fatalf("a client certificate and the right token: %v", err)
	}
	r.Header.Set("Authorization", "Bearer wrong")
	if err := tr.Authorize(r, now); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("a client certificate and a wrong token: %v", err)
	}
}
