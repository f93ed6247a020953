package text

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }

func checkHits(t testing.TB, got, want []Hit) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range got {
		if got[i].ID != want[i].ID || !near(got[i].Score, want[i].Score) {
			t.Fatalf("hit %d: got %v, want %v (all: %v)", i, got[i], want[i], got)
		}
	}
}

// smallCorpus is the corpus the hand-worked scores below are for.
func smallCorpus(t testing.TB) *Index {
	t.Helper()
	x := New(0, 0)                     // k1 = 1.2, b = 0.75
	x.Put(1, "The cat sat.")           // the cat sat: 3 tokens
	x.Put(2, "the dog sat on THE cat") // 6 tokens
	x.Put(3, "Dogs!")                  // 1 token
	if x.Len() != 3 || x.TotalLen() != 10 || !near(x.AvgLen(), 10.0/3) {
		t.Fatalf("Len %d TotalLen %d AvgLen %v, want 3 10 3.333", x.Len(), x.TotalLen(), x.AvgLen())
	}
	return x
}

func TestScoresByHand(t *testing.T) {
	x := smallCorpus(t)
	// N = 3, avgdl = 10/3, k1 = 1.2, b = 0.75.
	// Length norms k1·(1 − b + b·dl/avgdl):
	//   dl 3: 1.2·(0.25 + 0.75·0.9) = 1.2·0.925 = 1.11
	//   dl 6: 1.2·(0.25 + 0.75·1.8) = 1.2·1.6   = 1.92
	// idf: "cat" and "the" in 2 docs: ln(1 + 1.5/2.5) = ln 1.6;
	//      "dog" in 1 doc:            ln(1 + 2.5/1.5) = ln(8/3).
	idf2, idf1 := math.Log(1.6), math.Log(8.0/3)
	if got := IDF(3, 2); !near(got, idf2) {
		t.Fatalf("IDF(3, 2) = %v, want ln 1.6", got)
	}

	// "cat": doc 1 tf 1 → ln1.6·2.2/(1+1.11); doc 2 tf 1 → ln1.6·2.2/(1+1.92).
	checkHits(t, x.Search("cat", 10, nil), []Hit{
		{1, idf2 * 2.2 / 2.11},
		{2, idf2 * 2.2 / 2.92},
	})

	// "the THE dog": "the" counts once. Doc 2: the tf 2 → ln1.6·2·2.2/(2+1.92),
	// dog tf 1 → ln(8/3)·2.2/2.92. Doc 1: the tf 1 → ln1.6·2.2/2.11.
	// Doc 3 holds "dogs", not "dog": no stemming.
	checkHits(t, x.Search("the THE dog", 10, nil), []Hit{
		{2, idf2*4.4/3.92 + idf1*2.2/2.92},
		{1, idf2 * 2.2 / 2.11},
	})

	if got := x.Search("cat", 1, nil); len(got) != 1 || got[0].ID != 1 {
		t.Fatalf("k=1 gave %v", got)
	}
	if got := x.Search("zebra", 10, nil); len(got) != 0 {
		t.Fatalf("unknown term gave %v", got)
	}
	if got := x.Search("", 10, nil); len(got) != 0 {
		t.Fatalf("empty query gave %v", got)
	}
}

func TestStatisticsFollowUpdates(t *testing.T) {
	x := smallCorpus(t)
	stats := func() string {
		return fmt.Sprintf("len=%d total=%d terms=%d the=%d cat=%d dog=%d dogs=%d",
			x.Len(), x.TotalLen(), x.Terms(), x.DocFreq("the"), x.DocFreq("cat"), x.DocFreq("dog"), x.DocFreq("dogs"))
	}
	// Terms: the cat sat dog on dogs.
	if got, want := stats(), "len=3 total=10 terms=6 the=2 cat=2 dog=1 dogs=1"; got != want {
		t.Fatalf("stats %s, want %s", got, want)
	}
	x.Remove(2)
	if got, want := stats(), "len=2 total=4 terms=4 the=1 cat=1 dog=0 dogs=1"; got != want {
		t.Fatalf("after remove: %s, want %s", got, want)
	}
	x.Remove(2) // again: nothing changes
	x.Remove(42)
	if got, want := stats(), "len=2 total=4 terms=4 the=1 cat=1 dog=0 dogs=1"; got != want {
		t.Fatalf("after removing twice: %s, want %s", got, want)
	}
	x.Put(1, "dog dog") // replace: 3 tokens out, 2 in
	if got, want := stats(), "len=2 total=3 terms=2 the=0 cat=0 dog=1 dogs=1"; got != want {
		t.Fatalf("after replace: %s, want %s", got, want)
	}
	x.Put(4, "")
	if got, want := stats(), "len=3 total=3 terms=2 the=0 cat=0 dog=1 dogs=1"; got != want {
		t.Fatalf("after an empty document: %s, want %s", got, want)
	}
	// N = 3, avgdl = 1. "dog": df 1, idf ln(1 + 2.5/1.5); doc 1 tf 2, dl 2:
	// norm 1.2·(0.25 + 0.75·2) = 2.1, score idf·2·2.2/(2+2.1).
	checkHits(t, x.Search("dog", 10, nil), []Hit{{1, math.Log(8.0/3) * 4.4 / 4.1}})
	for _, id := range []int64{1, 3, 4} {
		x.Remove(id)
	}
	if got, want := stats(), "len=0 total=0 terms=0 the=0 cat=0 dog=0 dogs=0"; got != want || x.AvgLen() != 0 {
		t.Fatalf("emptied: %s avg %v, want %s", got, x.AvgLen(), want)
	}
	if got := x.Search("dog", 10, nil); len(got) != 0 {
		t.Fatalf("emptied index gave %v", got)
	}
}

