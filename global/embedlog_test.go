package global

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"
)

// TestEtcdLogThroughSlog: etcd's lines written through the server's
// handler, each key once, nothing under slog's own keys, and nothing once
// the member is closing.
func TestEtcdLogThroughSlog(t *testing.T) {
	var b bytes.Buffer
	closing := new(atomic.Bool)
	to := slog.New(slog.NewJSONHandler(&b, nil)).With("router", "r1")
	lg, err := newEtcdLogger("warn", closing, to)
	if err != nil {
		t.Fatal(err)
	}
	lg.Info("below the level")
	lg.Named("raft").With(zap.String("member", "a"), zap.Int("n", 1)).Warn("slow apply",
		zap.Int("n", 2), zap.String("msg", "inner"), zap.String("level", "x"))
	closing.Store(true)
	lg.Error("while closing")

	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("want one line, got %q", b.String())
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"level": "WARN", "msg": "slow apply", "router": "r1", "member": "a", "n": 2.0,
		"etcd_msg": "inner", "etcd_level": "x", "etcd_logger": "raft"}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v (%s)", k, m[k], v, lines[0])
		}
	}
	if strings.Count(lines[0], `"n":`) != 1 {
		t.Fatalf("a key twice: %s", lines[0])
	}
}
