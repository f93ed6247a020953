package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// sysProcAttr has the kernel kill a child if the test binary dies first,
// so a crashed test run leaves no process behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// allStopped reports whether every thread of pid is stopped (state T):
// SIGSTOP is delivered asynchronously, and a thread still running may
// answer one more request.
func allStopped(pid int) bool {
	tasks, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/stat")
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			return false
		}
		// The state follows the command name's closing parenthesis.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
			return false
		}
	}
	return true
}

// Memory is the running process's resident set now and its peak so far
// (VmRSS and VmHWM of /proc/<pid>/status), in bytes.
func (p *Proc) Memory() (rss, peak int64, err error) {
	cmd, _ := p.current()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/status")
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok || key != "VmRSS" && key != "VmHWM" {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s %q: %w", key, val, err)
		}
		if key == "VmRSS" {
			rss = kb << 10
		} else {
			peak = kb << 10
		}
	}
	if rss == 0 || peak == 0 {
		return 0, 0, fmt.Errorf("%s: %w", p.name, ErrNoMemory)
	}
	return rss, peak, nil
}
