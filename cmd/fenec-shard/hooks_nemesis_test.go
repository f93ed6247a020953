//go:build nemesis

package main

import (
	"log/slog"
	"testing"

	"github.com/fenec-go/fenec/internal/nemesis"
	"github.com/fenec-go/fenec/region"
)

// A fenec-shard built with the tag nemesis holds every move at the step
// its environment names, and refuses a step that is none.
func TestMovePauseInANemesisBuild(t *testing.T) {
	for _, tc := range []struct {
		step string
		ok   bool
	}{{"switching", true}, {"promoting", true}, {"no-such-step", false}} {
		t.Setenv(nemesis.MovePauseEnv, tc.step)
		o := options{router: region.DefaultConfig()}
		o.router.Logger = slog.New(slog.DiscardHandler)
		testHooks(&o)
		if o.router.TestMovePause != tc.step {
			t.Fatalf("%s=%s: pauses at %q", nemesis.MovePauseEnv, tc.step, o.router.TestMovePause)
		}
		if err := o.router.Validate(); (err == nil) != tc.ok {
			t.Fatalf("%s=%s: Validate %v", nemesis.MovePauseEnv, tc.step, err)
		}
	}
}
