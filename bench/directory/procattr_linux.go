package main

import "syscall"

// sysProcAttr has the kernel stop the router should the bench die first.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
