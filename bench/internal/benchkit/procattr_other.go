//go:build !linux

package benchkit

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
