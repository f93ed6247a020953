//go:build nemesis

package main

import (
	"os"

	"github.com/fenec-go/fenec/internal/nemesis"
)

// testHooks, in a binary built for the tests that kill a router mid-move
// only, holds every move at the step the environment names
// (nemesis.MovePauseEnv; region.Config.TestMovePause).
func testHooks(o *options) {
	if step := os.Getenv(nemesis.MovePauseEnv); step != "" {
		o.router.TestMovePause = step
		o.router.Logger.Warn("nemesis build: every move pauses for a test", "step", step, "env", nemesis.MovePauseEnv)
	}
}
