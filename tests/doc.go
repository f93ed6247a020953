// Package tests holds fenec's end-to-end tests: real fenec-node and
// fenec-shard processes started by tests/cluster on loopback, driven
// through the router the way a client and an operator would.
//
// It holds no library code; the harness is tests/cluster and the cuttable
// proxy tests/proxy.
package tests
