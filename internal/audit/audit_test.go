package audit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a settable time for a Log's Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// open opens a log in a temp dir whose windows end only by Flush.
func open(t *testing.T, o Options) (*Log, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	if o.Window == 0 {
		o.Window = time.Hour
	}
	l, err := Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, path
}

// lines reads the log's lines, each checked to be one JSON object within
// MaxLine.
func lines(t *testing.T, path string) []Entry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Entry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if n := len(sc.Bytes()) + 1; n > MaxLine {
			t.Fatalf("a line of %d bytes, past MaxLine %d: %.200s", n, MaxLine, sc.Bytes())
		}
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestNilLogRecordsNothing(t *testing.T) {
	l, err := Open("", Options{})
	if l != nil || err != nil {
		t.Fatalf("Open(\"\") = %v, %v", l, err)
	}
	if err := l.Record(Entry{What: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Refused("a", Entry{What: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestOpenRefusesADirectory(t *testing.T) {
	if _, err := Open(t.TempDir(), Options{}); err == nil {
		t.Fatal("a directory opened as an audit log")
	}
}

// A flood of refusals from one client, of two kinds, is two lines
// written at once and two counting the rest at the window's end, whatever
// the flood's size; the changes among them are each written whole.
func TestRefusalsCountedPerClientAndWindow(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	l, path := open(t, Options{Now: c.now})
	path120k := "/_shard/" + strings.Repeat("x", 120<<10)
	for i := range 20000 {
		status := 401
		if i%2 == 1 {
			status = 429
		}
		if err := l.Refused("10.0.0.1", Entry{Who: "10.0.0.1:5555", What: "auth", Path: path120k, Status: status}); err != nil {
			t.Fatal(err)
		}
		if i%5000 == 0 {
			if err := l.Record(Entry{Who: "10.0.0.2:1", What: "place", Tenant: fmt.Sprint("t", i), Status: 201, Outcome: "ok"}); err != nil {
				t.Fatal(err)
			}
		}
		c.add(time.Millisecond)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > 6*MaxLine {
		t.Fatalf("20 000 refusals of 120 KiB paths wrote %d bytes before the window ended", st.Size())
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	got := lines(t, path)
	var changes, firsts int
	counted := map[int]int{}
	for _, e := range got {
		switch {
		case e.What == "place":
			changes++
		case e.Repeated > 0:
			counted[e.Status] += e.Repeated
			if e.Since == nil || e.Who != "10.0.0.1" || e.Path != "" {
				t.Fatalf("a count's line: %+v", e)
			}
		default:
			firsts++
			if len(e.Path) > MaxField+32 || !strings.Contains(e.Path, "bytes cut]") {
				t.Fatalf("a refusal's path written %d bytes long: %.80s", len(e.Path), e.Path)
			}
		}
	}
	if changes != 4 || firsts != 2 || counted[401] != 9999 || counted[429] != 9999 {
		t.Fatalf("changes %d, refusals written whole %d, counted %v; want 4, 2, 9999 each", changes, firsts, counted)
	}
	// The next window starts again: its first refusal is written whole.
	if err := l.Refused("10.0.0.1", Entry{Who: "10.0.0.1:1", What: "auth", Status: 401}); err != nil {
		t.Fatal(err)
	}
	if n := len(lines(t, path)); n != len(got)+1 {
		t.Fatalf("the next window's first refusal: %d lines, want %d", n, len(got)+1)
	}
}

// Refusals from more clients than a window counts are counted as one
// line past the bound, so many addresses cost no more than MaxClients.
func TestManyClientsBounded(t *testing.T) {
	l, path := open(t, Options{MaxClients: 10})
	for i := range 5000 {
		who := fmt.Sprintf("10.0.%d.%d", i/256, i%256)
		if err := l.Refused(who, Entry{Who: who, What: "refused", Status: 401}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got := lines(t, path)
	if len(got) != 11 {
		t.Fatalf("%d lines for 5000 clients past a bound of 10; want 11", len(got))
	}
	last := got[10]
	if last.Who != othersWho || last.Repeated != 4990 {
		t.Fatalf("the others' line: %+v", last)
	}
}

// Every field at its worst — long, full of quotes, backslashes, control
// characters, bytes that are not UTF-8 — still makes one line within
// MaxLine, and a short clean field is written as it is.
func TestLineBounded(t *testing.T) {
	l, path := open(t, Options{})
	nasty := strings.Repeat("\"\\\x00\x1f\xff<>&\u2028", 20000)
	e := Entry{Router: nasty, Who: nasty, Via: nasty, What: nasty, Path: nasty, Tenant: nasty, Node: nasty,
		RequestID: nasty, Outcome: nasty, Detail: nasty, Status: 400}
	if err := l.Record(e); err != nil {
		t.Fatal(err)
	}
	if err := l.Record(Entry{Who: "10.0.0.1:5", What: "promote", Tenant: "acme", Detail: "forced <a&b>", Status: 200}); err != nil {
		t.Fatal(err)
	}
	got := lines(t, path)
	if len(got) != 2 {
		t.Fatalf("%d lines", len(got))
	}
	for _, s := range []string{got[0].Who, got[0].Outcome} {
		if strings.ContainsAny(s, "\x00\x1f\xff") || !strings.Contains(s, "bytes cut]") {
			t.Fatalf("a hostile field written as %q", s)
		}
	}
	if got[1].Detail != "forced <a&b>" || got[1].Tenant != "acme" {
		t.Fatalf("a clean line: %+v", got[1])
	}
}

// The window ends on its own: counts are written without a Flush, and
// Close writes what the last window held.
func TestWindowEndsOnItsOwn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := Open(path, Options{Window: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for range 3 {
		l.Refused("a", Entry{Who: "a", What: "auth", Status: 401})
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := lines(t, path)
		if len(got) == 2 && got[1].Repeated == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the window's count never written: %+v", got)
		}
		time.Sleep(5 * time.Millisecond)
	}
	l.Refused("b", Entry{Who: "b", What: "auth", Status: 401})
	l.Refused("b", Entry{Who: "b", What: "auth", Status: 401})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close twice: %v", err)
	}
	if err := l.Record(Entry{What: "late"}); err != nil {
		t.Fatal(err)
	}
	got := lines(t, path)
	if last := got[len(got)-1]; last.Who != "b" || last.Repeated != 1 {
		t.Fatalf("Close did not write the last window's count: %+v", got)
	}
}

func TestClip(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"abc", 5, "abc"},
		{"abcdef", 3, "abc…[3 bytes cut]"},
		{"a\x00b", 5, "a?b"},
		{"é", 1, "…[2 bytes cut]"},
		{"a\xffb", 5, "a?b"},
	} {
		if got := clip(c.in, c.max); got != c.want {
			t.Errorf("clip(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}
