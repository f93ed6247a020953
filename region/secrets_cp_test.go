package region

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/testkit"
)

// bareConfig is a router's config as startCPRouter makes it, over an
// embedded member in dir, with none of the test's shared secrets: what a
// plain `fenec-shard --etcd-dir DIR` runs.
func bareConfig(dir string, log *slog.Logger) Config {
	cfg := DefaultConfig()
	cfg.Listen, cfg.Token = "127.0.0.1:0", cpRouterToken
	cfg.Etcd = global.DefaultEmbedConfig(dir)
	cfg.Etcd.ClientURL, cfg.Etcd.PeerURL = "http://127.0.0.1:0", "http://127.0.0.1:0"
	cfg.NodeTimeout = 5 * time.Second
	cfg.Logger = log
	return cfg
}

// startBare starts a router with cfg as it is; a router that started is
// closed at cleanup.
func startBare(tb testing.TB, cfg Config) (*cpRouter, error) {
	tb.Helper()
	rt, err := NewRouter(cfg)
	if err != nil {
		return nil, err
	}
	if err := rt.Start(cpCtx(tb)); err != nil {
		return nil, err
	}
	tb.Cleanup(func() { _ = rt.Close() })
	return &cpRouter{rt: rt, url: "http://" + rt.Addr()}, nil
}

// logBuffer is a logger whose lines a test reads.
type logBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// wantPrivateFile fails tb unless path exists and is its owner's alone.
func wantPrivateFile(tb testing.TB, path string) {
	tb.Helper()
	st, err := os.Stat(path)
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	if st.Mode().Perm() != 0o600 {
		tb.Fatalf("%s: mode %#o, want 0600", path, st.Mode().Perm())
	}
}

// TestNewDirectoryClosedAtFirstStart: a router founding a directory alone
// with no key or password given makes both in its --etcd-dir (0600),
// seals node tokens and turns on etcd's authentication: a client with no
// password learns nothing and changes nothing. Started again it reads
// the same files; a standby without them is refused saying which file to
// give, and one given them forwards.
func TestNewDirectoryClosedAtFirstStart(t *testing.T) {
	dir := t.TempDir()
	r, err := startBare(t, bareConfig(dir, testkit.Logger()))
	if err != nil {
		t.Fatal(err)
	}
	keyFile, pwFile := filepath.Join(dir, KeyFileName), filepath.Join(dir, PasswordFileName)
	wantPrivateFile(t, keyFile)
	wantPrivateFile(t, pwFile)
	n1 := startCPNode(t)
	r.addNode(t, "n1", n1)
	r.place(t, "acme", "n1")
	r.mustQuery(t, "acme", "create collection c (name text)")
	if got := testkit.EtcdStranger(t, r.rt.DirectoryURLs(), nil); len(got) > 0 {
		t.Fatalf("a client with no password got:\n%s", strings.Join(got, "\n"))
	}
	r.mustQuery(t, "acme", "get c")

	// A standby with no password: refused, naming the flag.
	sb := bareConfig("", testkit.Logger())
	sb.ID, sb.Standby, sb.DirectoryURLs = "sb", true, r.rt.DirectoryURLs()
	if _, err := startBare(t, sb); !errors.Is(err, global.ErrAuth) || !strings.Contains(err.Error(), "--directory-password-file") {
		t.Fatalf("a standby without the password: %v", err)
	}
	// With the password and not the key: refused, naming the key file and
	// the router that made it.
	sb.DirectoryPasswordFile = pwFile
	if _, err := startBare(t, sb); !errors.Is(err, ErrSecrets) || !strings.Contains(err.Error(), keyFile) {
		t.Fatalf("a standby without the key: %v", err)
	}
	// With both: it forwards over the sealed records.
	sb.DirectoryKeyFile = keyFile
	s, err := startBare(t, sb)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, cpWait, func() bool {
		st, _, _ := s.data(t, http.MethodPost, "/t/acme/query", `{"query": "get c"}`, nil)
		return st == http.StatusOK
	}, "the standby forwards")

	// Started again, the router reads what it made.
	key, _ := os.ReadFile(keyFile)
	if err := r.rt.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := startBare(t, bareConfig(dir, testkit.Logger()))
	if err != nil {
		t.Fatal(err)
	}
	if now, _ := os.ReadFile(keyFile); !bytes.Equal(now, key) {
		t.Fatal("the router made a new key at its second start")
	}
	// Not the leader (the first router's record stands), its start does
	// not wait for its view: it forwards once the view arrives.
	testkit.Eventually(t, cpWait, func() bool {
		st, _, _ := again.data(t, http.MethodPost, "/t/acme/query", `{"query": "get c"}`, nil)
		return st == http.StatusOK
	}, "the router started again forwards over the sealed records")
}

