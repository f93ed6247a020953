package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/fenec-go/fenec/bench/internal/benchkit"
	"github.com/fenec-go/fenec/engine"
)

// The move bench: a tenant moved between two nodes, as deployed, its
// parts timed, its install taken in turns, its profile written.

// moveRig is where a move is measured: the router, the source node n1
// (its address, for what the bench sends it directly), the CPU the parts
// have used so far, and how they run.
type moveRig struct {
	router, source string
	cpu            func() time.Duration
	shape          string // "in this process", "each a process of its own"
	profile        bool   // the move's CPU profile is taken (the parts are in this process)
	// parts reads what each process has used so far, by name (nil: the
	// parts are in this process).
	parts func() map[string]procStat
}

// moveBench fills tenant "mv" on n1 with vectors, moves it to n2 through
// the router, and times the move and the first near on the target. It
// returns the near query it timed.
func moveBench(w io.Writer, cfg config, c *http.Client, rig moveRig) (string, error) {
	router := rig.router
	if err := call(c, "PUT", router+"/_shard/tenants/mv", `{"node":"n1"}`, 201); err != nil {
		return "", err
	}
	q := fmt.Sprintf(`{"query":"create collection v (e vector<%d> @hnsw(cosine))"}`, cfg.dims)
	if err := call(c, "POST", router+"/t/mv/query", q, 200); err != nil {
		return "", err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	vec := func() string {
		var b strings.Builder
		b.WriteByte('[')
		for i := range cfg.dims {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%.4f", rng.Float32()*2-1)
		}
		b.WriteByte(']')
		return b.String()
	}
	load := time.Now()
	direct := rig.source
	cached, err := os.ReadFile(cfg.moveImage)
	switch {
	case cfg.moveImage == "" || errors.Is(err, os.ErrNotExist):
		cached = nil
	case err != nil:
		return "", err
	}
	if cached != nil {
		// The image of an earlier run, restored in place of the empty
		// tenant (another tenant's lineage: forced); the probe's vector is
		// drawn as if the rows were.
		if _, err := benchkit.Call(c, "PUT", direct+"/_admin/tenants/mv/file?replace=true&force=true", adminToken, string(cached), 200); err != nil {
			return "", fmt.Errorf("restore %s: %w", cfg.moveImage, err)
		}
		for range cfg.moveDocs {
			vec()
		}
		// Opened by a first read, as a tenant loaded row by row is.
		if _, err := callBody(c, "POST", router+"/t/mv/query", `{"query":"get v limit 1"}`, 200); err != nil {
			return "", err
		}
	}
	for done := 0; cached == nil && done < cfg.moveDocs; {
		step := min(1000, cfg.moveDocs-done)
		var rows []string
		for range step {
			rows = append(rows, `{"e":`+vec()+`}`)
		}
		if err := call(c, "POST", direct+"/t/mv/v", "["+strings.Join(rows, ",")+"]", 201); err != nil {
			return "", err
		}
		done += step
	}
	loadTime := time.Since(load)
	how := "loaded in %.1f s, 1 000 a block, straight to the node"
	if cached != nil {
		how = "restored from " + filepath.Base(cfg.moveImage) + " in %.1f s"
	} else if cfg.moveImage != "" {
		img, err := benchkit.Call(c, "GET", direct+"/_admin/tenants/mv/file", adminToken, "", 200)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(cfg.moveImage, img, 0o644); err != nil {
			return "", err
		}
	}
	probe := fmt.Sprintf(`{"query":"get v select id near e %s limit 10"}`, vec())
	warm := time.Now()
	before, err := callBody(c, "POST", router+"/t/mv/query", probe, 200)
	if err != nil {
		return "", err
	}
	firstOnSource := time.Since(warm)

	var prof bytes.Buffer
	profiling := rig.profile && cfg.moveProfileOut != "" && pprof.StartCPUProfile(&prof) == nil
	cpu0, parts0 := rig.cpu(), rig.readParts()
	start := time.Now()
	b, err := callBody(c, "POST", router+"/_shard/tenants/mv/move", `{"to":"n2"}`, 200)
	moveWall := time.Since(start)
	moveCPU, parts := rig.cpu()-cpu0, rig.partsSince(parts0)
	answered := time.Now()
	if profiling {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return "", err
	}
	var ans struct {
		Bytes int64 `json:"bytes"`
		MS    int64 `json:"ms"`
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		return "", err
	}
	start = time.Now()
	after, err := callBody(c, "POST", router+"/t/mv/query", probe, 200)
	if err != nil {
		return "", err
	}
	firstNear := time.Since(start)
	steady, err := nearMedian(c, router, probe)
	if err != nil {
		return "", err
	}
	gone := sourceGone(c, direct, answered)
	// Written once the nears are timed: go tool pprof, run in between,
	// would be what the first near waits behind.
	if profiling {
		if err := moveProfile(cfg.moveProfileOut, prof.Bytes(), moveWall); err != nil {
			return "", err
		}
	}
	same := "the same 10 ids as on the source"
	if !bytes.Equal(stripScores(before), stripScores(after)) {
		same = "OTHER ids than on the source"
	}
	fmt.Fprintf(w, "move of a tenant of %d × %d @hnsw(cosine), nodes and router %s ("+how+"); load average %s\n", cfg.moveDocs, cfg.dims, rig.shape, loadTime.Seconds(), benchkit.LoadAvg())
	fmt.Fprintf(w, "  image                %.1f MB\n", float64(ans.Bytes)/1e6)
	fmt.Fprintf(w, "  move (router's ms)   %d ms (%s)\n", ans.MS, gone)
	fmt.Fprintf(w, "  move (client's wall) %d ms, %d ms of CPU (source, router and target, user and system)\n", moveWall.Milliseconds(), moveCPU.Milliseconds())
	if parts != "" {
		fmt.Fprintf(w, "  by process           %s\n", parts)
	}
	fmt.Fprintf(w, "  first near on target %.1f ms (its first request after the move), then %.1f ms (the median of the next %d); %s\n", ms(firstNear), ms(steady), nearsAfter, same)
	fmt.Fprintf(w, "  first near on source %.1f ms (open already)\n", ms(firstOnSource))
	return probe, nil
}

// nearsAfter is how many nears follow a move's first, for their median.
const nearsAfter = 20

// nearMedian sends probe through the router nearsAfter times, one after
// the other, and returns the median time: what a near costs the tenant
// where it is, against which its first is judged.
func nearMedian(c *http.Client, router, probe string) (time.Duration, error) {
	var d []time.Duration
	for range nearsAfter {
		start := time.Now()
		if _, err := callBody(c, "POST", router+"/t/mv/query", probe, 200); err != nil {
			return 0, err
		}
		d = append(d, time.Since(start))
	}
	return benchkit.Percentile(d, 0.50), nil
}

// sourceGone waits (at most a second) for the source node to have deleted
// tenant mv, which it does a grace after the move's answer, and says when
// it saw it gone.
func sourceGone(c *http.Client, source string, answered time.Time) string {
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		b, err := benchkit.Call(c, "GET", source+"/_admin/tenants", adminToken, "", 200)
		if err == nil && !bytes.Contains(b, []byte(`"mv"`)) {
			return fmt.Sprintf("source seen deleted %d ms after the answer", time.Since(answered).Milliseconds())
		}
	}
	return "source NOT deleted a second after the answer"
}

