package wire_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain is the package's: every test ends with no goroutine left over.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
