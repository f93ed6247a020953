// Package benchkit is what the benchmark programs share: it builds and
// starts the node and router processes they measure as deployed (and the
// in-process ones of their second tables), on loopback with throwaway
// data, makes their HTTP calls, takes percentiles, says what machine a
// table was measured on, and prints and saves the table. It is for
// benchmarks only: no flags, no retries, nothing a deployment would want.
package benchkit

import (
	"context"
	"log/slog"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/node"
	"github.com/fenec-go/fenec/region"
)

// StartNode starts a node serving dir on 127.0.0.1:0 with adminToken;
// adjust, if set, changes its config first.
func StartNode(dir, adminToken string, log *slog.Logger, adjust func(*node.Config)) (*node.Server, error) {
	cfg := node.DefaultConfig()
	cfg.Dir = dir
	cfg.HTTP = "127.0.0.1:0"
	cfg.AdminToken = adminToken
	cfg.Logger = log
	if adjust != nil {
		adjust(&cfg)
	}
	s, err := node.New(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.Start(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// StartRouter starts a router on 127.0.0.1:0 over an embedded etcd member
// in dir; adjust, if set, changes its config first.
func StartRouter(dir string, log *slog.Logger, adjust func(*region.Config)) (*region.Router, error) {
	cfg := region.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Etcd = global.DefaultEmbedConfig(dir)
	cfg.Etcd.ClientURL = "http://127.0.0.1:0"
	cfg.Etcd.PeerURL = "http://127.0.0.1:0"
	cfg.Logger = log
	if adjust != nil {
		adjust(&cfg)
	}
	rt, err := region.NewRouter(cfg)
	if err != nil {
		return nil, err
	}
	if err := rt.Start(context.Background()); err != nil {
		rt.Close()
		return nil, err
	}
	return rt, nil
}
