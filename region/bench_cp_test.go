package region

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkMoveCP moves one tenant back and forth between two nodes
// through the router: docs documents (FENEC_BENCH_DOCS, default 20 000)
// with a 128-dimension vector under an hnsw index, the graph travelling in
// the image. It reports the image's size and each move's end-to-end time,
// and the first query on the target after the move.
func BenchmarkMoveCP(b *testing.B) {
	docs := 20000
	if v, err := strconv.Atoi(os.Getenv("FENEC_BENCH_DOCS")); err == nil && v > 0 {
		docs = v
	}
	r := startCPRouter(b, nil)
	n1, n2 := startCPNode(b), startCPNode(b)
	r.addNode(b, "n1", n1)
	r.addNode(b, "n2", n2)
	r.place(b, "bm", "n1")
	r.mustQuery(b, "bm", "create collection docs (title text, v vector<128> @hnsw(l2))")
	rng := rand.New(rand.NewPCG(1, 2))
	const chunk = 500
	for i := 0; i < docs; i += chunk {
		var sb strings.Builder
		sb.WriteByte('[')
		for j := i; j < min(i+chunk, docs); j++ {
			if j > i {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"title": "doc %d", "v": [`, j)
			for k := range 128 {
				if k > 0 {
					sb.WriteByte(',')
				}
				sb.WriteString(strconv.FormatFloat(rng.Float64(), 'f', 5, 64))
			}
			sb.WriteString("]}")
		}
		sb.WriteByte(']')
		if st, _, body := r.data(b, http.MethodPost, "/t/bm/docs", sb.String(), nil); st != http.StatusCreated {
			b.Fatalf("load: %d %s", st, body)
		}
	}
	probe := "get docs select id near v [" + strings.TrimSuffix(strings.Repeat("0.5,", 128), ",") + "] limit 10"
	r.mustQuery(b, "bm", probe)

	where := []string{"n2", "n1"}
	var bytes int64
	var firstQuery time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		var ans moveAnswer
		st, body := r.shard(b, http.MethodPost, "tenants/bm/move", map[string]any{"to": where[i%2]}, &ans)
		if st != http.StatusOK {
			b.Fatalf("move: %d %s", st, body)
		}
		bytes = ans.Bytes
		b.StopTimer()
		start := time.Now()
		out := r.mustQuery(b, "bm", probe)
		firstQuery += time.Since(start)
		var rows []json.RawMessage
		if err := json.Unmarshal(out, &rows); err != nil || len(rows) != 10 {
			b.Fatalf("near after move: %s", out)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(bytes)/1e6, "image-MB")
	b.ReportMetric(float64(firstQuery.Milliseconds())/float64(b.N), "first-query-ms")
}

// BenchmarkRouterCP is one small read through the whole router (request
// id, placement lookup over the watcher's view, forwarding) against the
// same read straight to the node and through the forwarder alone, side by
// side in one run.
func BenchmarkRouterCP(b *testing.B) {
	r := startCPRouter(b, nil)
	n1 := startCPNode(b)
	r.addNode(b, "n1", n1)
	r.place(b, "hot", "n1")
	r.mustQuery(b, "hot", "create collection c (a int)")
	r.mustQuery(b, "hot", "put c {a: 1}")
	// The forwarder alone, without the router's own layer around it
	// (request id, routing by path).
	fwdOnly := httptest.NewServer(r.rt.fwd)
	b.Cleanup(fwdOnly.Close)
	for _, c := range []struct{ name, base string }{{"direct", n1.URL()}, {"forwarder", fwdOnly.URL}, {"router", r.url}} {
		b.Run(c.name, func(b *testing.B) {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			defer client.CloseIdleConnections()
			url := c.base + "/t/hot/c?a=eq.1"
			for b.Loop() {
				resp, err := client.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}
