package store

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(m.Run()) // a helper child: it exits on its own
	}
	goleak.VerifyTestMain(m)
}
