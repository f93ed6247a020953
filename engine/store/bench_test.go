package store

import (
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"
)

var benchModes = []struct {
	name string
	mode SyncMode
}{{"always", SyncAlways}, {"every", SyncEvery}, {"off", SyncOff}}

// BenchmarkAppend appends 256-byte blocks from one writer (SyncEvery at
// its default tick, 100 ms).
func BenchmarkAppend(b *testing.B) {
	for _, m := range benchModes {
		b.Run(m.name, func(b *testing.B) {
			l, err := Create(filepath.Join(b.TempDir(), "b.fenec"), Options{Sync: m.mode, Logger: quietLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			body := make([]byte, 256)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.Append(KindEngine, 1, body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppendConcurrent has many writers append and wait for the disk
// as the engine does (append under its lock, wait outside it), so under
// SyncAlways they share fsyncs (SyncEvery ticks every 5 ms here, and each
// writer waits for a tick). syncs/op says how many fsyncs a write took.
func BenchmarkAppendConcurrent(b *testing.B) {
	for _, m := range benchModes {
		b.Run(m.name, func(b *testing.B) {
			l, err := Create(filepath.Join(b.TempDir(), "b.fenec"),
				Options{Sync: m.mode, SyncEvery: 5 * time.Millisecond, Logger: quietLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			body := make([]byte, 256)
			b.SetBytes(int64(len(body)))
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					rec, err := l.AppendNoSync(KindEngine, 1, body)
					if err == nil {
						err = l.WaitDurable(context.Background(), rec.Last)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			l.mu.Lock()
			b.ReportMetric(float64(l.syncRounds)/float64(b.N), "syncs/op")
			l.mu.Unlock()
		})
	}
}

// BenchmarkCheckpoint writes a 64 MiB state through Checkpoint; B/op shows
// the state is streamed into frames, not held whole.
func BenchmarkCheckpoint(b *testing.B) {
	l, err := Create(filepath.Join(b.TempDir(), "b.fenec"), Options{Sync: SyncOff, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	const stateSize = 64 << 20
	chunk := make([]byte, 64<<10)
	write := func(w io.Writer) error {
		for n := 0; n < stateSize; n += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return err
			}
		}
		return nil
	}
	b.SetBytes(stateSize)
	b.ReportAllocs()
	for b.Loop() {
		if err := l.Checkpoint(write); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpenImage replays a file holding a 64 MiB image; B/op shows
// the image is read from the mapped file, not copied.
func BenchmarkOpenImage(b *testing.B) {
	path := filepath.Join(b.TempDir(), "b.fenec")
	l, err := Create(path, Options{Sync: SyncOff, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	const stateSize = 64 << 20
	chunk := make([]byte, 64<<10)
	err = l.Compact(func(w io.Writer) error {
		for n := 0; n < stateSize; n += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	l.Close()
	buf := make([]byte, 64<<10)
	h := ReplayFuncs{OnImage: func(_ uint64, r io.Reader) error {
		_, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{r}, buf)
		return err
	}}
	b.SetBytes(stateSize)
	b.ReportAllocs()
	for b.Loop() {
		l, err := Open(path, Options{Sync: SyncOff, Logger: quietLogger()}, h)
		if err != nil {
			b.Fatal(err)
		}
		l.Close()
	}
}

// benchRecords makes a file of count 200-byte blocks.
func benchRecords(b *testing.B, count int) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "b.fenec")
	l, err := Create(path, Options{Sync: SyncOff, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 200)
	for range count {
		if _, err := l.Append(KindEngine, 1, body); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkOpenRecords replays a file of 100 000 blocks.
func BenchmarkOpenRecords(b *testing.B) {
	path := benchRecords(b, 100_000)
	h := ReplayFuncs{OnRecord: func(Record) error { return nil }}
	b.ReportAllocs()
	for b.Loop() {
		l, err := Open(path, Options{Sync: SyncOff, Logger: quietLogger()}, h)
		if err != nil {
			b.Fatal(err)
		}
		l.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100_000, "ns/record")
}

// BenchmarkReadFrom reads 100 000 blocks as a replica's feed does.
func BenchmarkReadFrom(b *testing.B) {
	path := benchRecords(b, 100_000)
	l, err := Open(path, Options{Sync: SyncOff, Logger: quietLogger()}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		if err := l.ReadFrom(0, func(Record) error { n++; return nil }); err != nil || n != 100_001 {
			b.Fatalf("read %d records: %v", n, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100_000, "ns/record")
}