func TestFilter(t *testing.T) {
	x := New(0, 0)
	for id := int64(1); id <= 100; id++ {
		// Lower ids repeat "apple" more, so they rank higher.
		x.Put(id, strings.Repeat("apple ", int(101-id))+"pie")
	}
	odd := func(id int64) bool { return id%2 == 1 }
	got := x.Search("apple", 10, odd)
	if len(got) != 10 {
		t.Fatalf("%d hits, want 10", len(got))
	}
	for i, h := range got {
		if want := int64(2*i + 1); h.ID != want {
			t.Fatalf("hit %d is %d, want %d: %v", i, h.ID, want, got)
		}
	}
	none := x.Search("apple", 10, func(int64) bool { return false })
	if len(none) != 0 {
		t.Fatalf("a filter refusing all gave %v", none)
	}
	few := x.Search("apple", 10, func(id int64) bool { return id == 100 || id == 50 })
	if !slices.Equal([]int64{few[0].ID, few[1].ID}, []int64{50, 100}) || len(few) != 2 {
		t.Fatalf("two passing gave %v", few)
	}
	if all := x.Search("pie", 0, nil); len(all) != 100 {
		t.Fatalf("k=0 gave %d hits, want all 100", len(all))
	}
}

func TestTiesByID(t *testing.T) {
	x := New(0, 0)
	for _, id := range []int64{9, 3, 7, 1, 5} {
		x.Put(id, "same words here")
	}
	got := x.Search("words", 3, nil)
	want := []int64{1, 3, 5}
	for i := range want {
		if got[i].ID != want[i] || got[i].Score != got[0].Score {
			t.Fatalf("got %v, want ids %v with equal scores", got, want)
		}
	}
}

func TestParameters(t *testing.T) {
	x := New(2, 0.5)
	x.Put(1, "a b")
	x.Put(2, "a c c c")
	// N = 2, avgdl = 3, "c" df 1: idf ln(1 + 1.5/1.5) = ln 2.
	// Doc 2: tf 3, dl 4: norm 2·(0.5 + 0.5·4/3) = 2·(7/6) = 7/3;
	// score ln2 · 3·3 / (3 + 7/3).
	checkHits(t, x.Search("c", 5, nil), []Hit{{2, math.Log(2) * 9 / (3 + 7.0/3)}})
}

// model is a plain recomputation of BM25 from each document's tokens, to
// check the index against after a random history of puts and removes.
type model map[int64][]string

func (m model) search(query string, k1, b float64) map[int64]float64 {
	n := len(m)
	total := 0
	df := map[string]int{}
	for _, toks := range m {
		total += len(toks)
		seen := map[string]bool{}
		for _, tk := range toks {
			if !seen[tk] {
				seen[tk] = true
				df[tk]++
			}
		}
	}
	avg := float64(total) / float64(n)
	out := map[int64]float64{}
	done := map[string]bool{}
	for _, q := range Tokenize(query) {
		if done[q] || df[q] == 0 {
			continue
		}
		done[q] = true
		idf := math.Log(1 + (float64(n)-float64(df[q])+0.5)/(float64(df[q])+0.5))
		for id, toks := range m {
			tf := 0
			for _, tk := range toks {
				if tk == q {
					tf++
				}
			}
			if tf > 0 {
				f := float64(tf)
				out[id] += idf * f * (k1 + 1) / (f + k1*(1-b+b*float64(len(toks))/avg))
			}
		}
	}
	return out
}

func TestAgainstModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"}
	x := New(0, 0)
	m := model{}
	for step := range 3000 {
		id := int64(r.IntN(200))
		if r.IntN(4) == 0 {
			x.Remove(id)
			delete(m, id)
		} else {
			var sb strings.Builder
			for range r.IntN(12) {
				sb.WriteString(words[r.IntN(len(words))])
				sb.WriteString(" ")
			}
			x.Put(id, sb.String())
			m[id] = Tokenize(sb.String())
		}
		if step%100 != 0 {
			continue
		}
		q := words[r.IntN(len(words))] + " " + words[r.IntN(len(words))]
		want := m.search(q, DefaultK1, DefaultB)
		got := x.Search(q, 0, nil)
		if len(got) != len(want) {
			t.Fatalf("step %d %q: %d hits, want %d", step, q, len(got), len(want))
		}
		for i, h := range got {
			if !near(h.Score, want[h.ID]) {
				t.Fatalf("step %d %q: id %d score %v, want %v", step, q, h.ID, h.Score, want[h.ID])
			}
			if i > 0 && (got[i-1].Score < h.Score || got[i-1].Score == h.Score && got[i-1].ID > h.ID) {
				t.Fatalf("step %d: hits out of order: %v", step, got)
			}
		}
	}
	if x.Len() != len(m) {
		t.Fatalf("Len %d, want %d", x.Len(), len(m))
	}
}

func TestRemovesCompactTheArena(t *testing.T) {
	x := New(0, 0)
	for id := range int64(3000) {
		x.Put(id, fmt.Sprintf("common w%d w%d x%d", id%10, id%7, id))
	}
	grown := len(x.arena)
	for id := range int64(2500) {
		x.Remove(id)
	}
	live := 0
	for s := range x.ids {
		live += int(x.cnt[s])
	}
	if len(x.arena) >= grown || len(x.arena)-x.holes != live {
		t.Fatalf("arena %d (was %d), holes %d, live entries %d: not compacted", len(x.arena), grown, x.holes, live)
	}
	// Every remaining document still removes cleanly and is found.
	got := x.Search("x2999 common", 1, nil)
	if len(got) != 1 || got[0].ID != 2999 {
		t.Fatalf("got %v, want 2999 first", got)
	}
	for id := int64(2500); id < 3000; id++ {
		x.Remove(id)
	}
	if x.Len() != 0 || x.Terms() != 0 || x.TotalLen() != 0 {
		t.Fatalf("emptied: Len %d Terms %d TotalLen %d", x.Len(), x.Terms(), x.TotalLen())
	}
}

func TestRepeatedTokenCapped(t *testing.T) {
	x := New(0, 0)
	x.Put(1, strings.Repeat("a ", MaxTF+10))
	x.Put(2, "b")
	tm := x.terms[x.dict["a"]]
	if tm.tfs[0] != MaxTF {
		t.Fatalf("tf %d, want %d", tm.tfs[0], MaxTF)
	}
	if x.TotalLen() != MaxTF+11 {
		t.Fatalf("TotalLen %d: the length counts every token", x.TotalLen())
	}
}

// Searches may run side by side (the engine holds its read lock for them).
func TestConcurrentSearches(t *testing.T) {
	x := New(0, 0)
	r := rand.New(rand.NewPCG(5, 6))
	words := []string{"red", "green", "blue", "cyan", "pink", "gray"}
	for id := range int64(2000) {
		var sb strings.Builder
		for range 1 + r.IntN(20) {
			sb.WriteString(words[r.IntN(len(words))] + " ")
		}
		x.Put(id, sb.String())
	}
	queries := []string{"red", "green blue", "cyan pink gray", "red red"}
	want := make([][]Hit, len(queries))
	for i, q := range queries {
		want[i] = x.Search(q, 10, func(id int64) bool { return id%2 == 0 })
	}
	var wg sync.WaitGroup
	bad := make(chan string, 4)
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				k := (i + g) % len(queries)
				if got := x.Search(queries[k], 10, func(id int64) bool { return id%2 == 0 }); !slices.Equal(got, want[k]) {
					bad <- queries[k]
					return
				}
			}
		})
	}
	wg.Wait()
	close(bad)
	for q := range bad {
		t.Fatalf("concurrent search for %q differs from the search run alone", q)
	}
}
