package nemesis

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// manual is a base clock moved by hand.
type manual struct {
	mu  sync.Mutex
	now time.Duration
}

func (m *manual) Now() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

func (m *manual) add(d time.Duration) {
	m.mu.Lock()
	m.now += d
	m.mu.Unlock()
}

func TestClockJumpsSlewsNeverGoesBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clock")
	base := &manual{now: time.Hour}
	c := NewClock(base, path)
	if got := c.Now(); got != time.Hour {
		t.Fatalf("no file: %v, want the base's %v", got, time.Hour)
	}
	step := func(d time.Duration, s *Setting, want time.Duration) {
		t.Helper()
		if s != nil {
			if err := WriteClock(path, *s); err != nil {
				t.Fatal(err)
			}
		}
		base.add(d)
		if got := c.Now(); got != want {
			t.Fatalf("after %v: %v, want %v", d, got, want)
		}
	}
	h := time.Hour
	step(time.Second, &Setting{Version: 1, Jump: 500 * time.Millisecond}, h+1500*time.Millisecond)
	step(time.Second, nil, h+2500*time.Millisecond)
	// A slew of +10% from here: 100 ms gained a second.
	step(time.Second, &Setting{Version: 2, SlewPPM: 100_000}, h+3500*time.Millisecond)
	step(time.Second, nil, h+4600*time.Millisecond)
	// A jump back of 300 ms under -50%: the clock stands still, never goes back.
	step(10*time.Millisecond, &Setting{Version: 3, Jump: -300 * time.Millisecond, SlewPPM: -500_000}, h+4600*time.Millisecond)
	// It read 4.311 s then, at half speed: 4.811 s a second later.
	step(time.Second, nil, h+4811*time.Millisecond)
	// The same version again changes nothing.
	step(time.Second, &Setting{Version: 3, Jump: time.Hour}, h+5311*time.Millisecond)
}

func TestClockFileRefusesGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clock")
	for _, bad := range []string{"", "1 2", "1 x 3", "1 2 3 4"} {
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadClock(path); err == nil {
			t.Errorf("%q read as a setting", bad)
		}
	}
}

func TestLoseUnsynced(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "synced")
	if err := os.Mkdir(rec, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "a.fenec")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := LoseUnsynced(rec, path, nil); !errors.Is(err, ErrNeverSynced) {
		t.Fatalf("a file never synced: %v, want ErrNeverSynced", err)
	}
	hook := RecordSynced(rec)
	f.Write([]byte("0123456789"))
	hook(f, 10)
	f.Write([]byte("abcdef"))
	// Renamed into place, the file keeps its record.
	moved := filepath.Join(dir, "b.fenec")
	if err := os.Rename(path, moved); err != nil {
		t.Fatal(err)
	}
	cut, err := LoseUnsynced(rec, moved, []byte("zz"))
	if err != nil || cut != 6 {
		t.Fatalf("cut %d, %v; want 6", cut, err)
	}
	if b, _ := os.ReadFile(moved); string(b) != "0123456789zz" {
		t.Fatalf("after the loss: %q", b)
	}
	// A record past the file's end (cut since) cuts nothing more.
	hook(f, 100)
	if cut, err := LoseUnsynced(rec, moved, nil); err != nil || cut != 0 {
		t.Fatalf("cut %d, %v; want 0", cut, err)
	}
}
