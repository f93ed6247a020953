// Package trust is what a router (fenec-shard) holds to be trusted and to
// trust: its certificate and CA bundle (serving, calling nodes, reaching
// etcd), read again on SIGHUP and whenever the files change; the
// directory's key and password, every router of a deployment's alike
// (read, made where a router founds a directory alone, the directory
// closed with them, its sealed node records checked, the clear ones
// sealed as the router takes the lead); the router token and the
// bad-token back-off of the router's own surface; and the checks that
// refuse a configuration exposing any of it off loopback.
//
// It reaches the router only through Config, built from the router's own
// configuration (package region's Config holds the fields and flags),
// and Deps: a logger, a way to run a job on a goroutine the router owns,
// the lead's fenced store and the wait until the router's view holds a
// revision. It starts no goroutine of its own; ReloadLoop runs on the
// router's. Its sentinels are errors.go's; the router answers them by its
// one table from error to status, under the same values.
//
// It is not the HTTP answer of a refusal (the router writes it, counts it
// and audits it), nor the sealing itself (package global's Sealing and
// Keyring), nor the loading and reloading of TLS files (internal/tlsx),
// nor the nodes' own tokens and back-off (package node, internal/badtoken).
//
// # Where each thing lives
//
//   - config.go: Config, CheckTLS, CheckExposure, CheckNodeAddr, where the
//     secrets' files are and whether the router may make them.
//   - trust.go: Deps, Trust — Load, Named, Listen, Client, Secure,
//     EtcdOptions, Seal, Reload, ReloadLoop.
//   - secrets.go: the key and the password — loading, making,
//     CloseDirectory, CheckDirectory, ProbeGlobal, SealClearNodes.
//   - auth.go: Authorize, the router token and its back-off.
//   - errors.go: the sentinels, BackoffError, RetrySeconds.
package trust
