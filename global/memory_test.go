package global

import (
	"errors"
	"fmt"
	"testing"
)

// A watch that falls behind the history a Memory keeps is told so, as an
// etcd watch behind its compaction is.
func TestMemoryHistoryCap(t *testing.T) {
	m := NewMemory()
	t.Cleanup(func() { m.Close() })
	m.historyCap = 8
	ctx := testCtx(t)
	_, rev, err := m.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	ch, err := m.Watch(ctx, "", rev)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		mustPut(t, m, fmt.Sprintf("k%d", i%3), "v")
	}
	var got error
	for r := range ch {
		if r.Err != nil {
			got = r.Err
		}
	}
	if !errors.Is(got, ErrCompacted) {
		t.Fatalf("watch behind the kept history ended with %v, want ErrCompacted", got)
	}
	m.mu.Lock()
	n := len(m.history)
	m.mu.Unlock()
	if n > 8 {
		t.Fatalf("%d events kept, cap 8", n)
	}
}
