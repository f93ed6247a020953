// Command search measures fenec's search indexes: the HNSW graph
// (engine/hnsw) and the BM25 index (engine/text). It prints a table and
// writes it to bench/search.txt.
//
//	go run ./bench/search            # full run: 20 000 and 100 000 × 128, 100 000 documents
//	go run ./bench/search -n 20000 -docs 20000 -q 200
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fenec-go/fenec/bench/internal/benchkit"
)

type config struct {
	sizes            string
	dim, queries     int
	data             string
	docs, words, voc int
	out              string
}

func main() {
	var c config
	flag.StringVar(&c.sizes, "n", "20000,100000", "vectors in the graph: one size or several, comma-separated")
	flag.IntVar(&c.dim, "dim", 128, "vector dimension")
	flag.IntVar(&c.queries, "q", 1000, "queries per measurement")
	flag.StringVar(&c.data, "data", "clustered,uniform", "vector sets to run: clustered (100 centres, σ 0.5) and/or uniform")
	flag.IntVar(&c.docs, "docs", 100000, "documents in the text corpus")
	flag.IntVar(&c.words, "words", 50, "words per document")
	flag.IntVar(&c.voc, "vocab", 20000, "vocabulary size (words drawn Zipf-like, s = 1.07)")
	flag.StringVar(&c.out, "out", "bench/search.txt", "file the table is written to (empty: none)")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "bench/search:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	var tb table
	// A shared machine's load loosens every latency in the table.
	tb.note("fenec search bench, %s, %s", time.Now().UTC().Format(time.RFC3339), benchkit.Machine())
	for _, size := range strings.Split(c.sizes, ",") {
		n, err := strconv.Atoi(size)
		if err != nil || n < 1 {
			return fmt.Errorf("-n: bad size %q", size)
		}
		for _, set := range strings.Split(c.data, ",") {
			if set == "" {
				continue
			}
			if err := benchVectors(&tb, c, set, n); err != nil {
				return err
			}
		}
	}
	benchText(&tb, c)
	return benchkit.Emit(c.out, []byte(tb.String()))
}
