package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// TestConcurrentReadsAndWrites runs searches, lookups, claims and writes
// at once (under -race this checks the locking) and then checks every
// claim took a job of its own.
func TestConcurrentReadsAndWrites(t *testing.T) {
	db, _ := newTestDB(t, Options{NoSweep: true})
	mustExec(t, db, "create collection jobs (owner text, body text @text, v vector<2> @hnsw(cosine), n int @sorted)")
	mustExec(t, db, "create collection notes (job int, s text)")
	for i := range 100 {
		mustExec(t, db, "put jobs {body: $1, v: [$2, 1], n: $2}", fmt.Sprintf("job number %d", i), i)
		mustExec(t, db, "put notes {job: $1, s: 'x'}", i+1)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	claimed := make(chan int64, 200)
	for w := range 4 {
		wg.Go(func() {
			for range 25 {
				res, _, err := db.Exec(ctx, Statement{Query: "set jobs {owner: $1} where owner is null order id limit 1 returning id", Params: []any{fmt.Sprint(w)}})
				if err != nil {
					t.Error(err)
					return
				}
				for _, r := range res.Rows {
					claimed <- r["id"].(int64)
				}
			}
		})
	}
	for range 3 {
		wg.Go(func() {
			for i := range 40 {
				for _, q := range []string{
					"get jobs match body 'number' limit 5",
					"get jobs near v [1, 1] limit 3",
					"get jobs where n > 50 order n desc limit 3 lookup notes on job",
					"get jobs where owner is null count",
				} {
					if _, _, err := db.Exec(ctx, Statement{Query: q}); err != nil {
						t.Error(q, err)
						return
					}
				}
				if _, _, err := db.Exec(ctx, Statement{Query: "put notes {job: $1, s: 'y'}", Params: []any{i}}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 3 {
			if err := db.Checkpoint(); err != nil {
				t.Error(err)
			}
			_ = db.MemoryBytes()
		}
	})
	wg.Wait()
	close(claimed)
	seen := map[int64]bool{}
	for id := range claimed {
		if seen[id] {
			t.Fatalf("job %d claimed twice", id)
		}
		seen[id] = true
	}
	if len(seen) != 100 {
		t.Fatalf("%d jobs claimed, want 100", len(seen))
	}
}
