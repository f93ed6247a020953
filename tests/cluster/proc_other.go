//go:build !linux

package cluster

import "syscall"

// sysProcAttr is empty where the kernel has no parent-death signal; the
// cleanups and Main's reaper still kill every child.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

// allStopped cannot look at the threads here; Pause trusts the signal.
func allStopped(int) bool { return true }

// Memory is not read here: it needs Linux's /proc.
func (p *Proc) Memory() (rss, peak int64, err error) { return 0, 0, ErrNoMemory }
