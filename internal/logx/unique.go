package logx

import (
	"context"
	"log/slog"
	"slices"
)

// reserved are the keys slog's handlers write themselves; an attribute
// under one of them is renamed, not written beside it.
var reserved = []string{slog.TimeKey, slog.LevelKey, slog.MessageKey, slog.SourceKey}

// Unique wraps h so that a line never carries one key twice: of the
// attributes added with With and those of the call, the last under a key
// wins, and an attribute named like one of slog's own keys (time, level,
// msg, source) is written with an underscore after it. Attributes inside a
// group are checked within their group.
func Unique(h slog.Handler) slog.Handler { return &unique{h: h} }

type unique struct {
	h     slog.Handler // the handler, holding every attribute above the open group
	attrs []slog.Attr  // added with With since then, kept to be checked at each line
	group bool         // a group is open: keys are the group's, not slog's own
}

func (u *unique) Enabled(ctx context.Context, l slog.Level) bool { return u.h.Enabled(ctx, l) }

func (u *unique) WithAttrs(as []slog.Attr) slog.Handler {
	return &unique{h: u.h, attrs: merge(u.attrs, as, u.group), group: u.group}
}

func (u *unique) WithGroup(name string) slog.Handler {
	if name == "" {
		return u
	}
	return &unique{h: u.h.WithAttrs(u.attrs).WithGroup(name), group: true}
}

func (u *unique) Handle(ctx context.Context, r slog.Record) error {
	as := make([]slog.Attr, 0, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool { as = append(as, a); return true })
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	out.AddAttrs(merge(u.attrs, as, u.group)...)
	return u.h.Handle(ctx, out)
}

// merge is base then more, each key once (the last one's value, at the
// first one's place); empty keys of inlined groups are kept as they are.
func merge(base, more []slog.Attr, inGroup bool) []slog.Attr {
	out := make([]slog.Attr, 0, len(base)+len(more))
	at := make(map[string]int, len(base)+len(more))
	for _, a := range slices.Concat(base, more) {
		if a.Key == "" {
			out = append(out, a)
			continue
		}
		if !inGroup && slices.Contains(reserved, a.Key) {
			a.Key += "_"
		}
		if i, ok := at[a.Key]; ok {
			out[i] = a
			continue
		}
		at[a.Key] = len(out)
		out = append(out, a)
	}
	return out
}
