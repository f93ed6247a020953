package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fenec-go/fenec/bench/internal/benchkit"
	"github.com/fenec-go/fenec/global"
)

// routedAdmin is the admin token of the node the routed reads reach.
const routedAdmin = "bench-directory-admin"

// routedRead is the keyed read wrk sends through each router.
const routedRead = "/t/hot/kv?k=eq.1"

// routedResult is the routed read's figures through each router, medians
// over the rounds.
type routedResult struct {
	rounds             int
	small, big         benchkit.WrkResult
	ratioRPS, ratioP50 float64 // big over small, the median of each round's
}

// routed measures the lookup as deployed: a keyed read through a router
// whose copy holds a directory of few tenants, against one whose copy
// holds bigStore's many, wrk the client at 16 connections, the two in
// turns. Both are standbys (fenec-shard --standby --directory), each its
// own process over its own directory; the tenant read, "hot", is placed
// in both on one fenec-node process that holds its file. The routers
// differ in nothing but their copy's size.
func routed(ctx context.Context, wrk string, rounds int, bigStore *global.Store, bigURLs []string, dir string) (routedResult, error) {
	res := routedResult{rounds: rounds}
	nodeBin, shardBin, err := benchkit.BuildBinaries(ctx, filepath.Join(dir, "routed-bin"))
	if err != nil {
		return res, err
	}
	node, addr, err := benchkit.StartNodeProc(nodeBin, filepath.Join(dir, "routed-node"), "real", routedAdmin)
	if err != nil {
		return res, err
	}
	defer node.Stop()
	base := "http://" + addr
	c := &http.Client{Timeout: 10 * time.Second}
	for _, step := range []struct {
		method, path, token, body string
		want                      int
	}{
		{"PUT", "/_admin/tenants/hot", routedAdmin, "", http.StatusCreated},
		{"POST", "/t/hot/query", "", `{"query": "create collection kv (k int @unique, v text)"}`, http.StatusOK},
		{"POST", "/t/hot/kv", "", `{"k": 1, "v": "one"}`, http.StatusCreated},
	} {
		if _, err := benchkit.Call(c, step.method, base+step.path, step.token, step.body, step.want); err != nil {
			return res, err
		}
	}
	small, err := smallDirectory(ctx, filepath.Join(dir, "routed-etcd"))
	if err != nil {
		return res, err
	}
	defer small.close()
	for _, s := range []*global.Store{small.store, bigStore} {
		if err := placeHot(ctx, s, base); err != nil {
			return res, err
		}
	}
	var urls []string
	for i, u := range [][]string{small.urls, bigURLs} {
		raddr, err := benchkit.FreeAddr()
		if err != nil {
			return res, err
		}
		p, err := benchkit.StartProc("fenec-shard", nil, shardBin, "--listen", raddr, "--standby",
			"--id", fmt.Sprintf("routed-%d", i), "--directory", strings.Join(u, ","))
		if err != nil {
			return res, err
		}
		defer p.Stop()
		urls = append(urls, "http://"+raddr)
		if err := p.WaitHTTP(urls[i] + "/_ready"); err != nil {
			return res, err
		}
	}
	script := filepath.Join(dir, "routed.lua")
	if err := os.WriteFile(script, []byte(benchkit.WrkDone), 0o644); err != nil {
		return res, err
	}
	names := []string{"router over 10", "router over the big directory"}
	for i, u := range urls { // warm-up
		if _, err := benchkit.RunWrk(ctx, wrk, script, u+routedRead, names[i], 16, time.Second); err != nil {
			return res, err
		}
	}
	var got [2][]benchkit.WrkResult
	var rps, p50 []float64
	for round := range rounds {
		var r [2]benchkit.WrkResult
		for k := range 2 {
			i := (k + round) % 2
			if r[i], err = benchkit.RunWrk(ctx, wrk, script, urls[i]+routedRead, names[i], 16, 3*time.Second); err != nil {
				return res, err
			}
			got[i] = append(got[i], r[i])
		}
		rps = append(rps, r[1].RPS/r[0].RPS)
		p50 = append(p50, r[1].P50/r[0].P50)
	}
	res.small, res.big = medianRun(got[0]), medianRun(got[1])
	res.ratioRPS, res.ratioP50 = benchkit.Median(rps), benchkit.Median(p50)
	return res, nil
}

// placeHot records the node at addr as "real" in s and places "hot" on it.
func placeHot(ctx context.Context, s *global.Store, addr string) error {
	if _, err := s.Txn().PutNode("real", 0, global.Node{Addr: addr, Token: routedAdmin, Region: "eu"}).Commit(ctx); err != nil {
		return fmt.Errorf("record the node: %w", err)
	}
	n, err := s.GetNode(ctx, "real")
	if err != nil {
		return err
	}
	_, err = s.PlaceTenant(ctx, "hot", global.Tenant{Node: "real", State: global.StateActive, Lineage: 1}, n.Rev)
	return err
}

// memberDir is an embedded etcd member of the bench's own, its directory
// opened.
type memberDir struct {
	m     *global.Embedded
	d     global.Directory
	store *global.Store
	urls  []string
}

func (m *memberDir) close() {
	m.d.Close()
	m.m.Close()
}

// startMember starts an embedded etcd member in dir, opens its directory
// and writes region eu and its nodes there.
func startMember(ctx context.Context, dir string) (*memberDir, error) {
	cfgE := global.DefaultEmbedConfig(dir)
	cfgE.ClientURL, cfgE.PeerURL = "http://127.0.0.1:0", "http://127.0.0.1:0"
	m, err := global.StartEmbedded(ctx, cfgE)
	if err != nil {
		return nil, err
	}
	if err := m.WaitReady(ctx); err != nil {
		m.Close()
		return nil, err
	}
	d, err := m.Open(ctx, global.DefaultPrefix)
	if err != nil {
		m.Close()
		return nil, err
	}
	md := &memberDir{m: m, d: d, store: global.NewStore(d), urls: m.ClientURLs()}
	if err := seedNodes(ctx, md.store); err != nil {
		md.close()
		return nil, err
	}
	return md, nil
}

// smallDirectory starts a second member holding what the small size of
// the bench holds: region eu, its nodes, 10 tenants.
func smallDirectory(ctx context.Context, dir string) (*memberDir, error) {
	md, err := startMember(ctx, dir)
	if err != nil {
		return nil, err
	}
	if _, err := placeSeq(ctx, md.store, 0, 10); err != nil {
		md.close()
		return nil, err
	}
	return md, nil
}

// medianRun is the median over runs of each figure the table shows.
func medianRun(rs []benchkit.WrkResult) benchkit.WrkResult {
	var p50, p99, rps []float64
	for _, r := range rs {
		p50, p99, rps = append(p50, r.P50), append(p99, r.P99), append(rps, r.RPS)
	}
	return benchkit.WrkResult{P50: benchkit.Median(p50), P99: benchkit.Median(p99), RPS: benchkit.Median(rps)}
}
