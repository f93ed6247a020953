package node

import (
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
)

func TestSubscription(t *testing.T) {
	n := startNode(t, func(c *Config) { c.KeepAlive = 20 * time.Millisecond })
	people(t, n)
	s := n.subscribe("/t/a/c/changes?n=gte.2")
	seed := s.mustNext(t, "seed")
	if seed["seq"] != json.Number("4") || len(seed["rows"].([]any)) != 2 {
		t.Fatalf("seed %v", seed)
	}
	n.q("a", `put c {name: "dee", n: 4}`)
	n.q("a", `put c {name: "tiny", n: 0}`) // does not match: no event
	n.q("a", `set c {n: 0} where name = "bob"`)
	n.q("a", `del c where name = "cy"`)
	ch := s.mustNext(t, "change")
	if ch["seq"] != json.Number("5") || len(ch["puts"].([]any)) != 1 || ch["puts"].([]any)[0].(map[string]any)["name"] != "dee" {
		t.Fatalf("change %v", ch)
	}
	// bob no longer matches: sent as a delete.
	ch = s.mustNext(t, "change")
	if ch["seq"] != json.Number("7") || len(ch["puts"].([]any)) != 0 || ch["dels"].([]any)[0] != json.Number("2") {
		t.Fatalf("change %v", ch)
	}
	ch = s.mustNext(t, "change")
	if ch["seq"] != json.Number("8") || ch["dels"].([]any)[0] != json.Number("3") {
		t.Fatalf("change %v", ch)
	}
	// Keepalive comments flow while nothing happens; the reader skips
	// them, so ask the raw stream for one.
	testkit.Eventually(t, 5*time.Second, func() bool {
		line, err := s.br.ReadString('\n')
		return err == nil && line == ": keepalive\n"
	}, "a keepalive comment")
	wantJSONError(t, n.do("GET", "/t/a/nothere/changes", ""), 404)
	wantJSONError(t, n.do("GET", "/t/a/c/changes?since=x", ""), 400)
	wantJSONError(t, n.do("GET", "/t/a/c/changes?n=bad.1", ""), 400)
}

func TestSubscriptionResumeAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, func(c *Config) { c.Dir = dir })
	people(t, n)
	s := n.subscribe("/t/a/c/changes")
	seed := s.mustNext(t, "seed")
	n.q("a", `put c {name: "dee", n: 4}`)
	ch := s.mustNext(t, "change")
	last := ch["seq"].(json.Number)
	if seed["seq"] != json.Number("4") || last != json.Number("5") {
		t.Fatalf("seed %v change %v", seed, ch)
	}
	// The node shuts down: the stream ends with an error event.
	if err := n.s.Close(); err != nil {
		t.Fatal(err)
	}
	s.mustNext(t, "error")
	if _, err := s.next(); !errors.Is(err, io.EOF) && err == nil {
		t.Fatal("stream still open after shutdown")
	}

	n2 := startNode(t, func(c *Config) { c.Dir = dir })
	n2.q("a", `put c {name: "eve", n: 5}`)
	s2 := n2.subscribe("/t/a/c/changes?since=" + string(last))
	ch = s2.mustNext(t, "change") // no reseed
	if ch["seq"] != json.Number("6") || ch["puts"].([]any)[0].(map[string]any)["name"] != "eve" {
		t.Fatalf("resumed with %v", ch)
	}
	// Last-Event-ID resumes the same way; an older cursor replays more.
	s3 := n2.subscribe("/t/a/c/changes", "Last-Event-ID", "4")
	if ch := s3.mustNext(t, "change"); ch["seq"] != json.Number("5") {
		t.Fatalf("resumed from 4 with %v", ch)
	}
}

func TestSubscriptionEndsWhenTenantDeleted(t *testing.T) {
	n := startNode(t, nil)
	people(t, n)
	s := n.subscribe("/t/a/c/changes")
	s.mustNext(t, "seed")
	if r := n.admin("DELETE", "tenants/a", ""); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	ev := s.mustNext(t, "error")
	if ev["error"] != ErrTenantGone.Error() {
		t.Fatalf("error event %v", ev)
	}
	wantJSONError(t, n.do("GET", "/t/a/c", ""), 404)
}

func TestMaxStreams(t *testing.T) {
	n := startNode(t, func(c *Config) { c.MaxStreams = 2 })
	people(t, n)
	for range 2 {
		n.subscribe("/t/a/c/changes").mustNext(t, "seed")
	}
	r := n.do("GET", "/t/a/c/changes", "")
	wantJSONError(t, r, 429)
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
}

func TestSubscriptionCatchesUpWhenBehind(t *testing.T) {
	n := startNode(t, nil)
	people(t, n)
	s := n.subscribe("/t/a/c/changes")
	s.mustNext(t, "seed")
	// More blocks than the subscriber's buffer, without reading.
	const writes = 400
	for i := range writes {
		n.q("a", "put c {name: $1, n: $2}", "x"+strconv.Itoa(i), i)
	}
	var seq json.Number
	for i := range writes {
		ch := s.mustNext(t, "change")
		seq = ch["seq"].(json.Number)
		if want := json.Number(strconv.Itoa(5 + i)); seq != want {
			t.Fatalf("change %d has seq %s, want %s", i, seq, want)
		}
	}
}

func TestSubscriptionReseedsWhenCursorGone(t *testing.T) {
	n := startNode(t, nil)
	people(t, n)
	n.q("a", `put c {name: "dee", n: 4}`)
	tn, err := n.s.reg.acquire(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := tn.db.Compact(); err != nil {
		t.Fatal(err)
	}
	n.s.reg.release(tn)
	s := n.subscribe("/t/a/c/changes?since=1")
	seed := s.mustNext(t, "seed")
	if seed["seq"] != json.Number("5") || len(seed["rows"].([]any)) != 4 {
		t.Fatalf("reseed %v", seed)
	}
	r := n.do("GET", "/t/a/_changes?since=1", "")
	m := wantJSONError(t, r, 410)
	if m["seq"] != json.Number("5") {
		t.Fatalf("feed past its records: %s", r.Body)
	}
}
