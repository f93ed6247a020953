package text

import (
	"math"
	"slices"
	"sync"
)

// Hit is one search answer: a document id and its BM25 score.
type Hit struct {
	ID    int64
	Score float64
}

// IDF returns BM25's inverse document frequency for a term found in df of
// n documents: ln(1 + (n - df + 0.5) / (df + 0.5)).
func IDF(n, df int) float64 {
	return math.Log(1 + (float64(n)-float64(df)+0.5)/(float64(df)+0.5))
}

// accPool holds score accumulators, one per concurrent search.
var accPool = sync.Pool{New: func() any { return new(accumulator) }}

// accumulator sums scores per slot for one search.
type accumulator struct {
	score   []float64
	touched []uint32
}

// Search ranks the documents matching any token of query by BM25 and
// returns the best k, best first, ties broken by id ascending. k <= 0
// returns every match. A token repeated in the query counts once. When
// filter is not nil only documents for which it returns true are ranked:
// documents it refuses never appear and never take the place of ones it
// passes.
//
// For a document of length dl, with avgdl the index's average length and N
// its document count, each distinct query token found in it with frequency
// tf adds idf · tf·(k1+1) / (tf + k1·(1 − b + b·dl/avgdl)), where idf =
// IDF(N, df).
func (x *Index) Search(query string, k int, filter func(id int64) bool) []Hit {
	return x.SearchUntil(query, k, filter, nil)
}

// stopEvery is how many postings a search scores between two calls of
// its stop.
const stopEvery = 4096

// SearchUntil is Search that calls stop, when not nil, every stopEvery
// postings scored; once it says true the search ends and answers nil,
// which its caller is to throw away.
func (x *Index) SearchUntil(query string, k int, filter func(id int64) bool, stop func() bool) []Hit {
	qterms := x.queryTerms(query)
	if len(qterms) == 0 {
		return nil
	}
	acc := accPool.Get().(*accumulator)
	defer accPool.Put(acc)
	if len(acc.score) < len(x.ids) {
		acc.score = make([]float64, len(x.ids))
	}
	acc.touched = acc.touched[:0]

	n := len(x.slotOf)
	avgdl := x.AvgLen()
	k1, b := x.k1, x.b
	scored, stopped := 0, false
	for _, t := range qterms {
		tm := &x.terms[t]
		idf := IDF(n, len(tm.slots))
		tfs := tm.tfs[:len(tm.slots)]
		for i, slot := range tm.slots {
			if scored++; stop != nil && scored%stopEvery == 0 && stop() {
				stopped = true
				break
			}
			tf := float64(tfs[i])
			norm := k1 * (1 - b + b*float64(x.lens[slot])/avgdl)
			if acc.score[slot] == 0 {
				acc.touched = append(acc.touched, slot)
			}
			acc.score[slot] += idf * tf * (k1 + 1) / (tf + norm)
		}
		if stopped {
			break
		}
	}
	var hits []Hit
	if !stopped {
		hits = x.collect(acc, k, filter)
	}
	for _, s := range acc.touched {
		acc.score[s] = 0
	}
	return hits
}

// queryTerms returns the distinct term ids of query's tokens that occur in
// the index.
// A query of many tokens keeps those it has in a map, not by looking
// along its list: a megabyte of distinct words would be 10¹⁰ looks.
func (x *Index) queryTerms(query string) []uint32 {
	var ts []uint32
	var seen map[uint32]struct{}
	forEachToken(query, func(tok []byte) {
		t, ok := x.dict[string(tok)]
		if !ok {
			return
		}
		if seen == nil {
			if slices.Contains(ts, t) {
				return
			}
			if len(ts) == manyTerms {
				seen = make(map[uint32]struct{}, 2*manyTerms)
				for _, u := range ts {
					seen[u] = struct{}{}
				}
			}
		}
		if seen != nil {
			if _, dup := seen[t]; dup {
				return
			}
			seen[t] = struct{}{}
		}
		ts = append(ts, t)
	})
	return ts
}

// manyTerms is how many distinct terms a query keeps in its list alone.
const manyTerms = 32

// collect picks the best k touched slots passing filter.
func (x *Index) collect(acc *accumulator, k int, filter func(int64) bool) []Hit {
	var top hitHeap
	for _, s := range acc.touched {
		id := x.ids[s]
		if filter != nil && !filter(id) {
			continue
		}
		h := Hit{ID: id, Score: acc.score[s]}
		if k <= 0 || len(top) < k {
			top.push(h)
		} else if better(h, top[0]) {
			top[0] = h
			top.down(0)
		}
	}
	out := []Hit(top)
	slices.SortFunc(out, func(a, b Hit) int {
		switch {
		case better(a, b):
			return -1
		case better(b, a):
			return 1
		}
		return 0
	})
	return out
}

// better reports whether a ranks before b: higher score, then lower id.
func better(a, b Hit) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	return a.ID < b.ID
}

// hitHeap is a heap whose root is the worst hit kept.
type hitHeap []Hit

func (h *hitHeap) push(x Hit) {
	*h = append(*h, x)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !better(s[p], s[i]) {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

func (h hitHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		w := l
		if r := l + 1; r < len(h) && better(h[l], h[r]) {
			w = r
		}
		if !better(h[i], h[w]) {
			return
		}
		h[i], h[w] = h[w], h[i]
		i = w
	}
}
