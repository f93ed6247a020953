package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/node"
	"github.com/fenec-go/fenec/region"
)

// devNode is the name and region the dev node is recorded under.
const (
	devNode   = "local"
	devRegion = "local"
)

// devConfig is what `fenec dev` runs.
type devConfig struct {
	Data   string // data/tenants for the node, data/shard for the directory
	Listen string // the router's address
	Token  string // the router's token ("" on loopback)
	Quiet  bool   // log warnings only
}

// runDev runs a node and a router in this process until ctx ends: the
// node on a free loopback port, the router on --listen with an embedded
// etcd member, the node recorded with the router.
func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := devConfig{Data: "data", Listen: "127.0.0.1:7700"}
	fs := flag.NewFlagSet("fenec dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Data, "data", cfg.Data, "`DIR` for tenant files (DIR/tenants) and the directory (DIR/shard)")
	fs.StringVar(&cfg.Listen, "listen", cfg.Listen, "the router's `ADDR`")
	fs.StringVar(&cfg.Token, "token", cfg.Token, "the router's bearer `TOKEN` for /_shard/ (needed off loopback)")
	fs.BoolVar(&cfg.Quiet, "quiet", cfg.Quiet, "log warnings and errors only")
	pos, err := parseMixed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected arguments %v", errUsage, pos)
	}
	level := slog.LevelInfo
	if cfg.Quiet {
		level = slog.LevelWarn
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	return dev(ctx, cfg, stdout, log)
}

// dev starts the node, then the router, records the node, prints how to
// reach the router, and waits for ctx; it stops the router, then the node.
func dev(ctx context.Context, cfg devConfig, stdout io.Writer, log *slog.Logger) error {
	adminToken, err := randomToken()
	if err != nil {
		return err
	}
	ncfg := node.DefaultConfig()
	ncfg.Dir = filepath.Join(cfg.Data, "tenants")
	ncfg.HTTP = "127.0.0.1:0"
	ncfg.AdminToken = adminToken
	ncfg.Logger = log.With("part", "node")
	n, err := node.New(ncfg)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	if err := n.Start(); err != nil {
		n.Close()
		return fmt.Errorf("node: %w", err)
	}

	rcfg := region.DefaultConfig()
	rcfg.Listen = cfg.Listen
	rcfg.Token = cfg.Token
	rcfg.ID = "dev"
	rcfg.Etcd = global.DefaultEmbedConfig(filepath.Join(cfg.Data, "shard"))
	rcfg.Etcd.ClientURL = "http://127.0.0.1:0"
	rcfg.Etcd.PeerURL = "http://127.0.0.1:0"
	rcfg.Logger = log.With("part", "router")
	rt, err := region.NewRouter(rcfg)
	if err == nil {
		err = rt.Start(ctx)
	}
	if err != nil {
		return errors.Join(fmt.Errorf("router: %w", err), n.Close())
	}
	base := "http://" + rt.Addr()
	if err := register(ctx, base, cfg.Token, "http://"+n.Addr(), adminToken); err != nil {
		return errors.Join(err, rt.Close(), n.Close())
	}
	printWelcome(stdout, base, cfg)
	<-ctx.Done()
	fmt.Fprintln(stdout, "fenec dev: stopping")
	return errors.Join(rt.Close(), n.Close())
}

// register records the node with the router under devNode, replacing the
// record a previous run left (its address and token change every run).
func register(ctx context.Context, base, token, nodeAddr, adminToken string) error {
	body, _ := json.Marshal(map[string]string{"addr": nodeAddr, "token": adminToken, "region": devRegion})
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "PUT", base+"/_shard/nodes/"+devNode, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	res, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("record node: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		return fmt.Errorf("record node: %s: %s", res.Status, bytes.TrimSpace(b))
	}
	return nil
}

// printWelcome says where the router is and how to start using it.
func printWelcome(w io.Writer, base string, cfg devConfig) {
	auth := ""
	if cfg.Token != "" {
		auth = ` -H "Authorization: Bearer ` + cfg.Token + `"`
	}
	fmt.Fprintf(w, `fenec dev: router at %s (data in %s; Ctrl-C stops)

try:
  curl -X PUT%s %s/_shard/tenants/demo
  curl %s/t/demo/query -d '{"query": "create collection notes (body text @text)"}'
  curl %s/t/demo/notes -d '{"body": "hello from fenec"}'
  curl %s/t/demo/query -d '{"query": "get notes match body '\''hello'\''"}'
`, base, cfg.Data, auth, base, base, base, base)
}

// randomToken is a fresh admin token for the dev node.
func randomToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	return hex.EncodeToString(b), nil
}
