//go:build tools

// Package fenec pins modules the packages below use before they all exist.
package fenec

import (
	_ "github.com/anishathalye/porcupine"
	_ "github.com/google/btree"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "go.etcd.io/etcd/client/v3"
	_ "go.etcd.io/etcd/server/v3/embed"
	_ "go.uber.org/goleak"
	_ "golang.org/x/sync/errgroup"
	_ "golang.org/x/sys/unix"
)