// processCPU is the CPU time this process has used, user and system: a
// move's cost that the machine's other load does not change as much as
// its wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// n2URL finds the target node's address in the router's node list.
func n2URL(router string, c *http.Client) string {
	b, err := callBody(c, "GET", router+"/_shard/nodes", "", 200)
	if err != nil {
		return ""
	}
	var nodes []struct{ Name, Addr string }
	if json.Unmarshal(b, &nodes) != nil {
		return ""
	}
	for _, n := range nodes {
		if n.Name == "n2" {
			return n.Addr
		}
	}
	return ""
}

// moveParts times a move's two halves alone on the target node: the
// image read out whole, and the same image installed as a new tenant.
func moveParts(w io.Writer, c *http.Client, node string) error {
	if node == "" {
		return errors.New("target node not found")
	}
	req, _ := http.NewRequest("GET", node+"/_admin/tenants/mv/file", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	start := time.Now()
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	img, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != 200 {
		return fmt.Errorf("image out: %d %v", res.StatusCode, err)
	}
	out := time.Since(start)
	req, _ = http.NewRequest("PUT", node+"/_admin/tenants/mv-copy/file", bytes.NewReader(img))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	start = time.Now()
	res, err = c.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 201 {
		return fmt.Errorf("image in: %d", res.StatusCode)
	}
	in := time.Since(start)
	fmt.Fprintf(w, "  of which, alone on the target: image out %d ms, image in (installed as a new tenant) %d ms\n",
		out.Milliseconds(), in.Milliseconds())
	return installTurns(w, img)
}

// installTurns installs the same image in this process in turns, three
// rounds: as a node did before (engine.Install, which opens the copy to
// verify it and closes it, then engine.Open) and as it does now
// (engine.InstallOpen: decoded as it arrives, read once).
func installTurns(w io.Writer, img []byte) error {
	dir, err := os.MkdirTemp("", "fenec-install-turns-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	opts := engine.Options{NoSweep: true, Logger: slog.New(slog.DiscardHandler)}
	var before, now []time.Duration
	for r := range 3 {
		p := filepath.Join(dir, fmt.Sprintf("before-%d.fenec", r))
		start := time.Now()
		if err := engine.Install(p, bytes.NewReader(img)); err != nil {
			return err
		}
		db, err := engine.Open(p, opts)
		if err != nil {
			return err
		}
		before = append(before, time.Since(start))
		db.Close()
		p = filepath.Join(dir, fmt.Sprintf("now-%d.fenec", r))
		start = time.Now()
		if db, err = engine.InstallOpen(p, bytes.NewReader(img), opts); err != nil {
			return err
		}
		now = append(now, time.Since(start))
		db.Close()
	}
	msList := func(d []time.Duration) string {
		var parts []string
		for _, x := range d {
			parts = append(parts, fmt.Sprintf("%d", x.Milliseconds()))
		}
		return strings.Join(parts, ", ")
	}
	fmt.Fprintf(w, "  the image installed and opened in this process, in turns: Install then Open (as before) %s ms; InstallOpen %s ms\n",
		msList(before), msList(now))
	return nil
}

// moveProfile writes the top of the move's CPU profile, cumulative and
// flat, to out.
func moveProfile(out string, raw []byte, wall time.Duration) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	f, err := os.CreateTemp("", "fenec-move-*.pprof")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(raw); err != nil {
		f.Close()
		return err
	}
	f.Close()
	var text bytes.Buffer
	fmt.Fprintf(&text, "CPU profile of the move (%d ms wall): the source node, the router and the target node are all in the bench's process, GOMAXPROCS %d; load average %s\n\n",
		wall.Milliseconds(), runtime.GOMAXPROCS(0), benchkit.LoadAvg())
	for _, mode := range []string{"-top -cum", "-top"} {
		args := append([]string{"tool", "pprof"}, strings.Fields(mode)...)
		args = append(args, "-nodecount=50", exe, f.Name())
		b, err := exec.Command(benchkit.GoBin(), args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("go tool pprof: %w\n%s", err, b)
		}
		fmt.Fprintf(&text, "$ go tool pprof %s -nodecount=50\n%s\n", mode, b)
	}
	return os.WriteFile(out, text.Bytes(), 0o644)
}
