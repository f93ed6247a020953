package hnsw

import (
	"slices"
	"sync"
	"testing"
)

// Searches may run side by side (the engine holds its read lock for them):
// run them so under -race, and check each gets the answer it gets alone.
func TestConcurrentSearches(t *testing.T) {
	x, _ := recallFixture(t)
	qs := clustered(100, 30, 40, recallDim, 100, 0.5)
	filter := func(id int64) bool { return id%3 == 0 }
	optsOf := []Query{{K: 10}, {K: 10, Exact: true}, {K: 5, Filter: filter}, {K: 5, Filter: func(id int64) bool { return id < 300 }}}
	want := make([][]Hit, len(qs)*len(optsOf))
	for i, q := range qs {
		for j, o := range optsOf {
			want[i*len(optsOf)+j] = search(t, x, q, o)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan string, 4*len(want))
	for g := range 4 {
		wg.Go(func() {
			for i := range want {
				k := (i + g*7) % len(want)
				got, err := x.Search(qs[k/len(optsOf)], optsOf[k%len(optsOf)])
				if err != nil || !slices.Equal(got, want[k]) {
					errs <- "differs"
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatalf("a concurrent search's answer %s from the same search run alone", e)
	}
}
