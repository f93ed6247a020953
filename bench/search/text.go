package main

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fenec-go/fenec/engine/text"
)

// benchText measures BM25 over a generated corpus.
func benchText(tb *table, c config) {
	r := rand.New(rand.NewPCG(3, 4))
	zipf := rand.NewZipf(r, 1.07, 1, uint64(c.voc-1))
	word := func() string { return "w" + strconv.FormatUint(zipf.Uint64(), 36) }
	docs := make([]string, c.docs)
	var sb strings.Builder
	for i := range docs {
		sb.Reset()
		for j := range c.words {
			if j > 0 {
				sb.WriteByte(' ')
			}
			sb.WriteString(word())
		}
		docs[i] = sb.String()
	}
	queries := make([]string, c.queries)
	for i := range queries {
		queries[i] = word() + " " + word()
	}

	before := heapInUse()
	start := time.Now()
	x := text.New(0, 0)
	for i, d := range docs {
		x.Put(int64(i), d)
	}
	build := time.Since(start)
	heap := heapInUse() - before
	runtime.KeepAlive(docs) // counted in before; must not be freed before after
	name := fmt.Sprintf("match %d docs × %d words", c.docs, c.words)
	tb.row(name, "build", fmtDur(build), fmt.Sprintf("%d terms", x.Terms()))
	tb.row(name, "heap after build", fmtMB(heap), fmt.Sprintf("%.0f B/document; MemoryBytes says %s", float64(heap)/float64(c.docs), fmtMB(uint64(x.MemoryBytes()))))
	for _, k := range []int{10} {
		lat := make(latency, len(queries))
		for i, q := range queries {
			start := time.Now()
			x.Search(q, k, nil)
			lat[i] = time.Since(start)
		}
		slices.Sort(lat)
		tb.row(name, fmt.Sprintf("2-word queries (Zipf), k=%d", k), lat.String(), "")
		lat = lat[:0]
		for _, q := range queries {
			start := time.Now()
			x.Search(q, k, func(id int64) bool { return id%10 == 0 })
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		tb.row(name, fmt.Sprintf("same, filter passing 10%%, k=%d", k), lat.String(), "")
	}
	runtime.KeepAlive(x)
}