// TestOpenDirectoryWarnedThenClosedWhenAsked: a directory made before
// directories were closed (its etcd open, records in it) is not closed
// under routers that run on it: each start warns, and routers without the
// password go on. --close-directory closes it; a router given the files
// first goes on across it.
func TestOpenDirectoryWarnedThenClosedWhenAsked(t *testing.T) {
	dir := t.TempDir()
	old := global.DefaultEmbedConfig(dir)
	old.ClientURL, old.PeerURL = "http://127.0.0.1:0", "http://127.0.0.1:0"
	m, err := global.StartEmbedded(cpCtx(t), old)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.WaitReady(cpCtx(t)); err != nil {
		t.Fatal(err)
	}
	d, err := m.Open(cpCtx(t), global.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Put(cpCtx(t), global.KeyTerm, []byte("1")); err != nil {
		t.Fatal(err)
	}
	d.Close()
	m.Close()

	var logs logBuffer
	r, err := startBare(t, bareConfig(dir, logs.logger()))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "--close-directory") {
		t.Fatalf("no warning of the open directory:\n%s", logs.String())
	}
	if _, err := os.Stat(filepath.Join(dir, PasswordFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a password made for a directory left open: %v", err)
	}
	plain := bareConfig("", testkit.Logger())
	plain.ID, plain.Standby, plain.DirectoryURLs = "plain", true, r.rt.DirectoryURLs()
	if _, err := startBare(t, plain); err != nil {
		t.Fatalf("a router without the files on the open directory: %v", err)
	}
	if d, err := global.OpenEtcd(cpCtx(t), r.rt.DirectoryURLs(), ""); err != nil {
		t.Fatalf("the open directory refused a client with no password: %v", err)
	} else {
		d.Close()
	}
	if err := r.rt.Close(); err != nil {
		t.Fatal(err)
	}

	cfg := bareConfig(dir, testkit.Logger())
	cfg.CloseDirectory = true
	closed, err := startBare(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := testkit.EtcdStranger(t, closed.rt.DirectoryURLs(), nil); len(got) > 0 {
		t.Fatalf("after --close-directory a client with no password got:\n%s", strings.Join(got, "\n"))
	}
	given := plain
	given.ID = "given"
	given.DirectoryKeyFile, given.DirectoryPasswordFile = filepath.Join(dir, KeyFileName), filepath.Join(dir, PasswordFileName)
	given.DirectoryURLs = closed.rt.DirectoryURLs()
	if _, err := startBare(t, given); err != nil {
		t.Fatalf("a router given the files: %v", err)
	}
	plain.DirectoryURLs = closed.rt.DirectoryURLs()
	if _, err := startBare(t, plain); !errors.Is(err, global.ErrAuth) {
		t.Fatalf("a router without them after the close: %v", err)
	}
}

// TestSeveralFoundersNeedTheirFiles: members founding a directory together
// would each make a key and password of their own: without files they
// refuse, saying so.
func TestSeveralFoundersNeedTheirFiles(t *testing.T) {
	peers := map[string]string{}
	for _, name := range []string{"a", "b"} {
		u, err := global.FreeLocalURL()
		if err != nil {
			t.Fatal(err)
		}
		peers[name] = u
	}
	errs := make(chan error, 2)
	for _, name := range []string{"a", "b"} {
		cfg := bareConfig(t.TempDir(), testkit.Logger())
		cfg.ID, cfg.Etcd.Name, cfg.Etcd.PeerURL = name, name, peers[name]
		cfg.Etcd.InitialCluster = global.InitialCluster(peers)
		go func() {
			_, err := startBare(t, cfg)
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; !errors.Is(err, ErrSecrets) || !strings.Contains(err.Error(), "--directory-password-file") {
			t.Fatalf("a founder of several without files: %v", err)
		}
	}
}

// TestRegionRouterNeedsTheGlobalSecrets: a region's router reaches the
// global directory with the global tier's password and opens its sealed
// records with its key: without them it refuses to start, naming them,
// before it closes a directory of its own with others.
func TestRegionRouterNeedsTheGlobalSecrets(t *testing.T) {
	gdir := t.TempDir()
	g, err := startBare(t, bareConfig(gdir, testkit.Logger()))
	if err != nil {
		t.Fatal(err)
	}
	g.addNode(t, "n1", startCPNode(t))

	eu := bareConfig(t.TempDir(), testkit.Logger())
	eu.ID, eu.Region, eu.GlobalURLs = "eu-1", "eu", g.rt.DirectoryURLs()
	if _, err := startBare(t, eu); !errors.Is(err, ErrSecrets) || !strings.Contains(err.Error(), "--directory-password-file") {
		t.Fatalf("a region's router without the global password: %v", err)
	}
	eu.Etcd.Dir = t.TempDir()
	eu.DirectoryPasswordFile = filepath.Join(gdir, PasswordFileName)
	if _, err := startBare(t, eu); !errors.Is(err, ErrSecrets) || !strings.Contains(err.Error(), filepath.Join(gdir, KeyFileName)) {
		t.Fatalf("a region's router without the global key: %v", err)
	}
	eu.Etcd.Dir = t.TempDir()
	eu.DirectoryKeyFile = filepath.Join(gdir, KeyFileName)
	r, err := startBare(t, eu)
	if err != nil {
		t.Fatal(err)
	}
	if got := testkit.EtcdStranger(t, r.rt.DirectoryURLs(), nil); len(got) > 0 {
		t.Fatalf("the region's own directory answered a client with no password:\n%s", strings.Join(got, "\n"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), cpWait)
	defer cancel()
	d, err := global.OpenEtcd(ctx, r.rt.DirectoryURLs(), "", global.WithPassword(string(bytes.TrimSpace(mustRead(t, eu.DirectoryPasswordFile)))))
	if err != nil {
		t.Fatalf("the region's directory with the deployment's password: %v", err)
	}
	d.Close()
}

// mustRead reads path.
func mustRead(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
