package global

import (
	"os"
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

// newEtcdLogger returns a JSON logger to stderr at level (etcd's names:
// debug, info, warn, error), silenced once closing is set.
func newEtcdLogger(level string, closing *atomic.Bool) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, err
	}
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	core := zapcore.NewCore(enc, zapcore.Lock(os.Stderr), lvl)
	return zap.New(quietCore{Core: core, closing: closing}), nil
}
