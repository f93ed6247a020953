// Package h1 is the router's own HTTP/1.1 serving loop for its data path.
//
// Go's net/http server costs a forwarded request more than the forwarding
// does: after each request's body it starts a background read on the
// client's connection (to notice a hang-up), wakes it again when the
// handler returns, and allocates a request, a context and a writer. On
// the router's hot path — small requests below /t/ on kept connections —
// that is most of the router's time and system calls (bench/shard-profile.txt).
//
// A Server here reads each request head itself into a request and a
// writer reused for the connection's life, calls the handler on the
// connection's goroutine, and writes the answer with its head in one
// write. It watches for a hang-up only once a request has run for
// HangupAfter, so a quick request costs no second read.
//
// It takes only what it can frame strictly: a head of at most HeadBytes
// in CRLF lines, HTTP/1.1, an origin-form target with the Prefix, one
// Host, at most one Content-Length and no Transfer-Encoding, Expect or
// Upgrade. Anything else — a malformed request, a chunked body, an admin
// route — is not refused here: the connection, with every byte read and
// not yet used, is handed whole to the Fallback net/http server, which
// applies its own rules from then on. So the loop never accepts what
// net/http would refuse (FuzzHead holds it to that), and every odd case
// is answered by the server that always answered it.
//
// Over TLS the loop runs the handshake itself (under ReadHeaderTimeout)
// and gives each request the connection's state; a connection handed over
// carries that state to the fallback's handler too, which net/http alone
// would not (it sees a wrapper, not a *tls.Conn).
package h1
