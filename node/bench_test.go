package node

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

// BenchmarkKeyedReadHTTP is one keyed read through /query on keep-alive.
func BenchmarkKeyedReadHTTP(b *testing.B) {
	n := startNode(b, nil)
	n.mkTenant("a")
	n.q("a", "create collection c (name text)")
	n.q("a", `put c [{name: "x"}, {name: "y"}]`)
	body := []byte(`{"query":"get c where id = $1","params":[1]}`)
	url := n.url + "/t/a/query"
	for b.Loop() {
		res, err := n.client.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			b.Fatal(res.StatusCode)
		}
	}
}

// BenchmarkKeyedReadHTTPParallel is keyed reads from 16 clients.
func BenchmarkKeyedReadHTTPParallel(b *testing.B) {
	n := startNode(b, nil)
	n.mkTenant("a")
	n.q("a", "create collection c (name text)")
	n.q("a", `put c [{name: "x"}, {name: "y"}]`)
	body := []byte(`{"query":"get c where id = $1","params":[1]}`)
	url := n.url + "/t/a/query"
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := n.client.Post(url, "application/json", bytes.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	})
}
