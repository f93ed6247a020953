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
	"github.com/fenec-go/fenec/internal/tlsx"
	"github.com/fenec-go/fenec/internal/tokenfile"
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
	Data      string // data/tenants for the node, data/shard for the directory
	Listen    string // the router's address
	Token     string // the router's token ("" on loopback)
	TokenFile string // the file Token was read from ("": given as a flag, or none)
	Quiet     bool   // log warnings only
}

// setupDev is `fenec dev`: a node and a router in this process until ctx
// ends, the node on a free loopback port, the router on --listen with an
// embedded etcd member, the node recorded with the router.
func setupDev(fs *flag.FlagSet, e *env) runFunc {
	cfg := devConfig{Data: "data", Listen: "127.0.0.1:7700"}
	fs.StringVar(&cfg.Data, "data", cfg.Data, "`DIR` for tenant files (DIR/tenants), the directory (DIR/shard) and the tokens (DIR/tokens)")
	fs.StringVar(&cfg.Listen, "listen", cfg.Listen, "the router's `ADDR`")
	fs.StringVar(&cfg.Token, "token", cfg.Token, "the router's bearer `TOKEN` for /_shard/ (on the command line: --token-file keeps it off it)")
	tokenfile.FlagPath(fs, "token", &cfg.Token, &cfg.TokenFile, "the router's token")
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
	rcfg.Token, rcfg.TokenFile = cfg.Token, cfg.TokenFile
	rcfg.ID = "dev"
	rcfg.Etcd = global.DefaultEmbedConfig(filepath.Join(cfg.Data, "shard"))
	rcfg.Etcd.ClientURL = "http://127.0.0.1:0"
	rcfg.Etcd.PeerURL = "http://127.0.0.1:0"
	// Its directory is this process's alone: one an older fenec dev left
	// open is closed as it starts.
	rcfg.CloseDirectory = true
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
	printWelcome(stdout, base, cfg, devWhere{node: "http://" + n.Addr(), etcd: rt.DirectoryURLs(), tokens: tokens, shard: rcfg.Etcd.Dir})
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
	shard  string            // the member's data dir, where the directory's key and password are
	tokens map[string]string // what → file
}

// writeDevTokens writes the node's admin token (and the router's, when
// one was given as a flag) into DATA/tokens, which it makes this user's
// alone (0700, each file 0600) whatever they were before, and removes
// any other file there (a router token of an earlier run given one). It
// returns the token files by what they hold, --token-file's included.
func writeDevTokens(cfg devConfig, adminToken string) (map[string]string, error) {
	dir := filepath.Join(cfg.Data, "tokens")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	write := map[string]string{filepath.Join(dir, "node-admin"): adminToken}
	out := map[string]string{"node admin token": filepath.Join(dir, "node-admin")}
	switch {
	case cfg.TokenFile != "":
		out["router token"] = cfg.TokenFile
	case cfg.Token != "":
		out["router token"] = filepath.Join(dir, "router")
		write[out["router token"]] = cfg.Token
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	for _, e := range entries {
		if path := filepath.Join(dir, e.Name()); write[path] == "" {
			if err := os.RemoveAll(path); err != nil {
				return nil, fmt.Errorf("tokens: remove a stale token: %w", err)
			}
		}
	}
	for path, tok := range write {
		if err := tlsx.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("tokens: %w", err)
		}
	}
	return out, nil
}

// printWelcome says where the router, the node, the directory and the
// tokens are, and how to start using them.
//
// It is written in one piece, so that whoever reads the output as it
// comes (a terminal, a script waiting for the address) sees it whole.
func printWelcome(out io.Writer, base string, cfg devConfig, where devWhere) {
	var w strings.Builder
	auth := ""
	if f := where.tokens["router token"]; f != "" {
		auth = ` -H "Authorization: Bearer $(cat ` + f + `)"`
	}
	fmt.Fprintf(&w, "fenec dev: router at %s (data in %s; Ctrl-C stops)\n", base, cfg.Data)
	fmt.Fprintf(&w, "  node:      %s (recorded as %q in region %q)\n", where.node, devNode, devRegion)
	fmt.Fprintf(&w, "  etcd:      %s (the directory, embedded in the router; it takes only the password in %s)\n",
		strings.Join(where.etcd, ","), filepath.Join(where.shard, region.PasswordFileName))
	whats := make([]string, 0, len(where.tokens))
	for what := range where.tokens {
		whats = append(whats, what)
	}
	sort.Strings(whats)
	for _, what := range whats {
		fmt.Fprintf(&w, "  %s: %s\n", what, where.tokens[what])
	}
	if cfg.Token == "" {
		fmt.Fprintln(&w, "  router token: none (a loopback router may run open; --token-file sets one)")
	}
	fmt.Fprintf(&w, "  the CLI:   %s\n", cliSetup(base))
	fmt.Fprintf(&w, `
try, in another terminal (this one runs fenec dev until Ctrl-C):
  curl -X PUT%s %s/_shard/tenants/demo
  curl %s/t/demo/query -d '{"query": "create collection notes (body text @text)"}'
  curl %s/t/demo/notes -d '{"body": "hello from fenec"}'
  curl %s/t/demo/query -d '{"query": "get notes match body '\''hello'\''"}'
`, auth, base, base, base, base)
	io.WriteString(out, w.String())
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
