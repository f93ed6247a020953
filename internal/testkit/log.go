package testkit

import (
	"io"
	"log/slog"
	"os"
)

// Logger is what a test gives the components it starts to log to:
// discarded, or stderr when FENEC_TEST_LOG is set.
func Logger() *slog.Logger {
	if os.Getenv("FENEC_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
