package region

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/internal/testkit/testnode"
	"github.com/fenec-go/fenec/node"
)

// cpWait bounds every wait of the control plane's tests: a bound on a
// hang, never an assertion about speed.
const cpWait = 30 * time.Second

const (
	cpRouterToken = "router-secret"
	cpAdminToken  = testnode.AdminToken
)

func cpCtx(tb testing.TB) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cpWait)
	tb.Cleanup(cancel)
	return ctx
}

// cpNode is a real fenec-node served in process (testnode), behind a
// handler that can refuse or hold image installs (a target that refuses a
// move, or one caught copying), or cut the images it sends (a source that
// fails mid-move).
type cpNode struct {
	*testnode.Node
	// refuseInstall refuses a tenant's image, installed (a move by image)
	// or followed (a move's following copy): 507.
	refuseInstall atomic.Bool
	cutImage      atomic.Bool
	// holdInstall, when set, holds an image install until it is closed;
	// installsHeld counts the installs that reached it.
	holdInstall  atomic.Pointer[chan struct{}]
	installsHeld atomic.Int64
	// holdCreate, when set, holds the making of a tenant's file until it is
	// closed; creating is sent a value as each such call arrives.
	holdCreate atomic.Pointer[chan struct{}]
	creating   chan string
	// holdDelete, when set, holds a tenant file's deletion until it is
	// closed or its caller gives up; deleting is sent its path.
	holdDelete atomic.Pointer[chan struct{}]
	deleting   chan string
}

func startCPNode(tb testing.TB) *cpNode {
	tb.Helper()
	return startCPNodeWith(tb, func(c *node.Config) { c.ReplicationToken = "" }) // follows nothing
}

// startCPNodeWith is startCPNode with the node's config as configure
// sets it.
func startCPNodeWith(tb testing.TB, configure func(*node.Config)) *cpNode {
	tb.Helper()
	n := &cpNode{creating: make(chan string, 4), deleting: make(chan string, 4)}
	n.Node = testnode.Start(tb, testnode.Options{
		Configure: configure,
		Wrap: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				install := r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/file")
				follow := r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/follow")
				create := r.Method == http.MethodPut && !install && strings.HasPrefix(r.URL.Path, "/_admin/tenants/") &&
					strings.Count(r.URL.Path, "/") == 3
				if hold := n.holdDelete.Load(); hold != nil && r.Method == http.MethodDelete {
					select {
					case n.deleting <- r.URL.Path:
					default:
					}
					select {
					case <-*hold:
					case <-r.Context().Done():
						return
					}
				}
				if hold := n.holdCreate.Load(); hold != nil && create {
					n.creating <- r.URL.Path
					select {
					case <-*hold:
					case <-r.Context().Done():
						return
					}
				}
				if hold := n.holdInstall.Load(); hold != nil && install {
					n.installsHeld.Add(1)
					select {
					case <-*hold:
					case <-r.Context().Done():
						return
					}
				}
				if n.refuseInstall.Load() && (install || follow) {
					_, _ = io.Copy(io.Discard, r.Body)
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusInsufficientStorage)
					_, _ = w.Write([]byte(`{"error": "no room for this image"}` + "\n"))
					return
				}
				if n.cutImage.Load() && r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/file") {
					w = &cutWriter{ResponseWriter: w, left: 100}
				}
				next.ServeHTTP(w, r)
			})
		}})
	return n
}

// cutWriter fails every write past its first left bytes.
type cutWriter struct {
	http.ResponseWriter
	left int
}

func (c *cutWriter) Write(p []byte) (int, error) {
	if len(p) <= c.left {
		c.left -= len(p)
		return c.ResponseWriter.Write(p)
	}
	n, _ := c.ResponseWriter.Write(p[:c.left])
	c.left = 0
	return n, errors.New("image cut")
}

// admin calls the node's /_admin/ directly.
func (n *cpNode) admin(tb testing.TB, method, path string, body []byte) (int, []byte) {
	tb.Helper()
	st, _, b := cpDo(tb, method, n.URL()+path, cpAdminToken, body, nil)
	return st, b
}

