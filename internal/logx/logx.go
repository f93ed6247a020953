// Package logx builds the logger fenec's servers write with: the format
// (--log-format json|text) and the least level written (--log-level), and
// a handler that never writes one key twice in a line.
//
// It is not a logging library: it only picks one of log/slog's handlers
// and puts the key check in front of it. The embedded etcd member's log is
// passed to the same handler by package global.
package logx

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Formats of Config.Format.
const (
	FormatText = "text" // key=value pairs, one line each (slog's text handler)
	FormatJSON = "json" // one JSON object a line (slog's JSON handler)
)

// ErrBadConfig is a format or a level logx does not know.
var ErrBadConfig = errors.New("bad log configuration")

// Config says how a server logs.
type Config struct {
	// Format is FormatText or FormatJSON. --log-format, default text.
	Format string
	// Level is the least level written: debug, info, warn or error.
	// --log-level, default info.
	Level slog.Level
}

// Default is text at info.
func Default() Config { return Config{Format: FormatText, Level: slog.LevelInfo} }

// AddFlags registers --log-format and --log-level with c's values as
// defaults.
func (c *Config) AddFlags(fs *flag.FlagSet) {
	fs.Func("log-format", "log lines as `FORMAT`: json or text (default "+c.formatOrText()+")", func(s string) error {
		switch s {
		case FormatText, FormatJSON:
			c.Format = s
			return nil
		}
		return fmt.Errorf("%w: log format %q: want json or text", ErrBadConfig, s)
	})
	fs.Func("log-level", "least `LEVEL` logged: debug, info, warn or error (default "+levelName(c.Level)+")", func(s string) error {
		l, err := ParseLevel(s)
		if err != nil {
			return err
		}
		c.Level = l
		return nil
	})
}

func (c *Config) formatOrText() string {
	if c.Format == "" {
		return FormatText
	}
	return c.Format
}

// ParseLevel reads debug, info, warn or error (any case).
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("%w: log level %q: want debug, info, warn or error", ErrBadConfig, s)
}

// levelName is the flag's spelling of l.
func levelName(l slog.Level) string { return strings.ToLower(l.String()) }

// Logger returns a logger writing to w as c says.
func (c Config) Logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.Level}
	var h slog.Handler
	if c.Format == FormatJSON {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(Unique(h))
}
