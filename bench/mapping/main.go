// Command mapping measures opening a tenant whose @hnsw graph is served
// from the mapped file against a build of fenec before it, side by side in
// one run: the build before makes a tenant, this build converts a copy
// of it (opens it and checkpoints it into its own format), and each opens
// its file, in turns, in a process of its own; the table gives the ratios. It
// uses only the engine's public API, so the same source builds at the
// revision before (make mapping-bench does that in a git worktree).
//
//	go run ./bench/mapping -before /tmp/mapping-before -after /tmp/mapping-after -out bench/mapping.txt
//	mapping -make FILE -n 100000 -dim 128   # child: build a tenant
//	mapping -open FILE                       # child: open it, print one JSON line
//	mapping -make FILE -plain -n 100000      # child: a tenant of documents, no vectors
//	mapping -open FILE -plain                # child: open it, print one JSON line
//
// The second table is a tenant of plain documents (@text, @hash,
// @sorted fields and one with none): what its open costs, and the first
// read of each index, which an index built on first use pays.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fenec-go/fenec/engine"
)

func main() {
	mk := flag.String("make", "", "child: build a tenant at this path")
	convert := flag.String("convert", "", "child: copy the tenant at -make's path here, open it and checkpoint it (this build's image format)")
	open := flag.String("open", "", "child: open the tenant at this path and print what it took")
	n := flag.Int("n", 100000, "vectors")
	dim := flag.Int("dim", 128, "numbers a vector")
	before := flag.String("before", "", "this tool built at the revision before")
	after := flag.String("after", "", "this tool built at this revision")
	rounds := flag.Int("rounds", 3, "opens of each, in turns")
	out := flag.String("out", "", "write the table here too")
	plain := flag.Bool("plain", false, "child: a tenant of plain documents (with -make or -open)")
	flag.Parse()
	switch {
	case *convert != "":
		rewrite(*mk, *convert)
	case *mk != "" && *plain:
		buildPlain(*mk, *n)
	case *mk != "":
		build(*mk, *n, *dim)
	case *open != "" && *plain:
		measurePlain(*open)
	case *open != "":
		measure(*open, *dim)
	default:
		compare(*before, *after, *n, *dim, *rounds, *out)
	}
}

// build makes a tenant of n seeded random vectors, checkpointed.
func build(path string, n, dim int) {
	opts := engine.Options{NoSweep: true, Sync: engine.SyncOff, Logger: slog.New(slog.DiscardHandler)}
	db, err := engine.Create(path, opts)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if _, _, err := db.Exec(ctx, engine.Statement{Query: fmt.Sprintf("create collection v (n int, e vector<%d> @hnsw(cosine))", dim)}); err != nil {
		log.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for from := 0; from < n; from += 1000 {
		docs := make([]any, 0, 1000)
		for i := from; i < min(n, from+1000); i++ {
			e := make([]any, dim)
			for j := range e {
				e[j] = rng.Float64()*2 - 1
			}
			docs = append(docs, map[string]any{"n": int64(i), "e": e})
		}
		if _, _, err := db.Exec(ctx, engine.Statement{Query: "put v $1", Params: []any{docs}}); err != nil {
			log.Fatal(err)
		}
	}
	if err := db.Checkpoint(); err != nil {
		log.Fatal(err)
	}
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}
}

// buildPlain makes a tenant of n documents with a @text, a @hash and a
// @sorted field and one with no index, checkpointed.
func buildPlain(path string, n int) {
	opts := engine.Options{NoSweep: true, Sync: engine.SyncOff, Logger: slog.New(slog.DiscardHandler)}
	db, err := engine.Create(path, opts)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if _, _, err := db.Exec(ctx, engine.Statement{Query: "create collection d (n int @sorted, k text @hash, t text @text, body text)"}); err != nil {
		log.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	words := strings.Fields("the quick brown fox jumps over a lazy dog while seven pale owls watch from old oak trees near quiet rivers")
	for from := 0; from < n; from += 1000 {
		docs := make([]any, 0, 1000)
		for i := from; i < min(n, from+1000); i++ {
			t := make([]string, 12)
			for j := range t {
				t[j] = words[rng.IntN(len(words))]
			}
			t[rng.IntN(len(t))] = fmt.Sprint("w", rng.IntN(5000))
			docs = append(docs, map[string]any{"n": int64(i), "k": fmt.Sprint("k", i%5000), "t": strings.Join(t, " "),
				"body": fmt.Sprintf("document %d, a body no index reads, of some length to be like a row", i)})
		}
		if _, _, err := db.Exec(ctx, engine.Statement{Query: "put d $1", Params: []any{docs}}); err != nil {
			log.Fatal(err)
		}
	}
	if err := db.Checkpoint(); err != nil {
		log.Fatal(err)
	}
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}
}

