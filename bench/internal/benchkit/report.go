package benchkit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Call sends one request (body as it is, JSON; token, if set, as a
// bearer) and returns the answer's body, or an error naming the status
// and body when the status is not want.
func Call(c *http.Client, method, url, token, body string, want int) ([]byte, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != want {
		return b, fmt.Errorf("%s %s: %d %s", method, url, res.StatusCode, bytes.TrimSpace(b))
	}
	return b, nil
}

// CallJSON is Call decoding the answer into out (when not nil).
func CallJSON(c *http.Client, method, url, token, body string, want int, out any) error {
	b, err := Call(c, method, url, token, body, want)
	if err != nil || out == nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// Percentile is the q-th quantile (0 to 1) of ds, which it leaves as they
// were: the value at rank q·n of the sorted durations (0 for none).
func Percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// Machine says what a table was measured on: the CPU's model, the
// GOMAXPROCS the run had, and the load average as it began.
func Machine() string {
	return fmt.Sprintf("%s, GOMAXPROCS %d, load average %s", CPUName(), runtime.GOMAXPROCS(0), LoadAvg())
}

// Emit prints a table and, when path is set, writes it there too.
func Emit(path string, table []byte) error {
	if _, err := os.Stdout.Write(table); err != nil {
		return err
	}
	if path == "" {
		return nil
	}
	if err := os.WriteFile(path, table, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// CPUName is the CPU's model, as /proc/cpuinfo names it.
func CPUName() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "cpu unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "cpu unknown"
}

// LoadAvg is the machine's 1, 5 and 15 minute load averages.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// Median is the middle of x (the mean of the two middle values of an even
// count), 0 for none; x is left as it was.
func Median(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := slices.Clone(x)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
