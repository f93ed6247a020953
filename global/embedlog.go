package global

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// quietCore passes etcd's log entries at or above its level to stderr until
// the member is being closed, then drops them: etcd logs its own listeners
// closing as errors, which is noise once Close was asked for.
type quietCore struct {
	zapcore.Core
	closing *atomic.Bool
}

func (c quietCore) With(fields []zapcore.Field) zapcore.Core {
	return quietCore{Core: c.Core.With(fields), closing: c.closing}
}

func (c quietCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.closing.Load() || !c.Enabled(e.Level) {
		return ce
	}
	return ce.AddCore(e, c)
}

// newEtcdLogger returns etcd's logger at level (etcd's names: debug, info,
// warn, error), silenced once closing is set: into to when it is set, else
// JSON lines on stderr.
func newEtcdLogger(level string, closing *atomic.Bool, to *slog.Logger) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, err
	}
	var core zapcore.Core
	if to != nil {
		core = slogCore{h: to.Handler(), lvl: lvl}
	} else {
		enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
		core = zapcore.NewCore(enc, zapcore.Lock(os.Stderr), lvl)
	}
	return zap.New(quietCore{Core: core, closing: closing}), nil
}

// slogCore writes etcd's zap entries through a slog handler, so the
// member's lines share the server's format. Fields added with With and
// those of the entry are written once each, the entry's winning; keys
// slog writes itself are prefixed "etcd_".
type slogCore struct {
	h      slog.Handler
	lvl    zapcore.LevelEnabler
	fields []zapcore.Field
}

func (c slogCore) Enabled(l zapcore.Level) bool { return c.lvl.Enabled(l) }

func (c slogCore) With(fields []zapcore.Field) zapcore.Core {
	return slogCore{h: c.h, lvl: c.lvl, fields: slices.Concat(c.fields, fields)}
}

func (c slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	level := slogLevel(e.Level)
	if !c.h.Enabled(context.Background(), level) {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range slices.Concat(c.fields, fields) {
		f.AddTo(enc) // a later field of one key replaces an earlier one
	}
	keys := make([]string, 0, len(enc.Fields))
	for k := range enc.Fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	r := slog.NewRecord(e.Time, level, e.Message, 0)
	if e.LoggerName != "" {
		r.AddAttrs(slog.String("etcd_logger", e.LoggerName))
	}
	for _, k := range keys {
		name := k
		switch k {
		case slog.TimeKey, slog.LevelKey, slog.MessageKey, slog.SourceKey, "etcd_logger":
			name = "etcd_" + k
		}
		r.AddAttrs(slog.Any(name, enc.Fields[k]))
	}
	return c.h.Handle(context.Background(), r)
}

func (c slogCore) Sync() error { return nil }

// slogLevel maps zap's levels onto slog's.
func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}
