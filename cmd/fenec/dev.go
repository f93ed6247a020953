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
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/logx"
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

// setupDev is `fenec dev`: a node and a router in this process until ctx
// ends, the node on a free loopback port, the router on --listen with an
// embedded etcd member, the node recorded with the router.
func setupDev(fs *flag.FlagSet, e *env) runFunc {
	cfg := devConfig{Data: "data", Listen: "127.0.0.1:7700"}
	fs.StringVar(&cfg.Data, "data", cfg.Data, "`DIR` for tenant files (DIR/tenants), the directory (DIR/shard) and the tokens (DIR/tokens)")
	fs.StringVar(&cfg.Listen, "listen", cfg.Listen, "the router's `ADDR`")
	fs.StringVar(&cfg.Token, "token", cfg.Token, "the router's bearer `TOKEN` for /_shard/ (needed off loopback)")
	fs.BoolVar(&cfg.Quiet, "quiet", cfg.Quiet, "log warnings and errors only")
	logc := logx.Default()
	logc.AddFlags(fs)
	return func(ctx context.Context, pos []string) error {
		if len(pos) > 0 {
			return fmt.Errorf("%w: unexpected arguments %v", errUsage, pos)
		}
		if cfg.Quiet {
			logc.Level = slog.LevelWarn
		}
		return dev(ctx, cfg, e.stdout, logc.Logger(e.stderr))
	}
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
	if err := recordDevNode(ctx, base, cfg.Token, "http://"+n.Addr(), adminToken); err != nil {
		return errors.Join(err, rt.Close(), n.Close())
	}
	tokens, err := writeDevTokens(cfg, adminToken)
	if err != nil {
		return errors.Join(err, rt.Close(), n.Close())
	}
	printWelcome(stdout, base, cfg, devWhere{node: "http://" + n.Addr(), etcd: rt.DirectoryURLs(), tokens: tokens})
	<-ctx.Done()
	fmt.Fprintln(stdout, "fenec dev: stopping")
	return errors.Join(rt.Close(), n.Close())
}

// recordDevNode records the node with the router under devNode, replacing
// the record a previous run left (its address and token change every run).
func recordDevNode(ctx context.Context, base, token, nodeAddr, adminToken string) error {
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

// devWhere is where the parts of `fenec dev` are, for its welcome.
type devWhere struct {
	node   string
	etcd   []string
	tokens map[string]string // what → file
}

// writeDevTokens writes the node's admin token (and the router's, when one
// was given) into DATA/tokens, readable by this user only, and returns the
// files by what they hold.
func writeDevTokens(cfg devConfig, adminToken string) (map[string]string, error) {
	dir := filepath.Join(cfg.Data, "tokens")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	out := map[string]string{"node admin token": filepath.Join(dir, "node-admin")}
	if cfg.Token != "" {
		out["router token"] = filepath.Join(dir, "router")
	}
	for what, path := range out {
		tok := adminToken
		if what == "router token" {
			tok = cfg.Token
		}
		if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("tokens: %w", err)
		}
	}
	return out, nil
}

// printWelcome says where the router, the node, the directory and the
// tokens are, and how to start using them.
func printWelcome(w io.Writer, base string, cfg devConfig, where devWhere) {
	auth := ""
	if cfg.Token != "" {
		auth = ` -H "Authorization: Bearer ` + cfg.Token + `"`
	}
	fmt.Fprintf(w, "fenec dev: router at %s (data in %s; Ctrl-C stops)\n", base, cfg.Data)
	fmt.Fprintf(w, "  node:      %s (recorded as %q in region %q)\n", where.node, devNode, devRegion)
	fmt.Fprintf(w, "  etcd:      %s (the directory, embedded in the router)\n", strings.Join(where.etcd, ","))
	whats := make([]string, 0, len(where.tokens))
	for what := range where.tokens {
		whats = append(whats, what)
	}
	sort.Strings(whats)
	for _, what := range whats {
		fmt.Fprintf(w, "  %s: %s\n", what, where.tokens[what])
	}
	if cfg.Token == "" {
		fmt.Fprintln(w, "  router token: none (a loopback router may run open; --token sets one)")
	}
	fmt.Fprintf(w, "  the CLI:   %s\n", cliSetup(base))
	fmt.Fprintf(w, `
try, in another terminal (this one runs fenec dev until Ctrl-C):
  curl -X PUT%s %s/_shard/tenants/demo
  curl %s/t/demo/query -d '{"query": "create collection notes (body text @text)"}'
  curl %s/t/demo/notes -d '{"body": "hello from fenec"}'
  curl %s/t/demo/query -d '{"query": "get notes match body '\''hello'\''"}'
`, auth, base, base, base, base)
}

// cliSetup is what a shell runs to use the CLI against base: the
// router's URL, and this fenec on PATH when the name does not already
// find it there (make run builds it into bin/, on nobody's PATH).
func cliSetup(base string) string {
	line := "export FENEC_ROUTER=" + base
	exe, err := os.Executable()
	if err != nil {
		return line + "; fenec nodes"
	}
	exe, _ = filepath.EvalSymlinks(exe)
	if found, err := exec.LookPath("fenec"); err == nil {
		if found, _ = filepath.EvalSymlinks(found); found == exe {
			return line + "; fenec nodes"
		}
	}
	dir := filepath.Dir(exe)
	if wd, err := os.Getwd(); err == nil && dir == filepath.Join(wd, "bin") {
		dir = "$PWD/bin"
	}
	return fmt.Sprintf(`export PATH="%s:$PATH" FENEC_ROUTER=%s; fenec nodes`+"\n"+
		"             (fenec is %s, which PATH does not find; make install puts the binaries where go install does: $GOBIN, else $(go env GOPATH)/bin)", dir, base, exe)
}

// randomToken is a fresh admin token for the dev node.
func randomToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	return hex.EncodeToString(b), nil
}
