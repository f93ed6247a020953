//go:build nemesis

package main

import (
	"os"

	"github.com/fenec-go/fenec/engine/store"
	"github.com/fenec-go/fenec/internal/nemesis"
	"github.com/fenec-go/fenec/lease"
)

// testHooks, in a binary built for the fault suite (tests/nemesis) only,
// runs the node's leases on a clock the suite moves and records each
// tenant file's synced length, when the environment names their files.
func testHooks(o *options) {
	if path := os.Getenv(nemesis.ClockEnv); path != "" {
		o.node.LeaseClock = nemesis.NewClock(lease.BootClock{}, path)
		o.node.Logger.Warn("nemesis build: the lease clock is moved by a file", "path", path)
	}
	if dir := os.Getenv(nemesis.SyncedEnv); dir != "" {
		store.SyncHook = nemesis.RecordSynced(dir)
		o.node.Logger.Warn("nemesis build: synced lengths recorded", "dir", dir)
	}
}
