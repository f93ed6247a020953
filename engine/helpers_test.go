package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a settable clock for now(), @ttl and the sweeper.
type fakeClock struct{ ms atomic.Int64 }

func newFakeClock(ms int64) *fakeClock {
	c := &fakeClock{}
	c.ms.Store(ms)
	return c
}

func (c *fakeClock) Now() time.Time { return time.UnixMilli(c.ms.Load()) }
func (c *fakeClock) Add(ms int64)   { c.ms.Add(ms) }
func discardLogger() *slog.Logger   { return slog.New(slog.DiscardHandler) }

func newTestDB(tb testing.TB, opts Options) (*DB, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "t.fenec")
	if opts.Logger == nil {
		opts.Logger = discardLogger()
	}
	db, err := Create(path, opts)
	if err != nil {
		tb.Fatalf("create: %v", err)
	}
	tb.Cleanup(func() { db.Close() })
	return db, path
}

// mustExec runs a statement and returns its JSON answer.
func mustExec(tb testing.TB, db *DB, q string, params ...any) string {
	tb.Helper()
	res, _, err := db.Exec(context.Background(), Statement{Query: q, Params: params})
	if err != nil {
		tb.Fatalf("%s: %v", q, err)
	}
	return string(res.JSON())
}

func execErr(tb testing.TB, db *DB, q string, params ...any) error {
	tb.Helper()
	_, _, err := db.Exec(context.Background(), Statement{Query: q, Params: params})
	return err
}

// jsonEq compares two JSON texts by value.
func jsonEq(tb testing.TB, got, want string) bool {
	tb.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		tb.Fatalf("got is not JSON: %v: %s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		tb.Fatalf("want is not JSON: %v: %s", err, want)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	return string(gb) == string(wb)
}

// newReplica installs an image of prim as a new file and opens it, closed
// at the end of the test: a replica about to follow prim's records.
func newReplica(tb testing.TB, prim *DB) *DB {
	tb.Helper()
	var img bytes.Buffer
	if _, err := prim.WriteImage(&img); err != nil {
		tb.Fatalf("image: %v", err)
	}
	rpath := filepath.Join(tb.TempDir(), "replica.fenec")
	if err := Install(rpath, &img); err != nil {
		tb.Fatalf("install: %v", err)
	}
	rep, err := Open(rpath, Options{NoSweep: true, Logger: discardLogger()})
	if err != nil {
		tb.Fatalf("open replica: %v", err)
	}
	tb.Cleanup(func() { rep.Close() })
	return rep
}

// mustSnapshot is db.snapshotLocked(release), which must not fail.
func mustSnapshot(tb testing.TB, db *DB, release func()) *snapshot {
	tb.Helper()
	s, err := db.snapshotLocked(release)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}
