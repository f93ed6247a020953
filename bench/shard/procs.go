package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// childPIDs lists the children of pid (nginx's workers under its master).
func childPIDs(pid int) []int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		var n int
		if _, err := fmt.Sscan(f, &n); err == nil {
			out = append(out, n)
		}
	}
	return out
}

var errNoWrk = errors.New("wrk not found (make shard-bench installs Debian's wrk)")
