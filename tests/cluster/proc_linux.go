package cluster

import "syscall"

// sysProcAttr has the kernel kill a child if the test binary dies first,
// so a crashed test run leaves no process behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
