package store

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
)

// collected is a Replayer that keeps what it is given.
type collected struct {
	hadImage bool
	imageSeq uint64
	image    []byte
	recs     []Record
	borrowed int // records given Borrowed
}

func (c *collected) Image(seq uint64, r io.Reader) error {
	if c.hadImage || len(c.recs) > 0 {
		return fmt.Errorf("image given after something else")
	}
	b, err := io.ReadAll(r)
	c.hadImage, c.imageSeq, c.image = true, seq, b
	return err
}

func (c *collected) Record(rec Record) error {
	if rec.Borrowed {
		// Replay lends the mapped file: keep a copy, as the engine does.
		rec.Body, rec.Borrowed = bytes.Clone(rec.Body), false
		c.borrowed++
	}
	c.recs = append(c.recs, rec)
	return nil
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func testOptions() Options {
	return Options{Sync: SyncOff, Logger: quietLogger()}
}

func tenantPath(t testing.TB) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "t.fenec")
}

// mustCreate creates a Log closed at the end of the test.
func mustCreate(t testing.TB, path string, opts Options) *Log {
	t.Helper()
	l, err := Create(path, opts)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// mustOpen opens a Log closed at the end of the test and returns what
// it replayed.
func mustOpen(t testing.TB, path string, opts Options) (*Log, *collected) {
	t.Helper()
	c := &collected{}
	l, err := Open(path, opts, c)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l, c
}

func mustClose(t testing.TB, l *Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// body is a recognisable block body for seq range [first, last].
func body(first, last uint64, size int) []byte {
	b := []byte(fmt.Sprintf("block %d-%d|", first, last))
	for len(b) < size {
		b = append(b, byte('a'+len(b)%26))
	}
	return b
}

// appendN appends count blocks of n writes each and returns them.
func appendN(t testing.TB, l *Log, count int, n uint64, size int) []Record {
	t.Helper()
	var out []Record
	for range count {
		seq := l.Seq()
		rec, err := l.Append(KindEngine, n, body(seq+1, seq+n, size))
		if err != nil {
			t.Fatalf("append: %v", err)
		}
		out = append(out, rec)
	}
	return out
}

// sameRecords checks got holds the kinds, seqs and bodies of want.
func sameRecords(t testing.TB, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Kind != w.Kind || g.First != w.First || g.Last != w.Last || !bytes.Equal(g.Body, w.Body) {
			t.Fatalf("record %d: got %v %d-%d %q, want %v %d-%d %q", i,
				g.Kind, g.First, g.Last, g.Body, w.Kind, w.First, w.Last, w.Body)
		}
	}
}

// stateWriter returns a WriteStateFunc writing state in pieces.
func stateWriter(state []byte) WriteStateFunc {
	return func(w io.Writer) error {
		for len(state) > 0 {
			k := min(len(state), 1000)
			if _, err := w.Write(state[:k]); err != nil {
				return err
			}
			state = state[k:]
		}
		return nil
	}
}

// countingHandler is a slog handler counting records by message.
type countingHandler struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *countingHandler) WithGroup(string) slog.Handler            { return h }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == nil {
		h.n = map[string]int{}
	}
	h.n[r.Message]++
	return nil
}

func (h *countingHandler) count(msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[msg]
}
