//go:build !linux

package cluster

import "syscall"

// sysProcAttr is empty where the kernel has no parent-death signal; the
// cleanups and Main's reaper still kill every child.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
