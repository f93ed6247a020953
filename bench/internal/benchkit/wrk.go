package benchkit

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// WrkDone is a wrk script's done(): it prints one line, FENEC followed by
// the run's figures (ParseWrk reads it). Scripts of their own end with it.
const WrkDone = `
function done(s, lat, req)
  io.write(string.format("FENEC requests=%d duration_us=%d p50_us=%.1f p99_us=%.1f mean_us=%.1f status=%d connect=%d read=%d write=%d timeout=%d\n",
    s.requests, s.duration, lat:percentile(50), lat:percentile(99), lat.mean,
    s.errors.status, s.errors.connect, s.errors.read, s.errors.write, s.errors.timeout))
end
`

// WrkResult is one wrk run's figures.
type WrkResult struct {
	P50, P99, Mean float64 // µs
	RPS            float64
	Requests       int64
}

// ParseWrk reads the FENEC line WrkDone prints for the run against name;
// a run with any failed request, or none, is an error.
func ParseWrk(out, name string) (WrkResult, error) {
	i := strings.Index(out, "FENEC ")
	if i < 0 {
		return WrkResult{}, fmt.Errorf("wrk %s: no figures in its output:\n%s", name, out)
	}
	line, _, _ := strings.Cut(out[i+len("FENEC "):], "\n")
	f := map[string]float64{}
	for _, kv := range strings.Fields(line) {
		k, v, _ := strings.Cut(kv, "=")
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return WrkResult{}, fmt.Errorf("wrk %s: %q: %w", name, kv, err)
		}
		f[k] = x
	}
	if bad := f["status"] + f["connect"] + f["read"] + f["write"] + f["timeout"]; bad > 0 || f["requests"] == 0 {
		return WrkResult{}, fmt.Errorf("wrk %s: %s", name, line)
	}
	return WrkResult{P50: f["p50_us"], P99: f["p99_us"], Mean: f["mean_us"],
		RPS: f["requests"] / (f["duration_us"] / 1e6), Requests: int64(f["requests"])}, nil
}

// RunWrk runs wrk (one thread, conns connections, dur in whole seconds)
// with script against url, and parses its figures; args go to the script.
func RunWrk(ctx context.Context, bin, script, url, name string, conns int, dur time.Duration, args ...string) (WrkResult, error) {
	secs := max(1, int(dur.Round(time.Second)/time.Second))
	cmd := []string{"-t", "1", "-c", strconv.Itoa(conns), "-d", fmt.Sprintf("%ds", secs), "--timeout", "5s", "-s", script, url}
	if len(args) > 0 {
		cmd = append(append(cmd, "--"), args...)
	}
	out, err := exec.CommandContext(ctx, bin, cmd...).CombinedOutput()
	if err != nil {
		return WrkResult{}, fmt.Errorf("wrk %s: %w\n%s", name, err, out)
	}
	return ParseWrk(string(out), name)
}
