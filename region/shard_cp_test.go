package region

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/audit"
	"github.com/fenec-go/fenec/internal/tlsx"
)

func TestConfigValidateCP(t *testing.T) {
	ok := DefaultConfig()
	tlsFiles := tlsx.Files{Cert: "c", Key: "k", CA: "ca"}
	tests := []struct {
		name string
		mod  func(*Config)
		want error
	}{
		{"defaults", func(*Config) {}, nil},
		{"a move's test pause at a step", func(c *Config) { c.TestMovePause = global.MovePromoting }, nil},
		{"a move's test pause at no step", func(c *Config) { c.TestMovePause = "flipped" }, ErrBadConfig},
		{"a move's test pause, a step's case changed", func(c *Config) { c.TestMovePause = "Following" }, ErrBadConfig},
		{"non-loopback without token", func(c *Config) { c.Listen = "0.0.0.0:7700" }, ErrInsecure},
		{"non-loopback insecure", func(c *Config) { c.Listen = ":7700"; c.Insecure = true }, nil},
		{"non-loopback with token, no tls", func(c *Config) { c.Listen = "10.0.0.1:7700"; c.Token = "x" }, ErrInsecure},
		{"non-loopback with token and tls", func(c *Config) { c.Listen, c.Token, c.TokenFile, c.TLS = "10.0.0.1:7700", "x", "/f/token", tlsFiles }, nil},
		{"non-loopback, token a flag", func(c *Config) { c.Listen, c.Token, c.TLS = "10.0.0.1:7700", "x", tlsFiles }, ErrInsecure},
		{"non-loopback insecure, token a flag", func(c *Config) { c.Listen, c.Token, c.TLS, c.Insecure = "10.0.0.1:7700", "x", tlsFiles, true }, nil},
		{"non-loopback tls, no token", func(c *Config) { c.Listen, c.TLS = "10.0.0.1:7700", tlsFiles }, ErrInsecure},
		{"cert without key", func(c *Config) { c.TLS = tlsx.Files{Cert: "c"} }, ErrBadConfig},
		{"client auth without ca", func(c *Config) { c.TLS, c.ClientAuth = tlsx.Files{Cert: "c", Key: "k"}, ClientAuthAdmin }, ErrBadConfig},
		{"client auth", func(c *Config) { c.TLS, c.ClientAuth = tlsFiles, ClientAuthAll }, nil},
		{"etcd client url off loopback, http", func(c *Config) { c.Etcd.ClientURL = "http://10.0.0.1:2379" }, ErrInsecure},
		{"etcd client url off loopback, https without ca", func(c *Config) {
			c.Etcd.ClientURL, c.TLS = "https://10.0.0.1:2379", tlsx.Files{Cert: "c", Key: "k"}
		}, ErrInsecure},
		{"etcd urls off loopback, https with ca", func(c *Config) {
			c.Etcd.ClientURL, c.Etcd.PeerURL, c.TLS = "https://10.0.0.1:2379", "https://10.0.0.1:2380", tlsFiles
			c.DirectoryKeyFile = "k"
		}, nil},
		{"etcd urls off loopback, no key", func(c *Config) {
			c.Etcd.ClientURL, c.Etcd.PeerURL, c.TLS = "https://10.0.0.1:2379", "https://10.0.0.1:2380", tlsFiles
		}, ErrInsecure},
		{"etcd peer url off loopback, http", func(c *Config) { c.Etcd.PeerURL = "http://10.0.0.1:2380" }, ErrInsecure},
		{"etcd listening off loopback, http", func(c *Config) { c.Etcd.ListenClientURL = "http://0.0.0.0:2379" }, ErrInsecure},
		{"etcd listening off loopback, https", func(c *Config) {
			c.Etcd.ClientURL, c.Etcd.ListenClientURL, c.TLS, c.DirectoryKeyFile = "https://g1:2379", "https://0.0.0.0:2379", tlsFiles, "k"
		}, nil},
		{"etcd https without files", func(c *Config) { c.Etcd.ClientURL = "https://127.0.0.1:2379" }, ErrBadConfig},
		{"etcd files of their own", func(c *Config) {
			c.Etcd.ClientURL, c.Etcd.TLS, c.DirectoryKeyFile = "https://10.0.0.1:2379", tlsFiles, "k"
		}, nil},
		{"etcd off loopback, insecure", func(c *Config) { c.Etcd.ClientURL, c.Insecure = "http://10.0.0.1:2379", true }, nil},
		{"directory off loopback, http", func(c *Config) { c.DirectoryURLs = []string{"http://10.0.0.2:2379"} }, ErrInsecure},
		{"directory off loopback, https", func(c *Config) {
			c.DirectoryURLs, c.DirectoryKeyFile = []string{"https://10.0.0.2:2379"}, "k"
		}, nil},
		{"directory off loopback, no key", func(c *Config) { c.DirectoryURLs = []string{"https://10.0.0.2:2379"} }, ErrInsecure},
		{"bad listen", func(c *Config) { c.Listen = "nope" }, ErrBadConfig},
		{"bad id", func(c *Config) { c.ID = "Router One" }, ErrBadConfig},
		{"bad region", func(c *Config) { c.Region = "EU!" }, ErrBadConfig},
		{"no etcd dir", func(c *Config) { c.Etcd.Dir = "" }, ErrBadConfig},
		{"directory needs no etcd dir", func(c *Config) { c.Etcd.Dir = ""; c.DirectoryURLs = []string{"http://127.0.0.1:2379"} }, nil},
		{"force new cluster with directory", func(c *Config) {
			c.DirectoryURLs = []string{"http://127.0.0.1:2379"}
			c.Etcd.ForceNewCluster = true
		}, ErrBadConfig},
		{"move below node timeout", func(c *Config) { c.MoveTimeout = time.Second }, ErrBadConfig},
		{"no node timeout", func(c *Config) { c.NodeTimeout = 0 }, ErrBadConfig},
		{"forward checked", func(c *Config) { c.Forward.UpstreamTimeout = 0 }, ErrBadConfig},
		{"global mirrors a region", func(c *Config) {
			c.Region, c.GlobalURLs, c.DirectoryKeyFile = "eu", []string{"https://g:2379"}, "k"
		}, nil},
		{"global across the network without tls", func(c *Config) { c.Region = "eu"; c.GlobalURLs = []string{"http://g:2379"} }, ErrInsecure},
		{"global without a region", func(c *Config) { c.GlobalURLs = []string{"http://g:2379"} }, ErrBadConfig},
		{"global and leasing: the region may lease its nodes", func(c *Config) {
			c.Region, c.GlobalURLs, c.AutoFailover, c.DirectoryKeyFile = "eu", []string{"https://g:2379"}, time.Second, "k"
		}, nil},
		{"global and replicas", func(c *Config) {
			c.Region, c.GlobalURLs, c.Replicas, c.DirectoryKeyFile = "eu", []string{"https://g:2379"}, true, "k"
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mod(&c)
			err := c.Validate()
			if tc.want == nil && err != nil {
				t.Fatalf("got %v, want nil", err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestConfigFlagsCP(t *testing.T) {
	c := DefaultConfig()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c.AddFlags(fs)
	err := fs.Parse([]string{"--listen", "127.0.0.1:9000", "--token", "tk", "--id", "r1",
		"--etcd-dir", "/tmp/x", "--etcd-name", "m1", "--etcd-client-url", "http://127.0.0.1:1",
		"--etcd-peer-url", "http://127.0.0.1:2", "--etcd-initial-cluster", "m1=http://127.0.0.1:2",
		"--etcd-cluster-state", "existing", "--etcd-force-new-cluster",
		"--directory", "http://a:1, http://b:2", "--region", "eu", "--global", "http://g:1,http://h:2", "--standby",
		"--upstream-timeout", "4", "--idle-timeout", "2.5", "--audit", "/tmp/a.log", "--insecure"})
	if err != nil {
		t.Fatal(err)
	}
	if c.MoveImage {
		t.Fatal("--move-image on without the flag")
	}
	got := fmt.Sprintf("%s %s %s %s %s %s %s %s %v %v %s %v %v %v %s %v", c.Listen, c.Token, c.ID, c.Etcd.Dir,
		c.Etcd.Name, c.Etcd.ClientURL, c.Etcd.PeerURL, c.Etcd.ClusterState, c.Etcd.ForceNewCluster,
		c.DirectoryURLs, c.Region, c.Standby, c.Forward.UpstreamTimeout, c.Forward.IdleTimeout, c.Audit, c.Insecure)
	want := "127.0.0.1:9000 tk r1 /tmp/x m1 http://127.0.0.1:1 http://127.0.0.1:2 existing true [http://a:1 http://b:2] eu true 4s 2.5s /tmp/a.log true"
	if got != want {
		t.Fatalf("flags:\n got %s\nwant %s", got, want)
	}
	if fmt.Sprint(c.GlobalURLs) != "[http://g:1 http://h:2]" {
		t.Fatalf("global %v", c.GlobalURLs)
	}
	if c.Etcd.InitialCluster != "m1=http://127.0.0.1:2" {
		t.Fatalf("initial cluster %q", c.Etcd.InitialCluster)
	}
	if err := fs.Parse([]string{"--move-image"}); err != nil || !c.MoveImage {
		t.Fatalf("--move-image: %v, set %v", err, c.MoveImage)
	}
	if err := fs.Parse([]string{"--move-image=maybe"}); err == nil {
		t.Fatal("--move-image=maybe taken")
	}
}

func TestDefaultIDIsAName(t *testing.T) {
	id := defaultID(&fakeAddr{"127.0.0.1:7700"})
	if !global.ValidName(id) || !strings.HasSuffix(id, "-7700") {
		t.Fatalf("default id %q", id)
	}
}

type fakeAddr struct{ s string }

func (a *fakeAddr) Network() string { return "tcp" }
func (a *fakeAddr) String() string  { return a.s }

func TestShardNodesTokenCP(t *testing.T) {
	auditPath := filepath.Join(t.TempDir(), "audit.log")
	r := startCPRouter(t, func(c *Config) { c.Audit = auditPath; c.Region = "eu" })
	n1 := startCPNode(t)

	// No router token, or a wrong one: 401 with WWW-Authenticate.
	for _, tok := range []string{"", "wrong"} {
		st, h, b := cpDo(t, http.MethodGet, r.url+"/_shard/nodes", tok, nil, nil)
		if st != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("token %q: %d %v %s", tok, st, h, b)
		}
		if h.Get("X-Request-Id") == "" {
			t.Fatalf("no X-Request-Id on a 401")
		}
	}
	if st, _, _ := cpDo(t, http.MethodGet, r.url+"/_metrics", "", nil, nil); st != http.StatusUnauthorized {
		t.Fatalf("metrics without a token: %d", st)
	}
	// A node that does not answer the token given is not recorded: 502.
	st, b := r.shard(t, http.MethodPut, "nodes/n1", map[string]any{"addr": n1.Addr(), "token": "not-its-token"}, nil)
	if st != http.StatusBadGateway || !strings.Contains(string(b), "error") {
		t.Fatalf("wrong node token: %d %s", st, b)
	}
	var nodes []map[string]any
	if st, _ := r.shard(t, http.MethodGet, "nodes", nil, &nodes); st != http.StatusOK || len(nodes) != 0 {
		t.Fatalf("after refused put: %d %v", st, nodes)
	}
	// Nor one that does not answer at all.
	dead := startCPNode(t)
	dead.Close()
	if st, b := r.shard(t, http.MethodPut, "nodes/gone", map[string]any{"addr": dead.Addr(), "token": cpAdminToken}, nil); st != http.StatusBadGateway {
		t.Fatalf("dead node: %d %s", st, b)
	}
	// The right token: recorded, with the router's region by default.
	var ans struct {
		Node         string   `json:"node"`
		Unreplicated []string `json:"unreplicated"`
	}
	st, b = r.shard(t, http.MethodPut, "nodes/n1", map[string]any{"addr": n1.Addr(), "token": cpAdminToken}, &ans)
	if st != http.StatusCreated || ans.Node != "n1" || ans.Unreplicated == nil {
		t.Fatalf("put node: %d %s", st, b)
	}
	st, b = r.shard(t, http.MethodGet, "nodes", nil, &nodes)
	if st != http.StatusOK || len(nodes) != 1 || nodes[0]["name"] != "n1" || nodes[0]["addr"] != "http://"+n1.Addr() || nodes[0]["region"] != "eu" {
		t.Fatalf("nodes: %d %s", st, b)
	}
	if strings.Contains(string(b), cpAdminToken) || strings.Contains(string(b), "token") {
		t.Fatalf("a node's token is returned: %s", b)
	}
	// A node holding a tenant is not forgotten; an empty one is.
	r.place(t, "acme", "n1")
	if st, b := r.shard(t, http.MethodDelete, "nodes/n1", nil, nil); st != http.StatusConflict {
		t.Fatalf("delete node holding a tenant: %d %s", st, b)
	}
	if st, b := r.shard(t, http.MethodDelete, "tenants/acme", nil, nil); st != http.StatusNoContent {
		t.Fatalf("delete tenant: %d %s", st, b)
	}
	if st, b := r.shard(t, http.MethodDelete, "nodes/n1", nil, nil); st != http.StatusNoContent {
		t.Fatalf("delete node: %d %s", st, b)
	}
	if st, _ := r.shard(t, http.MethodDelete, "nodes/n1", nil, nil); st != http.StatusNotFound {
		t.Fatalf("delete unknown node: %d", st)
	}
	// Every change and refusal is in the audit log, and no token is.
	raw, err := os.ReadFile(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), cpAdminToken) || strings.Contains(string(raw), cpRouterToken) {
		t.Fatalf("a token in the audit log: %s", raw)
	}
	var lines []audit.Entry
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		var e audit.Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		lines = append(lines, e)
	}
	var got []string
	for _, e := range lines {
		if e.RequestID == "" || e.Router != r.rt.ID() || e.Who == "" {
			t.Fatalf("audit entry lacks who or request id: %+v", e)
		}
		got = append(got, fmt.Sprintf("%s:%d", e.What, e.Status))
	}
	// The three refusals of a token from one address: the first written
	// whole, the others counted at the minute's end (package audit).
	want := "auth:401 put_node:502 put_node:502 put_node:201 place:201 delete_node:409 delete_tenant:204 delete_node:204 delete_node:404"
	if strings.Join(got, " ") != want {
		t.Fatalf("audit:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
}

func TestPlaceOnLeastBytesCP(t *testing.T) {
	r := startCPRouter(t, nil)
	n1, n2, n3 := startCPNode(t), startCPNode(t), startCPNode(t)
	r.addNode(t, "n1", n1)
	r.addNode(t, "n2", n2)
	r.addNode(t, "n3", n3)
	// Fill n1 and n3; n2 has least bytes on disk.
	r.place(t, "big1", "n1")
	r.place(t, "big3", "n3")
	for _, tn := range []string{"big1", "big3"} {
		r.mustQuery(t, tn, "create collection docs (body text)")
		body := strings.Repeat("x", 2000)
		for range 5 {
			r.mustQuery(t, tn, fmt.Sprintf("put docs {body: '%s'}", body))
		}
	}
	if got := r.place(t, "fresh", ""); got != "n2" {
		t.Fatalf("placed on %s, want n2 (least bytes)", got)
	}
	// Placed tenants answer at once, and exist on their node's disk.
	if st, _, b := r.query(t, "fresh", "create collection c (a int)"); st != http.StatusOK {
		t.Fatalf("query on new tenant: %d %s", st, b)
	}
	if st, b := n2.admin(t, http.MethodGet, "/_admin/tenants", nil); st != http.StatusOK || !strings.Contains(string(b), `"fresh"`) {
		t.Fatalf("n2 tenants: %d %s", st, b)
	}
	// A second placement of the same name is refused; a named node must exist.
	if st, _ := r.shard(t, http.MethodPut, "tenants/fresh", map[string]any{}, nil); st != http.StatusConflict {
		t.Fatalf("second place: %d", st)
	}
	if st, _ := r.shard(t, http.MethodPut, "tenants/other", map[string]any{"node": "nx"}, nil); st != http.StatusNotFound {
		t.Fatalf("place on unknown node: %d", st)
	}
	if st, _ := r.shard(t, http.MethodPut, "tenants/Bad!", map[string]any{}, nil); st != http.StatusBadRequest {
		t.Fatalf("bad name: %d", st)
	}
	// ?bytes lists each tenant's size as its node has it.
	var list []tenantEntry
	if st, b := r.shard(t, http.MethodGet, "tenants?bytes", nil, &list); st != http.StatusOK || len(list) != 3 {
		t.Fatalf("tenants: %d %s", st, b)
	}
	for _, e := range list {
		if e.Bytes == nil || *e.Bytes <= 0 || e.State != "active" {
			t.Fatalf("entry %+v", e)
		}
		if e.Name == "big1" && *e.Bytes < 10000 {
			t.Fatalf("big1 is %d bytes", *e.Bytes)
		}
	}
	var plain []map[string]any
	if _, b := r.shard(t, http.MethodGet, "tenants", nil, &plain); strings.Contains(string(b), "bytes") {
		t.Fatalf("bytes without ?bytes: %s", b)
	}
}

func TestPlaceRecordedTenantRefusedCP(t *testing.T) {
	r := startCPRouter(t, nil)
	n1 := startCPNode(t)
	r.addNode(t, "n1", n1)
	// Recorded behind the router's back: refused before any file is made.
	s, err := r.rt.lead.Changes(cpCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PlaceTenant(cpCtx(t), "taken", global.Tenant{Node: "n1", State: global.StateActive}, mustNodeRev(t, s, "n1")); err != nil {
		t.Fatal(err)
	}
	if st, _ := r.shard(t, http.MethodPut, "tenants/taken", map[string]any{}, nil); st != http.StatusConflict {
		t.Fatalf("place of a recorded tenant: %d", st)
	}
	if st, b := n1.admin(t, http.MethodGet, "/_admin/tenants", nil); st != http.StatusOK || strings.Contains(string(b), "taken") {
		t.Fatalf("a file was made: %s", b)
	}
}

// failingDirectory fails every transaction writing a key under prefix
// (a directory that loses the placement's record).
type failingDirectory struct {
	global.Directory
	prefix string
}

func (d *failingDirectory) Txn(ctx context.Context, conds []global.Cond, ops []global.Op) (int64, error) {
	for _, op := range ops {
		if strings.HasPrefix(op.Key, d.prefix) {
			return 0, fmt.Errorf("lost the record: %w", global.ErrConflict)
		}
	}
	return d.Directory.Txn(ctx, conds, ops)
}

func TestPlaceRecordFailsDeletesFileCP(t *testing.T) {
	mem := global.NewMemory()
	t.Cleanup(func() { mem.Close() })
	r := startCPRouter(t, func(c *Config) { c.Directory = &failingDirectory{Directory: mem, prefix: global.TenantKey("lost")} })
	n1 := startCPNode(t)
	r.addNode(t, "n1", n1)
	if st, b := r.shard(t, http.MethodPut, "tenants/lost", map[string]any{}, nil); st != http.StatusConflict {
		t.Fatalf("place with the record failing: %d %s", st, b)
	}
	// The file made on the node first is deleted again.
	if st, b := n1.admin(t, http.MethodGet, "/_admin/tenants", nil); st != http.StatusOK || strings.Contains(string(b), "lost") {
		t.Fatalf("the unrecorded file stays: %s", b)
	}
	r.place(t, "kept", "")
	if _, b := n1.admin(t, http.MethodGet, "/_admin/tenants", nil); !strings.Contains(string(b), "kept") {
		t.Fatalf("a recorded tenant's file: %s", b)
	}
}

func mustNodeRev(tb testing.TB, s *global.Store, n string) int64 {
	tb.Helper()
	v, err := s.GetNode(cpCtx(tb), n)
	if err != nil {
		tb.Fatal(err)
	}
	return v.Rev
}

func TestForwardEveryRouteCP(t *testing.T) {
	r := startCPRouter(t, nil)
	n1 := startCPNode(t)
	r.addNode(t, "n1", n1)
	r.place(t, "acme", "")

	r.mustQuery(t, "acme", "create collection items (name text @hash, n int @sorted)")
	// REST insert.
	st, h, b := r.data(t, http.MethodPost, "/t/acme/items", `[{"name": "a", "n": 1}, {"name": "b", "n": 2}]`, nil)
	if st != http.StatusCreated || !strings.Contains(string(b), `"inserted":2`) || h.Get("Fenec-Seq") == "" {
		t.Fatalf("insert: %d %v %s", st, h, b)
	}
	// A subscription opened now sees the later writes.
	_, events := r.openStream(t, "/t/acme/items/changes")
	if ev, _ := nextEvent(t, events); ev.name != "seed" || !strings.Contains(ev.data, `"a"`) {
		t.Fatalf("seed %+v", ev)
	}
	// Batch.
	batch := `{"query": "put items {name: 'c', n: 3}"}` + "\n" + `{"query": "put items {name: 'd', n: 4}"}` + "\n"
	if st, _, b := r.data(t, http.MethodPost, "/t/acme/batch", batch, nil); st != http.StatusOK || !strings.Contains(string(b), `"ok":2`) {
		t.Fatalf("batch: %d %s", st, b)
	}
	if ev, _ := nextEvent(t, events); ev.name != "change" || !strings.Contains(ev.data, `"c"`) || !strings.Contains(ev.data, `"d"`) {
		t.Fatalf("change %+v", ev)
	}
	// REST read, patch, delete by filter.
	if st, _, b := r.data(t, http.MethodGet, "/t/acme/items?n=gte.2&order=n.desc&select=name", "", nil); st != http.StatusOK ||
		string(b) != `[{"name":"d"},{"name":"c"},{"name":"b"}]`+"\n" && string(b) != `[{"name":"d"},{"name":"c"},{"name":"b"}]` {
		t.Fatalf("get: %d %s", st, b)
	}
	if st, _, b := r.data(t, http.MethodPatch, "/t/acme/items?name=eq.a", `{"n": 10}`, nil); st != http.StatusOK || !strings.Contains(string(b), `"updated":1`) {
		t.Fatalf("patch: %d %s", st, b)
	}
	if st, _, b := r.data(t, http.MethodDelete, "/t/acme/items?name=eq.b", "", nil); st != http.StatusOK || !strings.Contains(string(b), `"deleted":1`) {
		t.Fatalf("delete: %d %s", st, b)
	}
	// HEAD (the tenant's health route takes it).
	if st, h, b := r.data(t, http.MethodHead, "/t/acme/_health", "", nil); st != http.StatusOK || len(b) != 0 || h.Get("X-Request-Id") == "" {
		t.Fatalf("head: %d %s", st, b)
	}
	// The change feed.
	st, h, b = r.data(t, http.MethodGet, "/t/acme/_changes?since=0&limit=100", "", nil)
	if st != http.StatusOK || h.Get("Fenec-Next") == "" || strings.Count(string(b), "\n") < 4 {
		t.Fatalf("_changes: %d %v %s", st, h, b)
	}
	// The query route, with a count.
	if b := r.mustQuery(t, "acme", "get items count"); !strings.Contains(string(b), `"count":3`) {
		t.Fatalf("count: %s", b)
	}
	// The client's request id is passed to the node and back.
	if _, h, _ := r.data(t, http.MethodGet, "/t/acme/items", "", map[string]string{"X-Request-Id": "req-42"}); h.Get("X-Request-Id") != "req-42" {
		t.Fatalf("request id %q", h.Get("X-Request-Id"))
	}
	// The router's own answers: an unknown tenant is 404, with an id.
	st, h, b = r.data(t, http.MethodGet, "/t/nobody/items", "", nil)
	if st != http.StatusNotFound || h.Get("X-Request-Id") == "" || !strings.Contains(string(b), "error") {
		t.Fatalf("unknown tenant: %d %v %s", st, h, b)
	}
	// Health needs no token; metrics do.
	if st, _, b := cpDo(t, http.MethodGet, r.url+"/_health", "", nil, nil); st != http.StatusOK || !strings.Contains(string(b), `"leading":true`) {
		t.Fatalf("health: %d %s", st, b)
	}
	if st, _, _ := cpDo(t, http.MethodGet, r.url+"/_metrics", "", nil, nil); st != http.StatusUnauthorized {
		t.Fatalf("metrics without token: %d", st)
	}
	st, _, b = cpDo(t, http.MethodGet, r.url+"/_metrics", cpRouterToken, nil, nil)
	for _, want := range []string{`fenec_router_tenants{node="n1"} 1`, `fenec_router_requests_total{code="201",route="rest"}`,
		`fenec_router_moves_total{outcome="done"} 0`, "fenec_router_cut_requests_total"} {
		if st != http.StatusOK || !strings.Contains(string(b), want) {
			t.Fatalf("metrics lack %s: %d\n%s", want, st, b)
		}
	}
	if strings.Contains(string(b), "acme") {
		t.Fatalf("a metric label names a tenant")
	}
}

func TestDeleteTenantCP(t *testing.T) {
	r := startCPRouter(t, nil)
	n1 := startCPNode(t)
	r.addNode(t, "n1", n1)
	r.place(t, "gone", "n1")
	r.mustQuery(t, "gone", "create collection c (a int)")
	if st, b := r.shard(t, http.MethodDelete, "tenants/gone", nil, nil); st != http.StatusNoContent {
		t.Fatalf("delete: %d %s", st, b)
	}
	if st, b := n1.admin(t, http.MethodGet, "/_admin/tenants", nil); st != http.StatusOK || strings.Contains(string(b), "gone") {
		t.Fatalf("node still has it: %s", b)
	}
	if st, _, _ := r.query(t, "gone", "get c"); st != http.StatusNotFound {
		t.Fatalf("query after delete: %d", st)
	}
	var list []tenantEntry
	if r.shard(t, http.MethodGet, "tenants", nil, &list); len(list) != 0 {
		t.Fatalf("still listed: %+v", list)
	}
	if st, _ := r.shard(t, http.MethodDelete, "tenants/gone", nil, nil); st != http.StatusNotFound {
		t.Fatalf("second delete: %d", st)
	}
	// A file already gone from its node is still forgotten.
	r.place(t, "half", "n1")
	n1.admin(t, http.MethodDelete, "/_admin/tenants/half", nil)
	if st, b := r.shard(t, http.MethodDelete, "tenants/half", nil, nil); st != http.StatusNoContent {
		t.Fatalf("delete with file gone: %d %s", st, b)
	}
}

func TestDeadNodeAnswers502CP(t *testing.T) {
	r := startCPRouter(t, nil)
	n1 := startCPNode(t)
	r.addNode(t, "n1", n1)
	r.place(t, "lost", "n1")
	r.mustQuery(t, "lost", "create collection c (a int)")
	n1.CloseClientConnections()
	n1.Close()
	st, _, b := r.query(t, "lost", "get c")
	if st != http.StatusBadGateway || !strings.Contains(string(b), "error") {
		t.Fatalf("dead node: %d %s", st, b)
	}
}

func TestHeldTenantRefusedCP(t *testing.T) {
	r := startCPRouter(t, nil)
	n1, n2 := startCPNode(t), startCPNode(t)
	r.addNode(t, "n1", n1)
	r.addNode(t, "n2", n2)
	r.place(t, "busy", "n1")
	s, err := r.rt.lead.Changes(cpCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	at, err := s.GetTenant(cpCtx(t), "busy")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Hold(cpCtx(t), "busy", at, "quota"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ method, path string }{
		{http.MethodPost, "tenants/busy/move"}, {http.MethodDelete, "tenants/busy"},
	} {
		var ans map[string]any
		st, b := r.shard(t, c.method, c.path, map[string]any{"to": "n2"}, &ans)
		if c.method == http.MethodDelete {
			st, b = r.shard(t, c.method, c.path, nil, &ans)
		}
		if st != http.StatusConflict || ans["held_by"] != "quota" {
			t.Fatalf("%s %s on a held tenant: %d %s", c.method, c.path, st, b)
		}
	}
	// Still where it was, still answering.
	if _, b := n1.admin(t, http.MethodGet, "/_admin/tenants", nil); !strings.Contains(string(b), "busy") {
		t.Fatalf("source lost it: %s", b)
	}
	if st, _, b := r.query(t, "busy", "create collection c (a int)"); st != http.StatusOK {
		t.Fatalf("write on held tenant: %d %s", st, b)
	}
}

func TestUnbuiltAndUnknownRoutesCP(t *testing.T) {
	r := startCPRouter(t, nil)
	for path, want := range map[string]int{
		"leases": http.StatusMethodNotAllowed, "regions/eu/handoff": http.StatusBadRequest, // a handoff names "to"
		"nope": http.StatusNotFound, "tenants/a/b/c": http.StatusNotFound,
	} {
		if st, b := r.shard(t, http.MethodPost, path, nil, nil); st != want || !strings.Contains(string(b), "error") {
			t.Fatalf("POST %s: %d %s, want %d", path, st, b, want)
		}
	}
	// Without --auto-failover the router says it leases nothing.
	var ls struct {
		Leasing bool  `json:"leasing"`
		Nodes   []any `json:"nodes"`
	}
	if st, b := r.shard(t, http.MethodGet, "leases", nil, &ls); st != http.StatusOK || ls.Leasing || ls.Nodes == nil {
		t.Fatalf("GET leases without leasing: %d %s", st, b)
	}
	if st, _ := r.shard(t, http.MethodPost, "nodes", nil, nil); st != http.StatusMethodNotAllowed {
		t.Fatalf("POST nodes: %d", st)
	}
}

func TestPlaceInRegionCP(t *testing.T) {
	r := startCPRouter(t, func(c *Config) { c.Region = "eu" })
	eu, us, spare := startCPNode(t), startCPNode(t), startCPNode(t)
	for name, n := range map[string]*cpNode{"eu1": eu, "us1": us} {
		region := strings.TrimSuffix(name, "1")
		if st, b := r.shard(t, http.MethodPut, "nodes/"+name, map[string]any{"addr": n.Addr(), "token": cpAdminToken, "region": region}, nil); st != http.StatusCreated {
			t.Fatalf("put %s: %d %s", name, st, b)
		}
	}
	// A standby node in the router's region takes no placement of its own.
	if st, b := r.shard(t, http.MethodPut, "nodes/eu2", map[string]any{"addr": spare.Addr(), "token": cpAdminToken, "standby": true}, nil); st != http.StatusCreated {
		t.Fatalf("put eu2: %d %s", st, b)
	}
	for i := range 3 {
		if got := r.place(t, fmt.Sprintf("e%d", i), ""); got != "eu1" {
			t.Fatalf("placed in the router's region on %s", got)
		}
	}
	var ans map[string]string
	if st, b := r.shard(t, http.MethodPut, "tenants/u0", map[string]any{"region": "us"}, &ans); st != http.StatusCreated || ans["node"] != "us1" {
		t.Fatalf("placed in us: %d %s", st, b)
	}
	if st, b := r.shard(t, http.MethodPut, "tenants/x0", map[string]any{"region": "ap"}, nil); st != http.StatusConflict {
		t.Fatalf("a region with no node: %d %s", st, b)
	}
	var nodes []map[string]any
	r.shard(t, http.MethodGet, "nodes", nil, &nodes)
	if len(nodes) != 3 || nodes[1]["name"] != "eu2" || nodes[1]["standby"] != true || nodes[0]["standby"] != nil {
		t.Fatalf("nodes %v", nodes)
	}
}
