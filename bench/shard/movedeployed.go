package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// moveDeployed measures the move as deployed: two fenec-node processes and
// a fenec-shard process. The first move lands in a node process that has
// never held the tenant (its memory fresh from the system, as a node
// taking a tenant it never had); the tenant is then moved back and forth
// twice more, each time onto the node that held it last. Last it is moved
// onto four more fresh nodes, in turns with --huge-pages and without, so
// the table says what the advice does on this host.
func moveDeployed(ctx context.Context, w io.Writer, cfg config, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	nodeBin, shardBin, err := buildBinaries(ctx, filepath.Join(dir, "bin"))
	if err != nil {
		return err
	}
	var procs []*proc
	defer func() {
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].stop()
		}
	}()
	nodes := map[string]string{}
	fresh := []struct {
		name string
		huge bool
	}{{"h1", true}, {"p1", false}, {"h2", true}, {"p2", false}}
	names := []string{"n1", "n2"}
	huge := map[string]bool{}
	for _, f := range fresh {
		names = append(names, f.name)
		huge[f.name] = f.huge
	}
	for _, name := range names {
		var extra []string
		if huge[name] {
			extra = []string{"--huge-pages"}
		}
		p, addr, err := startNodeProc(nodeBin, filepath.Join(dir, name), name, extra...)
		if err != nil {
			return err
		}
		procs = append(procs, p)
		nodes[name] = addr
	}
	r, err := startRouterProc(shardBin, dir, "bench-move")
	if err != nil {
		return err
	}
	procs = append(procs, r.p)
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer c.CloseIdleConnections()
	for _, name := range names {
		body := fmt.Sprintf(`{"addr":"http://%s","token":%q,"region":"bench"}`, nodes[name], adminToken)
		if err := call(c, "PUT", r.url+"/_shard/nodes/"+name, body, 201); err != nil {
			return err
		}
	}
	pids := make([]int, len(procs))
	for i, p := range procs {
		pids[i] = p.pid()
	}
	rig := moveRig{router: r.url, source: "http://" + nodes["n1"], shape: "each a process of its own",
		cpu: func() time.Duration { return procsCPU(pids) }}
	probe, err := moveBench(w, cfg, c, rig)
	if err != nil {
		return err
	}
	for i, to := range []string{"n1", "n2"} {
		if err := moveAgain(w, c, rig, probe, to, i+2); err != nil {
			return err
		}
	}
	var with, without []string
	for _, f := range fresh {
		start := time.Now()
		if _, err := callBody(c, "POST", rig.router+"/_shard/tenants/mv/move", fmt.Sprintf(`{"to":%q}`, f.name), 200); err != nil {
			return err
		}
		ms := strconv.FormatInt(time.Since(start).Milliseconds(), 10)
		if f.huge {
			with = append(with, ms)
		} else {
			without = append(without, ms)
		}
	}
	fmt.Fprintf(w, "  onto nodes that never held it, in turns: with --huge-pages %s ms; without (the default, as above) %s ms\n",
		strings.Join(with, ", "), strings.Join(without, ", "))
	return nil
}

// moveAgain moves mv to node to and times it and the first near there.
func moveAgain(w io.Writer, c *http.Client, rig moveRig, probe, to string, nth int) error {
	cpu0 := rig.cpu()
	start := time.Now()
	if _, err := callBody(c, "POST", rig.router+"/_shard/tenants/mv/move", fmt.Sprintf(`{"to":%q}`, to), 200); err != nil {
		return err
	}
	wall := time.Since(start)
	cpu := rig.cpu() - cpu0
	start = time.Now()
	if _, err := callBody(c, "POST", rig.router+"/t/mv/query", probe, 200); err != nil {
		return err
	}
	near := time.Since(start)
	fmt.Fprintf(w, "  move %d, back onto %s (the node that held it before): %d ms, %d ms of CPU; first near there %.1f ms\n",
		nth, to, wall.Milliseconds(), cpu.Milliseconds(), ms(near))
	return nil
}

// procsCPU is the CPU time (user and system) the processes have used, from
// /proc; zero where it cannot be read.
func procsCPU(pids []int) time.Duration {
	var ticks int64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0
		}
		// Fields after the command's closing parenthesis: state is the
		// first, utime and stime the 12th and 13th.
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 13 {
			return 0
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + s
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// clockTicks is the kernel's USER_HZ, the unit of /proc's CPU times (100
// on Linux everywhere but a few old architectures).
const clockTicks = 100
