package logx

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// TestOneKeyOnce: With and the call naming one key write it once, the
// call's value winning; slog's own keys are not shadowed.
func TestOneKeyOnce(t *testing.T) {
	var b bytes.Buffer
	log := Config{Format: FormatJSON, Level: slog.LevelInfo}.Logger(&b)
	log.With("router", "r1", "part", "router").Info("leasing", "router", "r1-7-abc", "msg", "inner", "n", 3)
	line := strings.TrimSpace(b.String())
	if n := strings.Count(line, `"router":`); n != 1 {
		t.Fatalf("router written %d times: %s", n, line)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatal(err)
	}
	if m["router"] != "r1-7-abc" || m["part"] != "router" || m["msg"] != "leasing" || m["msg_"] != "inner" || m["n"] != 3.0 {
		t.Fatalf("got %v", m)
	}
}

func TestTextAndLevel(t *testing.T) {
	var b bytes.Buffer
	log := Config{Format: FormatText, Level: slog.LevelWarn}.Logger(&b)
	log.Info("hidden")
	log.With("a", 1).With("a", 2).Warn("shown", "b", "x")
	if got := strings.TrimSpace(b.String()); strings.Contains(got, "hidden") || !strings.HasSuffix(got, "level=WARN msg=shown a=2 b=x") {
		t.Fatalf("got %q", got)
	}
}

func TestGroupsKeepTheirKeys(t *testing.T) {
	var b bytes.Buffer
	log := Config{Format: FormatJSON}.Logger(&b)
	log.With("k", 1).WithGroup("g").With("k", 2, "msg", "m").Info("x", "k", 3)
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	g, _ := m["g"].(map[string]any)
	if m["k"] != 1.0 || g["k"] != 3.0 || g["msg"] != "m" {
		t.Fatalf("got %s", b.String())
	}
}

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		format string
		level  slog.Level
		bad    bool
	}{
		{nil, FormatText, slog.LevelInfo, false},
		{[]string{"--log-format", "json", "--log-level", "debug"}, FormatJSON, slog.LevelDebug, false},
		{[]string{"--log-level", "WARN"}, FormatText, slog.LevelWarn, false},
		{[]string{"--log-format", "xml"}, "", 0, true},
		{[]string{"--log-level", "loud"}, "", 0, true},
	} {
		c := Default()
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.AddFlags(fs)
		err := fs.Parse(tc.args)
		if tc.bad {
			if err == nil {
				t.Errorf("%v: no error", tc.args)
			}
			continue
		}
		if err != nil || c.Format != tc.format || c.Level != tc.level {
			t.Errorf("%v: %+v %v", tc.args, c, err)
		}
	}
}
