//go:build !nemesis

package main

import (
	"log/slog"
	"testing"

	"github.com/fenec-go/fenec/internal/nemesis"
	"github.com/fenec-go/fenec/region"
)

// A fenec-shard built without the tag nemesis holds no move for a test,
// whatever its environment says: the variable is not read at all.
func TestNoMovePauseInAPlainBuild(t *testing.T) {
	for _, step := range []string{"switching", "promoting", "no-such-step"} {
		t.Setenv(nemesis.MovePauseEnv, step)
		o := options{router: region.DefaultConfig()}
		o.router.Logger = slog.New(slog.DiscardHandler)
		testHooks(&o)
		if o.router.TestMovePause != "" {
			t.Fatalf("%s=%s: a plain build pauses moves at %q", nemesis.MovePauseEnv, step, o.router.TestMovePause)
		}
		if err := o.router.Validate(); err != nil {
			t.Fatalf("%s=%s refused by a plain build: %v", nemesis.MovePauseEnv, step, err)
		}
	}
}
