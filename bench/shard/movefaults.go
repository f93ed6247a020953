package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/fenec-go/fenec/bench/internal/benchkit"
)

// moveFaults moves mv onto one more node process that never held it, with
// perf recording the page faults of that process and where in the code
// each was taken, and writes perf's report to out: where the memory a
// fresh node touches for the first time goes, which is what the move as
// deployed costs past the move in process. Nothing is written without
// perf (Debian's linux-perf).
func moveFaults(ctx context.Context, out string, c *http.Client, rig moveRig, nodeBin, dir string) error {
	perf, err := exec.LookPath("perf")
	if err != nil || out == "" {
		return nil
	}
	p, addr, err := benchkit.StartNodeProc(nodeBin, filepath.Join(dir, "f1"), "f1", adminToken)
	if err != nil {
		return err
	}
	defer p.Stop()
	body := fmt.Sprintf(`{"addr":"http://%s","token":%q,"region":"bench"}`, addr, adminToken)
	if err := call(c, "PUT", rig.router+"/_shard/nodes/f1", body, 201); err != nil {
		return err
	}
	data := filepath.Join(dir, "faults.data")
	rec := exec.CommandContext(ctx, perf, "record", "-q", "-e", "page-faults", "-g", "-o", data, "-p", fmt.Sprint(p.PID()))
	var stderr bytes.Buffer
	rec.Stderr = &stderr
	if err := rec.Start(); err != nil {
		return err
	}
	time.Sleep(500 * time.Millisecond) // perf attached
	before := readProcStat(p.PID())
	start := time.Now()
	_, merr := callBody(c, "POST", rig.router+"/_shard/tenants/mv/move", `{"to":"f1"}`, 200)
	wall := time.Since(start)
	after := readProcStat(p.PID())
	_ = rec.Process.Signal(os.Interrupt)
	_ = rec.Wait() // ends on the signal: what it wrote is the judge
	if merr != nil {
		return merr
	}
	if st, err := os.Stat(data); err != nil || st.Size() == 0 {
		return fmt.Errorf("perf record wrote nothing: %v %s", err, stderr.String())
	}
	report := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, perf, append([]string{"report", "-i", data, "--stdio", "--no-children"}, args...)...)
		b, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("perf report: %v", err)
		}
		var keep []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "#") || strings.TrimSpace(l) == "" || strings.TrimSpace(l) == "|" {
				continue
			}
			keep = append(keep, l)
		}
		return strings.Join(keep, "\n"), nil
	}
	flat, err := report("--sort", "sym", "-g", "none")
	if err != nil {
		return err
	}
	callers, err := report("--sort", "sym", "-g", "caller,2,callee,function,percent", "--percent-limit", "2")
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Page faults of a node process taking the moved tenant, which it never held, as deployed (%s): the move %d ms, the target %d ms of CPU, %d page faults;\n",
		rig.shape, wall.Milliseconds(), (after.cpu - before.cpu).Milliseconds(), after.faults-before.faults)
	fmt.Fprintf(&b, "%s; load average %s. perf record -e page-faults -g on the target alone (sampled, so the shares matter, not the counts).\n\n", faultCost(), benchkit.LoadAvg())
	fmt.Fprintf(&b, "$ perf report --no-children --sort sym -g none\n%s\n\n", flat)
	fmt.Fprintf(&b, "$ perf report --no-children --sort sym -g caller (callers of each, 2 %% and more)\n%s\n", callers)
	return os.WriteFile(out, []byte(b.String()), 0o644)
}
