// Package cluster runs real fenec processes for end-to-end tests: it builds
// fenec-node, fenec-shard and fenec once per test binary (Main, from
// TestMain), starts nodes behind cuttable TCP proxies and routers with
// embedded etcd members on 127.0.0.1, and stops every one of them, their
// ports and their temporary directories through t.Cleanup.
//
// A test controls a process with Kill (SIGKILL), Stop (SIGTERM, exit 0
// expected), Pause and Continue (SIGSTOP/SIGCONT) and Restart; a node's
// network with Cut and Heal of its proxy. Each process's output goes to a
// log file, printed when the test fails. Client speaks the data API and
// /_shard/; Eventually polls a condition instead of sleeping.
//
// It is for tests on one machine's loopback only: it is not a deployment
// tool, and it never reuses processes between tests.
package cluster
