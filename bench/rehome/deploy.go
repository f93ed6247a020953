package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fenec-go/fenec/bench/internal/benchkit"
)

const (
	adminToken = "bench-admin-token"
	replToken  = "bench-replication-token"
	tenant     = "t0"
)

// deployment is two regions leased by the global tier: eu1 in eu, us1 in
// us, and g, the global tier's leading router, in eu. Each side looks node
// names up at a name server of its own: eu's names eu1 127.0.0.1 (the node
// itself) and us1 127.0.0.2 (a link in front of it on the same port), us's
// the other way round. So g's calls to us1 and us1's feed from eu1 (and,
// moved, eu1's from us1, g's forwarding to us1) cross the link.
type deployment struct {
	cfg   config
	mode  string
	dir   string
	c     *http.Client
	g     string            // g's URL
	nodes map[string]string // each node's own address
	procs []*benchkit.Proc
	sides *benchkit.Sides
	bytes int64 // the tenant's bytes on disk once loaded
	w     *writer
	at    string // the node the tenant is on
}

func (d *deployment) close() {
	if d.w != nil {
		d.w.stop()
	}
	for _, p := range slices.Backward(d.procs) {
		p.Stop()
	}
	if d.sides != nil {
		d.sides.Close()
	}
	d.c.CloseIdleConnections()
	os.RemoveAll(d.dir)
}

// startDeployment starts every process of one deployment (g with
// --move-image for mode image), places the tenant on eu1 and loads it.
func startDeployment(cfg config, mode string) (*deployment, error) {
	d := &deployment{cfg: cfg, mode: mode, nodes: map[string]string{}, at: "eu1",
		c: &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
	var err error
	if d.dir, err = os.MkdirTemp("", "fenec-rehome-bench-"); err != nil {
		return d, err
	}
	if d.sides, err = benchkit.StartSides(cfg.delay, "eu", "us"); err != nil {
		return d, err
	}
	args := []string{"--auto-failover", "2", "--insecure", "--resolver", d.sides.Resolver("eu")}
	if mode == "image" {
		args = append(args, "--move-image")
	}
	g, err := benchkit.StartRouterProc(cfg.shardBin, filepath.Join(d.dir, "g"), "g", args...)
	if err != nil {
		return d, fmt.Errorf("router g: %w", err)
	}
	d.procs = append(d.procs, g.P)
	d.g = g.URL
	if err := d.startNode("eu1", "eu"); err != nil {
		return d, err
	}
	if err := d.startNode("us1", "us"); err != nil {
		return d, err
	}
	if err := benchkit.WaitLeased(d.c, d.g, 30*time.Second, "eu1", "us1"); err != nil {
		return d, err
	}
	return d, d.load()
}

// startNode starts node name of region, published on both sides of
// the link (Sides.Publish), and records it at g by that name.
func (d *deployment) startNode(name, region string) error {
	p, addr, url, err := d.sides.StartNode(d.cfg.nodeBin, filepath.Join(d.dir, name), name, region, adminToken,
		"--replication-token", replToken, "--lease", "--sync", "always")
	if err != nil {
		return err
	}
	d.procs = append(d.procs, p)
	d.nodes[name] = addr
	body := fmt.Sprintf(`{"addr":%q,"token":%q,"region":%q}`, url, adminToken, region)
	_, err = benchkit.Call(d.c, "PUT", d.g+"/_shard/nodes/"+name, "", body, 201)
	return err
}

// load places the tenant on eu1 and puts its documents, in batches
// through g, then reads its bytes on disk.
func (d *deployment) load() error {
	if _, err := benchkit.Call(d.c, "PUT", d.g+"/_shard/tenants/"+tenant, "", `{"node":"eu1"}`, 201); err != nil {
		return err
	}
	for _, q := range []string{"create collection c (k int @unique)",
		fmt.Sprintf("create collection docs (title text, v vector<%d>)", d.cfg.dims)} {
		if _, err := benchkit.Call(d.c, "POST", d.g+"/t/"+tenant+"/query", "", benchkit.QueryBody(q), 200); err != nil {
			return err
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const batch = 500
	for i := 0; i < d.cfg.docs; i += batch {
		var b strings.Builder
		b.WriteString("[")
		for j := i; j < min(i+batch, d.cfg.docs); j++ {
			if j > i {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"title":"document %d","v":[`, j)
			for k := range d.cfg.dims {
				if k > 0 {
					b.WriteString(",")
				}
				b.WriteString(strconv.FormatFloat(rng.Float64(), 'f', 5, 64))
			}
			b.WriteString("]}")
		}
		b.WriteString("]")
		if _, err := benchkit.Call(d.c, "POST", d.g+"/t/"+tenant+"/docs", "", b.String(), 201); err != nil {
			return fmt.Errorf("load documents %d..: %w", i, err)
		}
	}
	var sizes map[string]int64
	if err := benchkit.CallJSON(d.c, "GET", "http://"+d.nodes["eu1"]+"/_admin/sizes", adminToken, "", 200, &sizes); err == nil {
		d.bytes = sizes[tenant]
	}
	return nil
}

// startWriter starts the deployment's writer through g.
func (d *deployment) startWriter(rate int) {
	d.w = startWriter(d.g, tenant, time.Second/time.Duration(rate))
}

// moved is one move as measured.
type moved struct {
	to      string
	gap     time.Duration // the longest gap between acknowledged writes
	gapEnd  int64         // when it ended, in ms from the move's start
	answer  int64         // when the move answered, in ms from its start
	ms      int64         // the move's answer: how long it took
	pauseMS int64         // and how long the source refused writes
	by      string
}

// move moves the tenant to node to, then lets the writer run a second
// more, and measures the longest gap between acknowledged writes from
// the move's start to then.
func (d *deployment) move(to string) (moved, error) {
	time.Sleep(time.Second) // a quiet second before, as after
	began := time.Now()
	var ans struct {
		By      string `json:"by"`
		MS      int64  `json:"ms"`
		PauseMS int64  `json:"pause_ms"`
	}
	if err := benchkit.CallJSON(d.c, "POST", d.g+"/_shard/tenants/"+tenant+"/move", "", fmt.Sprintf(`{"to":%q}`, to), 200, &ans); err != nil {
		return moved{}, err
	}
	answered := time.Since(began)
	d.at = to
	time.Sleep(time.Second)
	gap, end := d.w.longestGap(began, time.Now())
	return moved{to: to, gap: gap, gapEnd: end.Sub(began).Milliseconds(), answer: answered.Milliseconds(),
		ms: ans.MS, pauseMS: ans.PauseMS, by: ans.By}, nil
}

// lost counts the acknowledged writes not on the tenant's node, read
// there straight.
func (d *deployment) lost() (int, error) {
	have := map[int]bool{}
	for from := 0; ; {
		q := benchkit.QueryBody(fmt.Sprintf("get c select k where k >= %d order k limit 10000", from))
		b, err := benchkit.Call(d.c, "POST", "http://"+d.nodes[d.at]+"/t/"+tenant+"/query", "", q, 200)
		if err != nil {
			return 0, err
		}
		var rows []struct {
			K int `json:"k"`
		}
		if err := json.Unmarshal(b, &rows); err != nil {
			return 0, err
		}
		for _, r := range rows {
			have[r.K] = true
		}
		if len(rows) < 10000 {
			break
		}
		from = rows[len(rows)-1].K + 1
	}
	n := 0
	for _, k := range d.w.ackedKeys() {
		if !have[k] {
			n++
		}
	}
	return n, nil
}
