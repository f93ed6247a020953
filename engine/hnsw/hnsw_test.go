package hnsw

import (
	"errors"
	"math"
	"slices"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", Config{Dim: 3}, true},
		{"no dim", Config{}, false},
		{"dim too large", Config{Dim: MaxDim + 1}, false},
		{"m of one", Config{Dim: 3, M: 1}, false},
		{"unknown metric", Config{Dim: 3, Metric: Dot + 1}, false},
		{"negative ef", Config{Dim: 3, EfSearch: -1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if got := err == nil; got != tt.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrConfig) {
				t.Fatalf("Validate() = %v, want ErrConfig", err)
			}
		})
	}
	x, err := New(Config{Dim: 4})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := x.Config(), (Config{Dim: 4, M: 32, EfConstruction: 100, EfSearch: 256}); got != want {
		t.Fatalf("Config() = %+v, want %+v", got, want)
	}
}

func TestBadVectors(t *testing.T) {
	x, err := New(Config{Dim: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Add(1, []float32{1, 2}); !errors.Is(err, ErrDimension) {
		t.Fatalf("Add of 2 values = %v, want ErrDimension", err)
	}
	if err := x.Add(1, []float32{1, float32(math.NaN()), 0}); !errors.Is(err, ErrNotFinite) {
		t.Fatalf("Add of NaN = %v, want ErrNotFinite", err)
	}
	if err := x.Add(1, []float32{1, 0, 0}); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Search([]float32{1, 0, 0, 0}, Query{K: 1}); !errors.Is(err, ErrDimension) {
		t.Fatalf("Search of 4 values = %v, want ErrDimension", err)
	}
	if _, err := x.Search([]float32{1, 0, 0}, Query{K: 0}); !errors.Is(err, ErrK) {
		t.Fatalf("Search with K=0 = %v, want ErrK", err)
	}
	if x.Len() != 1 {
		t.Fatalf("Len() = %d after one good Add, want 1", x.Len())
	}
}

// Scores worked by hand for each metric.
func TestScores(t *testing.T) {
	vs := map[int64][]float32{1: {3, 4}, 2: {1, 0}, 3: {0, -2}}
	q := []float32{1, 0}
	tests := []struct {
		metric Metric
		want   []Hit
	}{
		// cosine: (3,4)/5·(1,0) = 0.6; (1,0) = 1; (0,-1)·(1,0) = 0.
		{Cosine, []Hit{{2, 1}, {1, 0.6}, {3, 0}}},
		// dot: 3, 1, 0.
		{Dot, []Hit{{1, 3}, {2, 1}, {3, 0}}},
		// l2: -|(2,4)| = -√20, -0, -|(-1,-2)| = -√5.
		{L2, []Hit{{2, 0}, {3, -math.Sqrt(5)}, {1, -math.Sqrt(20)}}},
	}
	for _, tt := range tests {
		t.Run(tt.metric.String(), func(t *testing.T) {
			x, err := New(Config{Dim: 2, Metric: tt.metric})
			if err != nil {
				t.Fatal(err)
			}
			for id := int64(1); id <= 3; id++ {
				if err := x.Add(id, vs[id]); err != nil {
					t.Fatal(err)
				}
			}
			for _, exact := range []bool{false, true} {
				got := search(t, x, q, Query{K: 3, Exact: exact})
				if len(got) != len(tt.want) {
					t.Fatalf("exact=%v: got %v, want %v", exact, got, tt.want)
				}
				for i := range got {
					if got[i].ID != tt.want[i].ID || math.Abs(got[i].Score-tt.want[i].Score) > 1e-6 {
						t.Fatalf("exact=%v: got %v, want %v", exact, got, tt.want)
					}
				}
			}
		})
	}
}

func TestTiesByID(t *testing.T) {
	x, err := New(Config{Dim: 2, Metric: Dot})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{9, 4, 7, 1} {
		if err := x.Add(id, []float32{1, 1}); err != nil {
			t.Fatal(err)
		}
	}
	for _, exact := range []bool{false, true} {
		got := ids(search(t, x, []float32{1, 0}, Query{K: 3, Exact: exact}))
		if want := []int64{1, 4, 7}; !slices.Equal(got, want) {
			t.Fatalf("exact=%v: ids %v, want %v", exact, got, want)
		}
	}
}

func TestCosineNormalisesAndCopies(t *testing.T) {
	x, err := New(Config{Dim: 2})
	if err != nil {
		t.Fatal(err)
	}
	v := []float32{10, 0}
	if err := x.Add(1, v); err != nil {
		t.Fatal(err)
	}
	v[0], v[1] = 0, 10 // the index holds its own copy
	got := search(t, x, []float32{5, 0}, Query{K: 1})
	if len(got) != 1 || math.Abs(got[0].Score-1) > 1e-6 {
		t.Fatalf("got %v, want id 1 with similarity 1", got)
	}
}

func TestEmptyAndSmall(t *testing.T) {
	x, err := New(Config{Dim: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := search(t, x, []float32{1, 0}, Query{K: 5}); len(got) != 0 {
		t.Fatalf("empty index gave %v", got)
	}
	for id := int64(0); id < 3; id++ {
		if err := x.Add(id, []float32{1, float32(id)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := search(t, x, []float32{1, 0}, Query{K: 5}); len(got) != 3 {
		t.Fatalf("K=5 over 3 vectors gave %d hits, want 3", len(got))
	}
	for id := int64(0); id < 3; id++ {
		x.Remove(id)
	}
	if x.Len() != 0 || x.Tombstones() != 0 {
		t.Fatalf("after removing all: Len %d, Tombstones %d", x.Len(), x.Tombstones())
	}
	if got := search(t, x, []float32{1, 0}, Query{K: 5}); len(got) != 0 {
		t.Fatalf("emptied index gave %v", got)
	}
	if err := x.Add(5, []float32{0, 1}); err != nil {
		t.Fatal(err)
	}
	if got := ids(search(t, x, []float32{1, 0}, Query{K: 5})); !slices.Equal(got, []int64{5}) {
		t.Fatalf("refilled index gave %v, want [5]", got)
	}
}

func TestUpdateMovesTheVector(t *testing.T) {
	vs := randVecs(3, 3000, 16)
	x := build(t, Config{Dim: 16, Seed: 1}, vs)
	old := vs[42]
	neg := make([]float32, len(old))
	for i, f := range old {
		neg[i] = -f
	}
	if err := x.Add(42, neg); err != nil {
		t.Fatal(err)
	}
	if x.Len() != 3000 {
		t.Fatalf("Len() = %d after an update, want 3000", x.Len())
	}
	for _, exact := range []bool{false, true} {
		near := search(t, x, old, Query{K: 10, Exact: exact})
		if slices.Contains(ids(near), 42) {
			t.Fatalf("exact=%v: id 42 found by its old vector: %v", exact, near)
		}
		got := search(t, x, neg, Query{K: 1, Exact: exact})
		if len(got) != 1 || got[0].ID != 42 || math.Abs(got[0].Score-1) > 1e-5 {
			t.Fatalf("exact=%v: by its new vector got %v, want 42 with similarity 1", exact, got)
		}
	}
}

func TestSameVectorAgainChangesNothing(t *testing.T) {
	vs := randVecs(13, 100, 8)
	x := build(t, Config{Dim: 8, Seed: 6}, vs)
	for i, v := range vs {
		if err := x.Add(int64(i), v); err != nil {
			t.Fatal(err)
		}
	}
	if x.Tombstones() != 0 || len(x.ids) != 100 {
		t.Fatalf("re-adding the same vectors left %d tombstones, %d slots", x.Tombstones(), len(x.ids))
	}
}

func TestRemoveNeverReturns(t *testing.T) {
	vs := randVecs(4, 3000, 16)
	x := build(t, Config{Dim: 16, Seed: 2}, vs)
	removed := map[int64]bool{}
	// Remove every third vector: tombstones pass the purge fraction on
	// the way, so this runs through purges and a tail of tombstones.
	for id := int64(0); id < 3000; id += 3 {
		x.Remove(id)
		removed[id] = true
	}
	x.Remove(1) // twice, and an id never added
	x.Remove(1)
	x.Remove(99999)
	removed[1] = true
	if want := 3000 - len(removed); x.Len() != want {
		t.Fatalf("Len() = %d, want %d", x.Len(), want)
	}
	if got := reachable(x); got != x.Len() {
		t.Fatalf("%d of %d live nodes reachable after removes", got, x.Len())
	}
	for _, id := range []int64{0, 1, 3, 2997} {
		for _, exact := range []bool{false, true} {
			hs := search(t, x, vs[id], Query{K: 20, Exact: exact})
			for _, h := range hs {
				if removed[h.ID] {
					t.Fatalf("exact=%v: removed id %d came back", exact, h.ID)
				}
			}
			if len(hs) != 20 {
				t.Fatalf("exact=%v: %d hits, want 20", exact, len(hs))
			}
		}
		if x.Has(id) {
			t.Fatalf("Has(%d) after Remove", id)
		}
	}
	if r := recallOf(t, x, randVecs(5, 50, 16), 10, 64); r < 0.95 {
		t.Fatalf("recall@10 after removes = %.3f, want >= 0.95", r)
	}
}

func TestPurgeReusesSlots(t *testing.T) {
	vs := randVecs(6, 1000, 8)
	x := build(t, Config{Dim: 8, Seed: 3}, vs)
	for id := int64(0); id < 300; id++ {
		x.Remove(id)
	}
	if x.Tombstones() >= 300 {
		t.Fatalf("Tombstones() = %d: no purge ran", x.Tombstones())
	}
	if float64(x.Tombstones()) > PurgeFraction*float64(x.Len()+x.Tombstones()) {
		t.Fatalf("%d tombstones among %d live: past the purge fraction", x.Tombstones(), x.Len())
	}
	slots := len(x.ids)
	for id := int64(0); id < 200; id++ {
		if err := x.Add(1000+id, vs[id]); err != nil {
			t.Fatal(err)
		}
	}
	if len(x.ids) >= slots+200 {
		t.Fatalf("slots grew from %d to %d: freed slots not reused", slots, len(x.ids))
	}
	if got := reachable(x); got != x.Len() {
		t.Fatalf("%d of %d live nodes reachable", got, x.Len())
	}
	got := search(t, x, vs[7], Query{K: 1})
	if len(got) != 1 || got[0].ID != 1007 {
		t.Fatalf("nearest to the vector re-added as 1007 = %v", got)
	}
}

func TestPurgeRunsAcrossWrites(t *testing.T) {
	vs := randVecs(14, 2500, 8)
	x := build(t, Config{Dim: 8, Seed: 8}, vs[:2000])
	for id := range int64(401) { // 401 of 2000 passes a fifth
		x.Remove(id)
	}
	if !x.purging || x.Tombstones() != 401 {
		t.Fatalf("purging %v with %d tombstones; want a purge begun, none freed yet", x.purging, x.Tombstones())
	}
	writes := 0
	for i := 2000; x.purging; i++ {
		for _, h := range search(t, x, vs[i-2000], Query{K: 10}) {
			if h.ID < 401 {
				t.Fatalf("removed id %d found mid-purge", h.ID)
			}
		}
		if err := x.Add(int64(i), vs[i]); err != nil {
			t.Fatal(err)
		}
		writes++
	}
	// Each write repairs purgeStepNodes live nodes: 1599 live nodes and
	// the ones added on the way take 50 or 51 writes.
	if writes < 1599/purgeStepNodes || writes > 1700/purgeStepNodes+1 {
		t.Fatalf("purge took %d writes", writes)
	}
	if x.Tombstones() != 0 || len(x.free) != 401 {
		t.Fatalf("after the purge: %d tombstones, %d free slots", x.Tombstones(), len(x.free))
	}
	if got := reachable(x); got != x.Len() {
		t.Fatalf("%d of %d live nodes reachable", got, x.Len())
	}
	for id := int64(1000); id < 1100; id++ {
		x.Remove(id)
	}
	x.Purge()
	if x.Tombstones() != 0 || x.purging {
		t.Fatalf("Purge left %d tombstones (purging %v)", x.Tombstones(), x.purging)
	}
	if got := reachable(x); got != x.Len() {
		t.Fatalf("%d of %d live nodes reachable after Purge", got, x.Len())
	}
	if r := recallOf(t, x, randVecs(15, 50, 8), 10, 64); r < 0.95 {
		t.Fatalf("recall@10 after purges = %.3f", r)
	}
}

// filterOf passes the ids in set.
func filterOf(set map[int64]bool) func(int64) bool {
	return func(id int64) bool { return set[id] }
}

func TestFilteredMatchesExact(t *testing.T) {
	x, data := recallFixture(t)
	qs := clustered(100, 9, 20, recallDim, 100, 0.5)
	for _, passing := range []int{5, 50, 500} {
		set := map[int64]bool{}
		for i := range passing {
			set[int64(i*(len(data)/passing)+passing%7)] = true
		}
		for _, q := range qs {
			want := search(t, x, q, Query{K: 10, Exact: true, Filter: filterOf(set)})
			got := search(t, x, q, Query{K: 10, Filter: filterOf(set)})
			if n := min(10, passing); len(want) != n {
				t.Fatalf("%d passing: exact gave %d hits, want %d", passing, len(want), n)
			}
			if !slices.Equal(ids(got), ids(want)) {
				t.Fatalf("%d passing: got %v, want %v", passing, ids(got), ids(want))
			}
			for _, h := range got {
				if !set[h.ID] {
					t.Fatalf("%d passing: id %d does not pass", passing, h.ID)
				}
			}
		}
	}
}

// A filter passing too many rows to score them all walks the graph; it
// still answers K rows, all passing, close to the exact answer. The walk
// runs at ef 64, where a filter passing half the rows or more is walked
// (fewPass's bound is ef·M0/2 distances).
func TestFilteredGraphWalk(t *testing.T) {
	x, _ := recallFixture(t)
	qs := clustered(100, 10, 30, recallDim, 100, 0.5)
	const ef = 64
	for _, f := range []struct {
		name string
		keep func(id int64) bool
	}{
		{"1/2", func(id int64) bool { return id%2 == 0 }},
		{"3/4", func(id int64) bool { return id%4 != 0 }},
	} {
		filter := f.keep
		if x.fewPass(filter, ef) {
			t.Fatalf("%s of %d rows judged few enough to score all", f.name, x.Len())
		}
		found := 0
		for _, q := range qs {
			want := search(t, x, q, Query{K: 10, Exact: true, Filter: filter})
			got := search(t, x, q, Query{K: 10, Ef: ef, Filter: filter})
			if len(got) != 10 {
				t.Fatalf("%s: %d hits, want 10", f.name, len(got))
			}
			for _, h := range got {
				if !filter(h.ID) {
					t.Fatalf("%s: id %d does not pass", f.name, h.ID)
				}
			}
			found += overlap(got, want)
		}
		if r := float64(found) / float64(10*len(qs)); r < 0.95 {
			t.Fatalf("%s: filtered recall@10 = %.3f, want >= 0.95", f.name, r)
		}
	}
}

// A node the graph cannot reach is still found: a short graph answer falls
// back to scoring every row.
func TestShortGraphFallsBack(t *testing.T) {
	vs := randVecs(11, 3000, 8)
	x := build(t, Config{Dim: 8, Seed: 4}, vs)
	cut := x.slotOf[1234]
	if cut == x.entry {
		t.Fatal("chose the entry point")
	}
	for s := range x.ids {
		for l := 0; l <= int(x.level[s]); l++ {
			ns := x.links(uint32(s), l)
			if slices.Contains(ns, cut) {
				x.setLinks(uint32(s), l, slices.DeleteFunc(slices.Clone(ns), func(n uint32) bool { return n == cut }))
			}
		}
	}
	if got := reachable(x); got != x.Len()-1 {
		t.Fatalf("%d reachable, want all but one of %d", got, x.Len())
	}
	all := search(t, x, vs[0], Query{K: 3000})
	if len(all) != 3000 || !slices.Contains(ids(all), 1234) {
		t.Fatalf("K=all gave %d hits (has 1234: %v), want 3000", len(all), slices.Contains(ids(all), 1234))
	}
	filter := func(id int64) bool { return id == 1234 || id%2 == 1 }
	got := search(t, x, vs[1234], Query{K: 1, Filter: filter})
	if len(got) != 1 || got[0].ID != 1234 {
		t.Fatalf("got %v, want the unreachable 1234", got)
	}
}

func TestCandidates(t *testing.T) {
	vs := randVecs(12, 500, 8)
	x := build(t, Config{Dim: 8, Seed: 5}, vs)
	x.Remove(3)
	cands := []int64{3, 10, 20, 30, 20, 40, 77777}
	got := search(t, x, vs[20], Query{K: 10, Candidates: cands})
	want := search(t, x, vs[20], Query{K: 10, Exact: true, Filter: filterOf(map[int64]bool{10: true, 20: true, 30: true, 40: true})})
	if !slices.Equal(ids(got), ids(want)) || len(got) != 4 || got[0].ID != 20 {
		t.Fatalf("candidates gave %v, want %v", ids(got), ids(want))
	}
	got = search(t, x, vs[20], Query{K: 10, Candidates: cands, Filter: func(id int64) bool { return id != 20 }})
	if slices.Contains(ids(got), 20) || len(got) != 3 {
		t.Fatalf("candidates with a filter gave %v", ids(got))
	}
	if got := search(t, x, vs[20], Query{K: 10, Candidates: []int64{}}); len(got) != 0 {
		t.Fatalf("no candidates gave %v", got)
	}
}
