package main

import (
	"io"
	"log/slog"
	"os"
)

// quietLog discards logs unless FENEC_TEST_LOG is set.
func quietLog() *slog.Logger {
	if os.Getenv("FENEC_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