// cpMember starts an embedded etcd member in a temp dir on free ports.
func cpMember(tb testing.TB) *global.Embedded {
	tb.Helper()
	cfg := global.DefaultEmbedConfig(tb.TempDir())
	cfg.ClientURL, cfg.PeerURL = "http://127.0.0.1:0", "http://127.0.0.1:0"
	m, err := global.StartEmbedded(cpCtx(tb), cfg)
	if err != nil {
		tb.Fatalf("start etcd: %v", err)
	}
	tb.Cleanup(func() { _ = m.Close() })
	if err := m.WaitReady(cpCtx(tb)); err != nil {
		tb.Fatalf("etcd ready: %v", err)
	}
	return m
}

// cpSecrets are the directory key and password files of one test's
// routers.
type cpSecrets struct{ key, password string }

// cpSecretsMade holds each test's secrets, by the test's top-level name
// (its subtests share them while the one that made them runs).
var cpSecretsMade sync.Map

// cpSecretsOf returns the secrets of tb's test, made at its first call.
func cpSecretsOf(tb testing.TB) cpSecrets {
	tb.Helper()
	top, _, _ := strings.Cut(tb.Name(), "/")
	if s, ok := cpSecretsMade.Load(top); ok {
		return s.(cpSecrets)
	}
	dir, err := os.MkdirTemp("", "fenec-secrets-")
	if err != nil {
		tb.Fatal(err)
	}
	s := cpSecrets{key: filepath.Join(dir, KeyFileName), password: filepath.Join(dir, PasswordFileName)}
	if err := os.WriteFile(s.key, []byte(global.NewKeyText()+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(s.password, []byte(global.NewPasswordText()+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	if prev, loaded := cpSecretsMade.LoadOrStore(top, s); loaded {
		os.RemoveAll(dir)
		return prev.(cpSecrets)
	}
	tb.Cleanup(func() {
		cpSecretsMade.Delete(top)
		os.RemoveAll(dir)
	})
	return s
}

// cpRouter is a Router under test and the base URL it answers at.
type cpRouter struct {
	rt  *Router
	url string
}

// startCPRouter starts a router on 127.0.0.1:0 with its own embedded etcd
// member in a temp dir, unless mod points it elsewhere.
func startCPRouter(tb testing.TB, mod func(*Config)) *cpRouter {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Token = cpRouterToken
	cfg.Etcd = global.DefaultEmbedConfig(tb.TempDir())
	cfg.Etcd.ClientURL, cfg.Etcd.PeerURL = "http://127.0.0.1:0", "http://127.0.0.1:0"
	cfg.NodeTimeout = 5 * time.Second
	cfg.Logger = testkit.Logger()
	if mod != nil {
		mod(&cfg)
	}
	if cfg.Directory == nil {
		// Every router of a test reads the same key and password, as
		// every router of a deployment does: standbys, regions' routers
		// and the routers of one directory's members.
		sec := cpSecretsOf(tb)
		if cfg.DirectoryKeyFile == "" {
			cfg.DirectoryKeyFile = sec.key
		}
		if cfg.DirectoryPasswordFile == "" {
			cfg.DirectoryPasswordFile = sec.password
		}
	}
	rt, err := NewRouter(cfg)
	if err != nil {
		tb.Fatalf("new router: %v", err)
	}
	if err := rt.Start(cpCtx(tb)); err != nil {
		tb.Fatalf("start router: %v", err)
	}
	tb.Cleanup(func() {
		if err := rt.Close(); err != nil {
			tb.Errorf("close router: %v", err)
		}
	})
	return &cpRouter{rt: rt, url: "http://" + rt.Addr()}
}

// shard calls /_shard/ with the router token and decodes a JSON answer
// into out (when not nil).
func (r *cpRouter) shard(tb testing.TB, method, path string, body any, out any) (int, []byte) {
	tb.Helper()
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			tb.Fatal(err)
		}
	}
	st, _, got := cpDo(tb, method, r.url+"/_shard/"+path, cpRouterToken, b, nil)
	if out != nil && len(got) > 0 {
		if err := json.Unmarshal(got, out); err != nil {
			tb.Fatalf("%s %s: decode %q: %v", method, path, got, err)
		}
	}
	return st, got
}

// addNode records n under name in the router's region.
func (r *cpRouter) addNode(tb testing.TB, name string, n *cpNode) {
	tb.Helper()
	st, b := r.shard(tb, http.MethodPut, "nodes/"+name, map[string]any{"addr": n.Addr(), "token": cpAdminToken, "region": "eu"}, nil)
	if st != http.StatusCreated {
		tb.Fatalf("put node %s: %d %s", name, st, b)
	}
}

// place creates tenant t (on node, when named).
func (r *cpRouter) place(tb testing.TB, t, node string) string {
	tb.Helper()
	body := map[string]any{}
	if node != "" {
		body["node"] = node
	}
	var ans struct{ Tenant, Node string }
	if st, b := r.shard(tb, http.MethodPut, "tenants/"+t, body, &ans); st != http.StatusCreated {
		tb.Fatalf("place %s: %d %s", t, st, b)
	}
	return ans.Node
}

// data sends a data request below /t/ (no token: nodes run without one).
func (r *cpRouter) data(tb testing.TB, method, path string, body string, hdr map[string]string) (int, http.Header, []byte) {
	tb.Helper()
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	return cpDo(tb, method, r.url+path, "", b, hdr)
}

var cpClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}

// cpDo sends one request and reads its answer whole.
func cpDo(tb testing.TB, method, url, token string, body []byte, hdr map[string]string) (int, http.Header, []byte) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cpWait)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		tb.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := cpClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("%s %s: read: %v", method, url, err)
	}
	return resp.StatusCode, resp.Header, got
}

