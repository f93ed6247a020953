package lease

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestGrantJSON(t *testing.T) {
	g := Grant{Term: 2, Router: "r", N: 5, Ack: 4, MS: 3000, List: ListID(nil)}
	b, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"term", "router", "n", "ack", "ms", "tenants", "list"} {
		if _, ok := m[k]; !ok {
			t.Errorf("grant JSON %s lacks %q", b, k)
		}
	}
	var back Grant
	if err := json.Unmarshal(b, &back); err != nil || back.Tenants != nil {
		t.Fatalf("unchanged list came back as %#v (%v), want nil", back.Tenants, err)
	}
	g.Tenants = []string{}
	b, _ = json.Marshal(g)
	if err := json.Unmarshal(b, &back); err != nil || back.Tenants == nil {
		t.Fatalf("empty list came back as %#v (%v), want an empty list", back.Tenants, err)
	}

	b, _ = json.Marshal(Answer{Took: true, Ran: true, N: 5, Term: 2, LeftMS: 10})
	if string(b) != `{"took":true,"ran":true,"n":5,"term":2,"left_ms":10}` {
		t.Fatalf("answer JSON %s", b)
	}
}

func TestListID(t *testing.T) {
	if ListID([]string{"b", "a", "a"}) != ListID([]string{"a", "b"}) {
		t.Error("same tenants, different ids")
	}
	if ListID([]string{"a"}) == ListID([]string{"a", "b"}) || ListID(nil) == ListID([]string{""}) {
		t.Error("different tenants, same id")
	}
}

// TestReplyRoundTrip maps each refusal to its status and back, as the node
// and the router's transport do.
func TestReplyRoundTrip(t *testing.T) {
	tests := []struct {
		err    error
		status int
		check  func(error) bool
	}{
		{&TermError{Highest: 7}, http.StatusConflict, func(err error) bool {
			var te *TermError
			return errors.As(err, &te) && te.Highest == 7
		}},
		{ErrTakesNoLease, http.StatusConflict, func(err error) bool { return errors.Is(err, ErrTakesNoLease) }},
		{ErrNeedsList, http.StatusPreconditionFailed, func(err error) bool { return errors.Is(err, ErrNeedsList) }},
		{ErrBadGrant, http.StatusBadRequest, func(err error) bool { return errors.Is(err, ErrBadGrant) }},
	}
	for _, tt := range tests {
		status, body := ReplyStatus(tt.err)
		if status != tt.status {
			t.Errorf("%v: status %d, want %d", tt.err, status, tt.status)
		}
		b, _ := json.Marshal(body)
		if _, err := DecodeReply(status, b); !tt.check(err) {
			t.Errorf("%v: came back as %v", tt.err, err)
		}
	}
	a, err := DecodeReply(http.StatusOK, []byte(`{"took":false,"ran":true,"n":3,"term":1,"left_ms":5}`))
	if err != nil || !reflect.DeepEqual(a, Answer{Ran: true, N: 3, Term: 1, LeftMS: 5}) {
		t.Fatalf("200: %+v %v", a, err)
	}
	if _, err := DecodeReply(http.StatusBadGateway, []byte("x")); err == nil {
		t.Fatal("502 decoded as an answer")
	}
}

func TestTermFile(t *testing.T) {
	dir := t.TempDir()
	f := NewTermFile(dir)
	if b, err := f.Load(); err != nil || b != (Binding{}) {
		t.Fatalf("missing file: %+v %v, want the zero binding", b, err)
	}
	for _, b := range []Binding{{Term: 1}, {Term: 9, Dir: "global"}, {Term: 1 << 40, Dir: "region:eu", Epoch: 3}} {
		if err := f.Store(b); err != nil {
			t.Fatal(err)
		}
		if got, err := f.Load(); err != nil || got != b {
			t.Fatalf("Load = %+v %v, want %+v", got, err, b)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != TermFileName {
		t.Fatalf("dir holds %v, want only %s", entries, TermFileName)
	}
	for _, bad := range []string{"x\n", "4 global\n", "4 global x\n", "1 2 3 4\n"} {
		if err := os.WriteFile(filepath.Join(dir, TermFileName), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Load(); err == nil {
			t.Fatalf("a damaged term file %q loaded", bad)
		}
	}
	if err := f.Store(Binding{Term: 1, Dir: "a b", Epoch: 1}); err == nil {
		t.Fatal("a directory name with a space stored")
	}
	// A node from before bindings kept its term alone: it loads unbound.
	if err := os.WriteFile(filepath.Join(dir, TermFileName), []byte("7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := f.Load(); err != nil || got != (Binding{Term: 7}) {
		t.Fatalf("a term alone: %+v %v", got, err)
	}

	// The file is what a restarted node's lease starts from.
	if err := f.Store(Binding{Term: 5}); err != nil {
		t.Fatal(err)
	}
	b, _ := f.Load()
	l := NewNodeLease(b, f.Store)
	if _, err := l.Handle(0, grantOf("r", 4, 1, 0, 1000, []string{"a"}, nil)); !errors.Is(err, ErrLowerTerm) {
		t.Fatalf("restarted node took a lower term: %v", err)
	}
	g := grantOf("r", 6, 1, 0, 1000, []string{"a"}, nil)
	g.Dir, g.Epoch = "global", 2
	if _, err := l.Handle(0, g); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.Load(); got != (Binding{Term: 6, Dir: "global", Epoch: 2}) {
		t.Fatalf("file holds %+v, want term 6 of global at epoch 2", got)
	}
}

func TestClocks(t *testing.T) {
	var b BootClock
	t1 := b.Now()
	t2 := b.Now()
	if t1 <= 0 || t2 < t1 {
		t.Fatalf("boot clock read %v then %v", t1, t2)
	}
	c := NewManualClock(time.Second)
	c.Advance(time.Second)
	c.Advance(-time.Hour)
	if c.Now() != 2*time.Second {
		t.Fatalf("manual clock %v, want 2s", c.Now())
	}
}
