package cluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// stopWait bounds how long Stop waits for a process to exit after SIGTERM:
// a bound on a hang, not a measure of speed.
const stopWait = 60 * time.Second

// live holds every process started and not yet waited for, so that Main
// can kill what a test left behind.
var live = struct {
	sync.Mutex
	procs map[*Proc]struct{}
}{procs: map[*Proc]struct{}{}}

// Proc is one real process of a test: a binary, its arguments and a log
// file gathering its stdout and stderr across restarts.
type Proc struct {
	tb   testing.TB
	name string
	bin  string
	log  string // path of the log file

	env []string // added to the test's environment at every start

	mu   sync.Mutex
	args []string      // guarded by mu: the arguments of the next start
	cmd  *exec.Cmd     // guarded by mu: the current run
	done chan struct{} // guarded by mu: closed when the current run exited
	err  error         // guarded by mu: the current run's exit, once done
}

// StartProc starts bin with args, logging to a file in dir, and kills it
// at cleanup if the test left it running.
func StartProc(tb testing.TB, dir, name, bin string, args ...string) *Proc {
	tb.Helper()
	return StartProcEnv(tb, dir, name, bin, nil, args...)
}

// StartProcEnv is StartProc with env ("KEY=value" each) added to the
// environment the process starts with, then and at every restart.
func StartProcEnv(tb testing.TB, dir, name, bin string, env []string, args ...string) *Proc {
	tb.Helper()
	p := &Proc{tb: tb, name: name, bin: bin, args: args, env: env, log: dir + "/" + name + ".log"}
	tb.Cleanup(p.cleanup)
	if err := p.start(); err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	return p
}

// Name is the process's name in the test.
func (p *Proc) Name() string { return p.name }

// Args are the process's arguments: what the process list shows of it.
func (p *Proc) Args() []string { return p.args }

// LogPath is the file gathering the process's output.
func (p *Proc) LogPath() string { return p.log }

// Log returns the process's output so far.
func (p *Proc) Log() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

func (p *Proc) start() error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.mu.Lock()
	args := append([]string(nil), p.args...)
	p.mu.Unlock()
	fmt.Fprintf(f, "=== start %s %v\n", p.bin, args)
	cmd := exec.Command(p.bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if len(p.env) > 0 {
		cmd.Env = append(os.Environ(), p.env...)
	}
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return err
	}
	done := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done, p.err = cmd, done, nil
	p.mu.Unlock()
	live.Lock()
	live.procs[p] = struct{}{}
	live.Unlock()
	// The waiter is owned by the process: it ends when the process exits,
	// which cleanup (or Main's reaper) forces with SIGKILL.
	go func() {
		err := cmd.Wait()
		f.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		live.Lock()
		delete(live.procs, p)
		live.Unlock()
		close(done)
	}()
	return nil
}

// current returns the running command and its done channel.
func (p *Proc) current() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.done
}

// Running reports whether the process has not exited.
func (p *Proc) Running() bool {
	_, done := p.current()
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Exited is closed when the current run of the process exits.
func (p *Proc) Exited() <-chan struct{} {
	_, done := p.current()
	return done
}

// signal sends sig to the running process; false if it has exited.
func (p *Proc) signal(sig syscall.Signal) bool {
	cmd, done := p.current()
	select {
	case <-done:
		return false
	default:
	}
	return cmd.Process.Signal(sig) == nil
}

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Proc) Kill() {
	p.tb.Helper()
	_, done := p.current()
	p.signal(syscall.SIGKILL)
	<-done
}

// Stop sends SIGTERM and waits for a clean exit (status 0); anything else
// fails the test.
func (p *Proc) Stop() {
	p.tb.Helper()
	_, done := p.current()
	p.signal(syscall.SIGCONT)
	if !p.signal(syscall.SIGTERM) {
		p.tb.Fatalf("stop %s: it had already exited: %v", p.name, p.exitErr())
	}
	select {
	case <-done:
	case <-time.After(stopWait):
		p.Kill()
		p.tb.Fatalf("stop %s: still running %v after SIGTERM", p.name, stopWait)
	}
	if err := p.exitErr(); err != nil {
		p.tb.Fatalf("stop %s: exit %v, want 0", p.name, err)
	}
}

// Hangup sends SIGHUP: fenec's processes read their TLS files again.
func (p *Proc) Hangup() {
	p.tb.Helper()
	if !p.signal(syscall.SIGHUP) {
		p.tb.Fatalf("hangup %s: not running", p.name)
	}
}

// Quit sends SIGQUIT, on which a Go process writes every goroutine's
// stack to its log and exits (status 2), and waits for it to be gone:
// what a test that found a process stuck keeps of it.
func (p *Proc) Quit() {
	_, done := p.current()
	if p.signal(syscall.SIGQUIT) {
		select {
		case <-done:
		case <-time.After(stopWait):
			p.Kill()
		}
	}
}

// Pause stops the process with SIGSTOP: it holds its sockets and answers
// nothing, as a machine frozen would.
func (p *Proc) Pause() {
	p.tb.Helper()
	if !p.signal(syscall.SIGSTOP) {
		p.tb.Fatalf("pause %s: not running", p.name)
	}
	cmd, _ := p.current()
	Eventually(p.tb, stopWait, func() error {
		if !allStopped(cmd.Process.Pid) {
			return fmt.Errorf("pause %s: a thread still runs", p.name)
		}
		return nil
	})
}

// Continue resumes a paused process with SIGCONT.
func (p *Proc) Continue() {
	p.tb.Helper()
	if !p.signal(syscall.SIGCONT) {
		p.tb.Fatalf("continue %s: not running", p.name)
	}
}

// Restart starts the process again with the same arguments; the previous
// run must have exited (Kill or Stop first).
func (p *Proc) Restart() {
	p.tb.Helper()
	if p.Running() {
		p.tb.Fatalf("restart %s: still running", p.name)
	}
	if err := p.start(); err != nil {
		p.tb.Fatalf("restart %s: %v", p.name, err)
	}
}

// SetFlag sets flag (e.g. "--auto-failover") to value in the arguments
// the next Restart starts the process with, replacing the flag's value if
// it was given, adding it if not.
func (p *Proc) SetFlag(flag, value string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := 0; i+1 < len(p.args); i++ {
		if p.args[i] == flag {
			p.args[i+1] = value
			return
		}
	}
	p.args = append(p.args, flag, value)
}

// exitErr is the last run's exit error (nil for status 0).
func (p *Proc) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// cleanup kills the process if it still runs and, when the test failed,
// prints the tail of its log.
func (p *Proc) cleanup() {
	if p.Running() {
		p.Kill()
	}
	if p.tb.Failed() {
		p.tb.Logf("--- log of %s (%s):\n%s", p.name, p.log, tail(p.Log(), 80))
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	b := []byte(s)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '\n' && i < len(b)-1 {
			n--
			if n == 0 {
				return string(b[i+1:])
			}
		}
	}
	return string(bytes.TrimRight(b, "\n"))
}

// reapAll kills every process still running and names them.
func reapAll() []string {
	live.Lock()
	procs := make([]*Proc, 0, len(live.procs))
	for p := range live.procs {
		procs = append(procs, p)
	}
	live.Unlock()
	var names []string
	for _, p := range procs {
		cmd, done := p.current()
		names = append(names, fmt.Sprintf("%s (pid %d)", p.name, cmd.Process.Pid))
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
	}
	return names
}
