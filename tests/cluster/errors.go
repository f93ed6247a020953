package cluster

import "errors"

// ErrExited is the error of a wait on a process that is no longer running.
var ErrExited = errors.New("process exited")

// ErrNotReady is the error of a readiness probe that has not answered yet.
var ErrNotReady = errors.New("not ready")

// ErrNoMemory is the error of a look at a process's memory that found none.
var ErrNoMemory = errors.New("no memory figures for the process")