// cpQuery runs one statement on tenant t through the router and returns
// the status, the Fenec-Seq header and the body.
func (r *cpRouter) query(tb testing.TB, t, q string) (int, string, []byte) {
	tb.Helper()
	b, _ := json.Marshal(map[string]any{"query": q})
	st, h, got := r.data(tb, http.MethodPost, "/t/"+t+"/query", string(b), nil)
	return st, h.Get("Fenec-Seq"), got
}

// mustQuery runs q and fails the test unless it answers 200.
func (r *cpRouter) mustQuery(tb testing.TB, t, q string) []byte {
	tb.Helper()
	st, _, b := r.query(tb, t, q)
	if st != http.StatusOK {
		tb.Fatalf("query %q on %s: %d %s", q, t, st, b)
	}
	return b
}

// sseEvent is one server-sent event.
type sseEvent struct {
	name, id, data string
}

// readEvents reads events from an SSE stream onto a channel until it ends;
// the channel is closed then.
func readEvents(body io.Reader) <-chan sseEvent {
	ch := make(chan sseEvent, 1024)
	go func() { // ends when the stream ends (the test closes its body)
		defer close(ch)
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" || ev.data != "" {
					ch <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "event:"):
				ev.name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
			case strings.HasPrefix(line, "id:"):
				ev.id = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
			case strings.HasPrefix(line, "data:"):
				ev.data += strings.TrimSpace(strings.TrimPrefix(line, "data:"))
			}
		}
	}()
	return ch
}

// nextEvent waits for the next event (ok false when the stream ended).
func nextEvent(tb testing.TB, ch <-chan sseEvent) (sseEvent, bool) {
	tb.Helper()
	select {
	case ev, ok := <-ch:
		return ev, ok
	case <-time.After(cpWait):
		tb.Fatalf("no event within %v", cpWait)
		return sseEvent{}, false
	}
}

// openStream opens a subscription through the router.
func (r *cpRouter) openStream(tb testing.TB, path string) (*http.Response, <-chan sseEvent) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url+path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := cpClient.Do(req)
	if err != nil {
		cancel()
		tb.Fatalf("subscribe %s: %v", path, err)
	}
	tb.Cleanup(func() {
		cancel()
		resp.Body.Close()
	})
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		tb.Fatalf("subscribe %s: %d %s", path, resp.StatusCode, b)
	}
	return resp, readEvents(resp.Body)
}
