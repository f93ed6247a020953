package node

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// nodeBin is the fenec-node binary TestMain builds for process tests.
var (
	nodeBin  string
	buildErr error
)

func TestMain(m *testing.M) {
	if slices.Contains(os.Args[1:], "-test.fuzzworker") {
		os.Exit(m.Run()) // a fuzz worker runs no process test: build nothing
	}
	dir, err := os.MkdirTemp("", "fenec-node-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	nodeBin = filepath.Join(dir, "fenec-node")
	if out, err := exec.Command("go", "build", "-o", nodeBin, "github.com/fenec-go/fenec/cmd/fenec-node").CombinedOutput(); err != nil {
		buildErr = fmt.Errorf("build fenec-node: %v\n%s", err, out)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

const adminToken = "admin-secret"

// testNode is a node served in-process on loopback.
type testNode struct {
	tb     testing.TB
	s      *Server
	cfg    Config
	url    string
	client *http.Client
}

// startNode starts a node on 127.0.0.1:0 over a temp dir (or cfg.Dir
// when mod sets it) and closes it at cleanup.
func startNode(tb testing.TB, mod func(*Config)) *testNode {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.Dir = tb.TempDir()
	cfg.HTTP = "127.0.0.1:0"
	cfg.AdminToken = adminToken
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		tb.Fatalf("new node: %v", err)
	}
	if err := s.Start(); err != nil {
		tb.Fatalf("start node: %v", err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 32}
	n := &testNode{tb: tb, s: s, cfg: cfg, url: "http://" + s.Addr(), client: &http.Client{Transport: tr}}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("close node: %v", err)
		}
		tr.CloseIdleConnections()
	})
	return n
}

// resp is an answer read whole.
type resp struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a generic value.
func (r *resp) JSON(tb testing.TB) any {
	tb.Helper()
	var v any
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		tb.Fatalf("decode %q: %v", r.Body, err)
	}
	return v
}

// Obj decodes the body as an object.
func (r *resp) Obj(tb testing.TB) map[string]any {
	tb.Helper()
	m, ok := r.JSON(tb).(map[string]any)
	if !ok {
		tb.Fatalf("answer %d %s is not an object", r.Status, r.Body)
	}
	return m
}

// do sends a request; hdr is name, value pairs. It may be called from
// any goroutine: a request that gets no answer is reported with Errorf
// and returned with status 0.
func (n *testNode) do(method, path, body string, hdr ...string) *resp {
	n.tb.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	noAnswer := &resp{Header: http.Header{}}
	req, err := http.NewRequest(method, n.url+path, rd)
	if err != nil {
		n.tb.Errorf("request: %v", err)
		return noAnswer
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := n.client.Do(req)
	if err != nil {
		n.tb.Errorf("%s %s: %v", method, path, err)
		return noAnswer
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		n.tb.Errorf("%s %s: read: %v", method, path, err)
		return noAnswer
	}
	return &resp{Status: res.StatusCode, Header: res.Header, Body: b}
}

// admin sends an admin request with the admin token.
func (n *testNode) admin(method, path, body string) *resp {
	n.tb.Helper()
	return n.do(method, "/_admin/"+path, body, "Authorization", "Bearer "+adminToken)
}

// mkTenant creates a tenant through /_admin/.
func (n *testNode) mkTenant(name string) {
	n.tb.Helper()
	if r := n.admin("PUT", "tenants/"+name, ""); r.Status != http.StatusCreated {
		n.tb.Fatalf("create tenant %s: %d %s", name, r.Status, r.Body)
	}
}

// q runs one statement on a tenant and wants 200.
func (n *testNode) q(tenant, query string, params ...any) *resp {
	n.tb.Helper()
	r := n.query(tenant, query, params...)
	if r.Status != http.StatusOK {
		n.tb.Fatalf("query %q: %d %s", query, r.Status, r.Body)
	}
	return r
}

// query runs one statement on a tenant, whatever it answers.
func (n *testNode) query(tenant, query string, params ...any) *resp {
	n.tb.Helper()
	if params == nil {
		params = []any{}
	}
	b, _ := json.Marshal(map[string]any{"query": query, "params": params})
	return n.do("POST", "/t/"+tenant+"/query", string(b))
}

// seq is the tenant's seq as the change feed tells it.
func (n *testNode) seq(tenant string) string {
	n.tb.Helper()
	r := n.do("GET", "/t/"+tenant+"/_changes?since=0&limit=10000", "")
	if r.Status != http.StatusOK {
		n.tb.Fatalf("changes: %d %s", r.Status, r.Body)
	}
	return r.Header.Get("Fenec-Next")
}

// event is one server-sent event.
type event struct {
	Name, ID, Data string
}

// sseStream reads server-sent events from an open subscription.
type sseStream struct {
	res *http.Response
	br  *bufio.Reader
}

// subscribe opens a subscription and checks it answered 200.
func (n *testNode) subscribe(path string, hdr ...string) *sseStream {
	n.tb.Helper()
	req, err := http.NewRequest("GET", n.url+path, nil)
	if err != nil {
		n.tb.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := n.client.Do(req)
	if err != nil {
		n.tb.Fatalf("subscribe: %v", err)
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		n.tb.Fatalf("subscribe %s: %d %s", path, res.StatusCode, b)
	}
	s := &sseStream{res: res, br: bufio.NewReader(res.Body)}
	n.tb.Cleanup(func() { res.Body.Close() })
	return s
}

// next reads the next event, skipping comments; io.EOF when it ended.
func (s *sseStream) next() (event, error) {
	var ev event
	for {
		line, err := s.br.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if ev.Name != "" || ev.Data != "" {
				return ev, nil
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event: "):
			ev.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "id: "):
			ev.ID = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			ev.Data = strings.TrimPrefix(line, "data: ")
		}
	}
}

// mustNext reads the next event and checks its name.
func (s *sseStream) mustNext(tb testing.TB, name string) map[string]any {
	tb.Helper()
	ev, err := s.next()
	if err != nil {
		tb.Fatalf("read event %s: %v", name, err)
	}
	if ev.Name != name {
		tb.Fatalf("event %s %s, want %s", ev.Name, ev.Data, name)
	}
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(ev.Data))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		tb.Fatalf("event data %q: %v", ev.Data, err)
	}
	return m
}
