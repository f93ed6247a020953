package engine

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine running (a
// sweeper or a store's sync loop not stopped by Close).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
