package benchkit

import "syscall"

// sysProcAttr has the kernel stop a child should the bench die first, so
// an interrupted run leaves no node, router or nginx behind. SIGTERM, not
// SIGKILL: nginx's master then stops its workers too.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
