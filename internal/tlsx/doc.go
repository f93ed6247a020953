// Package tlsx is how fenec's processes speak TLS: the certificate, key
// and CA bundle a process is started with (Files), held in a Source that
// reloads them on Reload (SIGHUP) or when the files change, and the
// tls.Configs built over it for a listener (Server) and for each
// connection out to a peer (Client, Dial). It also issues the
// certificates of a test or compose cluster (Issue: fenec certs).
//
// Every config is built from crypto/tls alone: TLS 1.3 by default, 1.2
// allowed with ECDHE and AEAD suites only (Suites), nothing older; HTTP/1.1 only (ALPN "http/1.1"), since the
// router's forwarding is HTTP/1.1 byte for byte. A listener hands each
// handshake the certificate and CA bundle current at that moment, so a
// rotation needs no restart and breaks no connection already open;
// session tickets outlive a reload (their keys are the listener's, not
// the certificate's). A client verifies its peer's chain against the CA
// bundle current when it dials and the peer's name against the host it
// dialled, and keeps session tickets per address, so a fresh connection
// to a peer it has met resumes instead of paying a full handshake; a
// resumed session is checked against the current bundle again, so a CA
// taken out of the bundle stops resumptions too.
//
// It is not a certificate authority for production: Issue makes a small
// CA and its leaves for tests and compose clusters. Nor does it reach
// etcd's own listeners, which etcd configures from the same files
// (package global).
package tlsx
