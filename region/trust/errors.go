package trust

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors of the trust. The router (package region) answers them
// by its one table from error to status, under the same values.
var (
	// ErrUnauthorized: the router token is missing or wrong (401).
	ErrUnauthorized = errors.New("missing or wrong router token: send Authorization: Bearer <the token fenec-shard --token-file reads>")
	// ErrBackoff: too many missing or wrong router tokens from this
	// client's address (429; BackoffError says for how long).
	ErrBackoff = errors.New("too many missing or wrong router tokens from this address")
	// ErrClientCert: under --tls-client-auth admin, a /_shard/ or
	// /_metrics call without a client certificate the router trusts (403).
	ErrClientCert = errors.New("this router takes /_shard/ and /_metrics calls only with a client certificate its --tls-ca verifies: call it with one")
	// ErrInsecure: a non-loopback listener or etcd URL with no token, no
	// TLS or no client certificates, and no --insecure.
	ErrInsecure = errors.New("not a loopback address, and not protected (or start with --insecure)")
	// ErrSecrets: the router lacks the directory's key or password, which
	// every router of a deployment holds alike.
	ErrSecrets = errors.New("this router does not hold the directory's secrets")
)

// BackoffError is ErrBackoff with the time left before the address is
// heard again.
type BackoffError struct{ Left time.Duration }

func (e BackoffError) Error() string {
	return fmt.Sprintf("%s: wait %d s (Retry-After), then send the token fenec-shard --token-file reads", ErrBackoff, RetrySeconds(e.Left))
}

// Unwrap makes errors.Is find ErrBackoff.
func (e BackoffError) Unwrap() error { return ErrBackoff }

// RetryAfter is the time left, for the answer's Retry-After.
func (e BackoffError) RetryAfter() time.Duration { return e.Left }

// RetrySeconds is d in whole seconds, rounded up, at least 1: a
// Retry-After's value.
func RetrySeconds(d time.Duration) int {
	return max(1, int((d+time.Second-1)/time.Second))
}
