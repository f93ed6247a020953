package main

import (
	"github.com/fenec-go/fenec/bench/internal/benchkit"

	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
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
	nodeBin, shardBin, err := benchkit.BuildBinaries(ctx, filepath.Join(dir, "bin"))
	if err != nil {
		return err
	}
	var procs []*benchkit.Proc
	defer func() {
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].Stop()
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
		p, addr, err := benchkit.StartNodeProc(nodeBin, filepath.Join(dir, name), name, adminToken, extra...)
		if err != nil {
			return err
		}
		procs = append(procs, p)
		nodes[name] = addr
	}
	r, err := benchkit.StartRouterProc(shardBin, dir, "bench-move")
	if err != nil {
		return err
	}
	procs = append(procs, r.P)
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer c.CloseIdleConnections()
	for _, name := range names {
		body := fmt.Sprintf(`{"addr":"http://%s","token":%q,"region":"bench"}`, nodes[name], adminToken)
		if err := call(c, "PUT", r.URL+"/_shard/nodes/"+name, body, 201); err != nil {
			return err
		}
	}
	pids := make([]int, len(procs))
	for i, p := range procs {
		pids[i] = p.PID()
	}
	rig := moveRig{router: r.URL, source: "http://" + nodes["n1"], shape: "each a process of its own",
		cpu: func() time.Duration { return procsCPU(pids) },
		parts: func() map[string]procStat {
			return map[string]procStat{"n1": readProcStat(procs[0].PID()), "n2": readProcStat(procs[1].PID()), "router": readProcStat(r.P.PID())}
		}}
	fmt.Fprintf(w, "%s\n", faultCost())
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
	return moveFaults(ctx, cfg.moveFaultsOut, c, rig, nodeBin, dir)
}

// moveAgain moves mv to node to and times it and the first near there.
func moveAgain(w io.Writer, c *http.Client, rig moveRig, probe, to string, nth int) error {
	cpu0, parts0 := rig.cpu(), rig.readParts()
	start := time.Now()
	if _, err := callBody(c, "POST", rig.router+"/_shard/tenants/mv/move", fmt.Sprintf(`{"to":%q}`, to), 200); err != nil {
		return err
	}
	wall := time.Since(start)
	cpu, parts := rig.cpu()-cpu0, rig.partsSince(parts0)
	start = time.Now()
	if _, err := callBody(c, "POST", rig.router+"/t/mv/query", probe, 200); err != nil {
		return err
	}
	near := time.Since(start)
	steady, err := nearMedian(c, rig.router, probe)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  move %d, back onto %s (the node that held it before): %d ms, %d ms of CPU; first near there %.1f ms, then %.1f ms (median of %d)\n",
		nth, to, wall.Milliseconds(), cpu.Milliseconds(), ms(near), ms(steady), nearsAfter)
	fmt.Fprintf(w, "    by process %s\n", parts)
	return nil
}

// procStat is what a process has used so far: CPU (user and system) and
// minor page faults, each a page of memory it touched first.
type procStat struct {
	cpu    time.Duration
	faults int64
}

// readProcStat reads pid's procStat from /proc; zero where it cannot.
func readProcStat(pid int) procStat {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}
	}
	// Fields after the command's closing parenthesis: state is the first,
	// minflt the 8th, utime and stime the 12th and 13th.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return procStat{}
	}
	minflt, _ := strconv.ParseInt(f[7], 10, 64)
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return procStat{cpu: time.Duration(u+st) * time.Second / clockTicks, faults: minflt}
}

// readParts is rig.parts(), nil in process.
func (rig moveRig) readParts() map[string]procStat {
	if rig.parts == nil {
		return nil
	}
	return rig.parts()
}

// partsSince says what each process used since before, target first
// (the one that used the most CPU); empty in process.
func (rig moveRig) partsSince(before map[string]procStat) string {
	if before == nil {
		return ""
	}
	now := rig.parts()
	names := slices.Sorted(maps.Keys(now))
	slices.SortStableFunc(names, func(a, b string) int {
		return cmp.Compare(now[b].cpu-before[b].cpu, now[a].cpu-before[a].cpu)
	})
	var out []string
	for _, n := range names {
		out = append(out, fmt.Sprintf("%s %d ms of CPU, %d page faults", n,
			(now[n].cpu-before[n].cpu).Milliseconds(), now[n].faults-before[n].faults))
	}
	return strings.Join(out, "; ")
}

// procsCPU is the CPU time (user and system) the processes have used, from
// /proc; zero where it cannot be read.
func procsCPU(pids []int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		sum += readProcStat(pid).cpu
	}
	return sum
}

// clockTicks is the kernel's USER_HZ, the unit of /proc's CPU times (100
// on Linux everywhere but a few old architectures).
const clockTicks = 100
