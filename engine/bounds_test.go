package engine

import (
	"fmt"
	"testing"
	"time"
)

// loadRows puts n rows {body: "b<i>", n: i} into collection c in blocks.
func loadRows(tb testing.TB, db *DB, coll string, n int) {
	tb.Helper()
	mustExec(tb, db, "create collection "+coll+" (body text, n int)")
	const block = 5000
	for i := 0; i < n; i += block {
		docs := make([]any, 0, block)
		for j := i; j < min(n, i+block); j++ {
			docs = append(docs, map[string]any{"body": fmt.Sprintf("b%d", j), "n": j})
		}
		mustExec(tb, db, "insert "+coll+" $1", docs)
	}
}

// An in over a list of 300 000 parameters, on 20 000 rows with no index,
// is a lookup a row: it was a walk of the list a row (and the list
// normalised again a row), 52 s on a node and far past this test's bound.
// The bound is a hundred times what it takes here, a guard against the
// walk coming back, not a measure.
func TestInOverAHugeListIsHashed(t *testing.T) {
	db, _ := newTestDB(t, Options{})
	loadRows(t, db, "c", 20000)
	vals := make([]any, 0, 300000)
	for i := range 300000 {
		vals = append(vals, fmt.Sprintf("b%d", i*7)) // every seventh row's body, and many that are no row's
	}
	start := time.Now()
	got := mustExec(t, db, "get c where body in $1 count", vals)
	took := time.Since(start)
	if want := fmt.Sprintf(`{"count":%d}`, (20000+6)/7); got != want {
		t.Fatalf("count %s, want %s", got, want)
	}
	// Numbers too, an int list against an int field, floats meeting ints.
	nums := []any{int64(3), 4.0, 4.5, nil}
	if got := mustExec(t, db, "get c select n where n in $1 order n", nums); got != `[{"n":3},{"n":4}]` {
		t.Fatalf("in over numbers: %s", got)
	}
	t.Logf("in over %d values on 20 000 rows: %v", len(vals), took)
	if took > 20*time.Second {
		t.Fatalf("in over %d values on 20 000 rows took %v", len(vals), took)
	}
}