// openedPlain is what one open of a tenant of plain documents took.
type openedPlain struct {
	OpenMs       float64 `json:"open_ms"`
	HeapMB       float64 `json:"heap_mb"`
	AnonMB       float64 `json:"rss_anon_mb"`
	EstimateMB   float64 `json:"memory_bytes_mb"`
	FirstMatchMs float64 `json:"first_match_ms"`
	MatchMs      float64 `json:"match_ms"`
	FirstHashMs  float64 `json:"first_hash_ms"`
	HashMs       float64 `json:"hash_ms"`
	FirstRangeMs float64 `json:"first_range_ms"`
	RangeMs      float64 `json:"range_ms"`
	HeapAllMB    float64 `json:"heap_all_mb"`
	EstimateAll  float64 `json:"memory_bytes_all_mb"`
}

// measurePlain opens the tenant of plain documents at path and reads
// each index twice (the first read of an index built on first use
// builds it), and prints an openedPlain as JSON.
func measurePlain(path string) {
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	t0 := time.Now()
	db, err := engine.Open(path, engine.Options{NoSweep: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	var o openedPlain
	o.OpenMs = ms(time.Since(t0))
	runtime.GC()
	runtime.ReadMemStats(&m1)
	o.HeapMB = mb(int64(m1.HeapAlloc) - int64(m0.HeapAlloc))
	o.AnonMB, _ = rss()
	o.EstimateMB = mb(db.MemoryBytes())
	timed := func(q string) float64 {
		t := time.Now()
		if _, _, err := db.Exec(context.Background(), engine.Statement{Query: q}); err != nil {
			log.Fatal(err)
		}
		return ms(time.Since(t))
	}
	o.FirstMatchMs = timed("get d select id match t 'w17 fox' limit 10")
	o.MatchMs = timed("get d select id match t 'w18 owls' limit 10")
	o.FirstHashMs = timed("get d select id where k = 'k17'")
	o.HashMs = timed("get d select id where k = 'k18'")
	o.FirstRangeMs = timed("get d select id where n >= 5000 and n < 5010")
	o.RangeMs = timed("get d select id where n >= 6000 and n < 6010")
	runtime.GC()
	runtime.ReadMemStats(&m1)
	o.HeapAllMB = mb(int64(m1.HeapAlloc) - int64(m0.HeapAlloc))
	o.EstimateAll = mb(db.MemoryBytes())
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}
	if err := json.NewEncoder(os.Stdout).Encode(o); err != nil {
		log.Fatal(err)
	}
}

// rewrite copies the tenant at src to dst, opens it and checkpoints it:
// the same tenant in this build's image format.
func rewrite(src, dst string) {
	b, err := os.ReadFile(src)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		log.Fatal(err)
	}
	db, err := engine.Open(dst, engine.Options{NoSweep: true, Sync: engine.SyncOff, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	if err := db.Checkpoint(); err != nil {
		log.Fatal(err)
	}
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}
}

// opened is what one open took.
type opened struct {
	OpenMs      float64 `json:"open_ms"`
	HeapMB      float64 `json:"heap_mb"`
	AnonMB      float64 `json:"rss_anon_mb"`
	FileMB      float64 `json:"rss_file_mb"`
	EstimateMB  float64 `json:"memory_bytes_mb"`
	FirstNearMs float64 `json:"first_near_ms"`
	AnonNearMB  float64 `json:"rss_anon_after_near_mb"`
	FileNearMB  float64 `json:"rss_file_after_near_mb"`
	NearP50Ms   float64 `json:"near_p50_ms"`
	NearP99Ms   float64 `json:"near_p99_ms"`
	Recall10    float64 `json:"recall_at_10"`
	AnonWarmMB  float64 `json:"rss_anon_warm_mb"`
	FileWarmMB  float64 `json:"rss_file_warm_mb"`
	WarmOfFile  float64 `json:"warm_of_file"`
	AnonFreeMB  float64 `json:"rss_anon_freed_mb"`
	FreeOfFile  float64 `json:"freed_of_file"`
}

// nears is how many searches the warm rows time, after the first; recalls
// is how many of them are checked against an exact search.
const (
	nears   = 1000
	recalls = 100
)

// measure opens the tenant at path and prints an opened as JSON.
func measure(path string, dim int) {
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	t0 := time.Now()
	db, err := engine.Open(path, engine.Options{NoSweep: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	var o opened
	o.OpenMs = ms(time.Since(t0))
	runtime.GC()
	runtime.ReadMemStats(&m1)
	o.HeapMB = mb(int64(m1.HeapAlloc) - int64(m0.HeapAlloc))
	o.AnonMB, o.FileMB = rss()
	o.EstimateMB = mb(db.MemoryBytes())
	q := "get v select id near e [" + strings.TrimSuffix(strings.Repeat("0.5, ", dim), ", ") + "] limit 10"
	t1 := time.Now()
	if _, _, err := db.Exec(context.Background(), engine.Statement{Query: q}); err != nil {
		log.Fatal(err)
	}
	o.FirstNearMs = ms(time.Since(t1))
	o.AnonNearMB, o.FileNearMB = rss()
	warm(db, dim, &o)
	o.AnonWarmMB, o.FileWarmMB = rss()
	debug.FreeOSMemory() // the garbage of the searches, and the heap's headroom, given back
	var fileNow float64
	o.AnonFreeMB, fileNow = rss()
	if fi, err := os.Stat(path); err == nil {
		o.WarmOfFile = (o.AnonWarmMB + o.FileWarmMB) / mb(fi.Size())
		o.FreeOfFile = (o.AnonFreeMB + fileNow) / mb(fi.Size())
	}
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}
	if err := json.NewEncoder(os.Stdout).Encode(o); err != nil {
		log.Fatal(err)
	}
}

// warm runs nears seeded random searches, timing each, and checks the
// first recalls of them against an exact search (recall@10).
func warm(db *engine.DB, dim int, o *opened) {
	rng := rand.New(rand.NewPCG(5, 6))
	took := make([]float64, 0, nears)
	found, want := 0, 0
	for i := range nears {
		q := make([]string, dim)
		for j := range q {
			q[j] = strconv.FormatFloat(rng.Float64()*2-1, 'g', -1, 64)
		}
		vec := "[" + strings.Join(q, ", ") + "]"
		t0 := time.Now()
		res, _, err := db.Exec(context.Background(), engine.Statement{Query: "get v select id near e " + vec + " limit 10"})
		if err != nil {
			log.Fatal(err)
		}
		took = append(took, ms(time.Since(t0)))
		if i >= recalls {
			continue
		}
		ex, _, err := db.Exec(context.Background(), engine.Statement{Query: "get v select id near e " + vec + " exact limit 10"})
		if err != nil {
			log.Fatal(err)
		}
		got := ids(res.JSON())
		for _, id := range ids(ex.JSON()) {
			want++
			if slices.Contains(got, id) {
				found++
			}
		}
	}
	slices.Sort(took)
	o.NearP50Ms, o.NearP99Ms = took[len(took)/2], took[len(took)*99/100]
	o.Recall10 = float64(found) / float64(want)
}

// ids are the ids of a get's answer.
func ids(answer []byte) []int64 {
	var rows []struct {
		ID int64 `json:"id"`
	}
	var wrapped struct {
		Rows []struct {
			ID int64 `json:"id"`
		} `json:"rows"`
	}
	if json.Unmarshal(answer, &rows) != nil {
		if err := json.Unmarshal(answer, &wrapped); err != nil {
			log.Fatalf("answer %.200s: %v", answer, err)
		}
		rows = wrapped.Rows
	}
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// rss is the process's resident anonymous and file-backed memory, MB.
func rss() (anon, file float64) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		switch k {
		case "RssAnon":
			anon = kb / 1024
		case "RssFile":
			file = kb / 1024
		}
	}
	return anon, file
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
func mb(n int64) float64         { return float64(n) / (1 << 20) }

// compare builds a tenant with the build before, converts a copy with
// this one, and opens each with its own build, in turns.
func compare(before, after string, n, dim, rounds int, out string) {
	if before == "" || after == "" {
		log.Fatal("give -before and -after: this tool built at the revision before and at this one (make mapping-bench)")
	}
	dir, err := os.MkdirTemp("", "fenec-mapping-bench")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	tools := []struct{ name, bin, file string }{
		{"before", before, filepath.Join(dir, "before.fenec")},
		{"after", after, filepath.Join(dir, "after.fenec")},
	}
	// One tenant, built by the build before; this one opens it (the
	// previous format) and checkpoints it into its own.
	run(before, "-make", tools[0].file, "-n", strconv.Itoa(n), "-dim", strconv.Itoa(dim))
	run(after, "-make", tools[0].file, "-convert", tools[1].file)
	got := map[string][]opened{}
	for range rounds {
		for _, t := range tools {
			var o opened
			if err := json.Unmarshal([]byte(run(t.bin, "-open", t.file, "-dim", strconv.Itoa(dim))), &o); err != nil {
				log.Fatal(err)
			}
			got[t.name] = append(got[t.name], o)
		}
	}
	var b strings.Builder
	load, _ := os.ReadFile("/proc/loadavg")
	fi, _ := os.Stat(tools[0].file)
	fa, _ := os.Stat(tools[1].file)
	fmt.Fprintf(&b, "open of a tenant of %d × %d @hnsw(cosine), the build before against this one, each opened %d times in turns in a process of its own (medians); %s/%s, %d CPUs, load average %s\n",
		n, dim, rounds, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), strings.Join(strings.Fields(string(load))[:3], " "))
	fmt.Fprintf(&b, "file: before %.1f MB, after %.1f MB (%.2f×)\n\n", mb(fi.Size()), mb(fa.Size()), float64(fa.Size())/float64(fi.Size()))
	rows := []struct {
		what string
		f    func(opened) float64
	}{
		{"open ms", func(o opened) float64 { return o.OpenMs }},
		{"heap after open, MB (live, after GC)", func(o opened) float64 { return o.HeapMB }},
		{"resident anonymous after open, MB", func(o opened) float64 { return o.AnonMB }},
		{"resident file-backed after open, MB", func(o opened) float64 { return o.FileMB }},
		{"MemoryBytes (what --max-memory counts), MB", func(o opened) float64 { return o.EstimateMB }},
		{"first near, ms", func(o opened) float64 { return o.FirstNearMs }},
		{"resident anonymous after a near, MB", func(o opened) float64 { return o.AnonNearMB }},
		{"resident file-backed after a near, MB", func(o opened) float64 { return o.FileNearMB }},
		{fmt.Sprintf("near p50 of the next %d, ms", nears), func(o opened) float64 { return o.NearP50Ms }},
		{fmt.Sprintf("near p99 of the next %d, ms", nears), func(o opened) float64 { return o.NearP99Ms }},
		{fmt.Sprintf("recall@10 of %d (against exact)", recalls), func(o opened) float64 { return o.Recall10 }},
		{"resident anonymous, warm, MB", func(o opened) float64 { return o.AnonWarmMB }},
		{"resident file-backed, warm, MB", func(o opened) float64 { return o.FileWarmMB }},
		{"resident warm / file size", func(o opened) float64 { return o.WarmOfFile }},
		{"resident anonymous, warm, after FreeOSMemory", func(o opened) float64 { return o.AnonFreeMB }},
		{"resident then / file size", func(o opened) float64 { return o.FreeOfFile }},
	}
	fmt.Fprintf(&b, "%44s %10s %10s %14s\n", "", "before", "after", "after/before")
	for _, r := range rows {
		x, y := median(got["before"], r.f), median(got["after"], r.f)
		ratio := "-"
		if x != 0 {
			ratio = fmt.Sprintf("%.2f×", y/x)
		}
		prec := 1
		if y < 10 {
			prec = 3
		}
		fmt.Fprintf(&b, "%44s %10.*f %10.*f %14s\n", r.what, prec, x, prec, y, ratio)
	}
	plainTable(&b, before, after, n, rounds, dir)
	fmt.Print(b.String())
	if out != "" {
		if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

// plainTable builds a tenant of plain documents with the build before,
// converts a copy with this one, opens each with its own build in turns,
// and writes the second table to b.
func plainTable(b *strings.Builder, before, after string, n, rounds int, dir string) {
	fb, fa := filepath.Join(dir, "before-plain.fenec"), filepath.Join(dir, "after-plain.fenec")
	run(before, "-make", fb, "-plain", "-n", strconv.Itoa(n))
	run(after, "-make", fb, "-convert", fa)
	got := map[string][]openedPlain{}
	for range rounds {
		for _, t := range []struct{ name, bin, file string }{{"before", before, fb}, {"after", after, fa}} {
			var o openedPlain
			if err := json.Unmarshal([]byte(run(t.bin, "-open", t.file, "-plain")), &o); err != nil {
				log.Fatal(err)
			}
			got[t.name] = append(got[t.name], o)
		}
	}
	x, _ := os.Stat(fb)
	y, _ := os.Stat(fa)
	fmt.Fprintf(b, "\nopen of a tenant of %d documents (n int @sorted, k text @hash, t text @text, body text), the same way\n", n)
	fmt.Fprintf(b, "file: before %.1f MB, after %.1f MB (%.2f×)\n\n", mb(x.Size()), mb(y.Size()), float64(y.Size())/float64(x.Size()))
	rows := []struct {
		what string
		f    func(openedPlain) float64
	}{
		{"open ms", func(o openedPlain) float64 { return o.OpenMs }},
		{"heap after open, MB (live, after GC)", func(o openedPlain) float64 { return o.HeapMB }},
		{"resident anonymous after open, MB", func(o openedPlain) float64 { return o.AnonMB }},
		{"MemoryBytes (what --max-memory counts), MB", func(o openedPlain) float64 { return o.EstimateMB }},
		{"first match (@text), ms", func(o openedPlain) float64 { return o.FirstMatchMs }},
		{"second match, ms", func(o openedPlain) float64 { return o.MatchMs }},
		{"first lookup (@hash), ms", func(o openedPlain) float64 { return o.FirstHashMs }},
		{"second lookup, ms", func(o openedPlain) float64 { return o.HashMs }},
		{"first range (@sorted), ms", func(o openedPlain) float64 { return o.FirstRangeMs }},
		{"second range, ms", func(o openedPlain) float64 { return o.RangeMs }},
		{"heap once all three read, MB", func(o openedPlain) float64 { return o.HeapAllMB }},
		{"MemoryBytes then, MB", func(o openedPlain) float64 { return o.EstimateAll }},
	}
	fmt.Fprintf(b, "%44s %10s %10s %14s\n", "", "before", "after", "after/before")
	for _, r := range rows {
		p, q := medianOf(got["before"], r.f), medianOf(got["after"], r.f)
		ratio := "-"
		if p != 0 {
			ratio = fmt.Sprintf("%.2f×", q/p)
		}
		prec := 1
		if q < 10 {
			prec = 3
		}
		fmt.Fprintf(b, "%44s %10.*f %10.*f %14s\n", r.what, prec, p, prec, q, ratio)
	}
}

// medianOf is the median of f over xs.
func medianOf[T any](xs []T, f func(T) float64) float64 {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func median(os []opened, f func(opened) float64) float64 {
	v := make([]float64, len(os))
	for i, o := range os {
		v[i] = f(o)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// run runs bin with args and returns its standard output.
func run(bin string, args ...string) string {
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		log.Fatalf("%s %v: %v", bin, args, err)
	}
	return string(b)
}
