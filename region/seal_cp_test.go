package region

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/region/forward"
)

// keyFile writes a new routers' key file and returns its path.
func keyFile(tb testing.TB) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "directory.key")
	if err := os.WriteFile(path, []byte(global.NewKeyText()+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// rawNode reads node n's record as the directory holds it.
func rawNode(tb testing.TB, d global.Directory, n string) []byte {
	tb.Helper()
	kv, err := d.Get(cpCtx(tb), global.NodeKey(n))
	if err != nil {
		tb.Fatal(err)
	}
	return kv.Value
}

// TestNodeTokenSealedAndRecordChecked: with --directory-key-file the
// directory holds no node token; a record pointed at another listener
// outside fenec gets neither the token nor a client's request, and the
// client is told why.
func TestNodeTokenSealedAndRecordChecked(t *testing.T) {
	mem := global.NewMemory()
	t.Cleanup(func() { mem.Close() })
	n1 := startCPNode(t)
	r := startCPRouter(t, func(c *Config) { c.Directory, c.DirectoryKeyFile = mem, keyFile(t) })
	r.addNode(t, "n1", n1)
	r.place(t, "acme", "n1")
	r.mustQuery(t, "acme", "create collection c (name text)")
	raw := rawNode(t, mem, "n1")
	if bytes.Contains(raw, []byte(cpAdminToken)) || !bytes.Contains(raw, []byte(`"sealed"`)) {
		t.Fatalf("the directory holds %s", raw)
	}

	// Someone with the directory's port points n1 at their listener.
	var reached atomic.Int64
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.WriteHeader(200)
	}))
	t.Cleanup(evil.Close)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m["addr"] = evil.URL
	b, _ := json.Marshal(m)
	rev, err := mem.Put(cpCtx(t), global.NodeKey("n1"), b)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.rt.watcher.WaitRev(cpCtx(t), rev); err != nil {
		t.Fatal(err)
	}
	st, _, body := r.data(t, "POST", "/t/acme/query", `{"query": "get c"}`, map[string]string{"Authorization": "Bearer a-client-data-token"})
	if st != http.StatusBadGateway || !strings.Contains(string(body), forward.ErrUntrustedNode.Error()[:40]) {
		t.Fatalf("a request for a rewritten record: %d %s", st, body)
	}
	// The router's own calls refuse it too (a node's sizes, for a
	// placement on the region).
	if st, b := r.shard(t, http.MethodPut, "tenants/other", map[string]any{"node": "n1"}, nil); st < 400 {
		t.Fatalf("placing on a rewritten record: %d %s", st, b)
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("the rewritten record's listener was reached %d times", n)
	}
	// Recording the node again, by an operator, makes it usable again.
	r.addNode(t, "n1", n1)
	if st, _, body := r.data(t, "POST", "/t/acme/query", `{"query": "get c"}`, nil); st != 200 {
		t.Fatalf("after recording the node again: %d %s", st, body)
	}
}

// TestClearNodeTokensSealedAtStart: records written by a router without
// a key hold tokens in clear; the first router with the key to lead seals
// them as it starts, and forwards as before.
func TestClearNodeTokensSealedAtStart(t *testing.T) {
	mem := global.NewMemory()
	t.Cleanup(func() { mem.Close() })
	n1 := startCPNode(t)
	old := startCPRouter(t, func(c *Config) { c.Directory, c.ID = mem, "r1" })
	old.addNode(t, "n1", n1)
	old.place(t, "acme", "n1")
	old.mustQuery(t, "acme", "create collection c (name text)")
	if raw := rawNode(t, mem, "n1"); !bytes.Contains(raw, []byte(cpAdminToken)) {
		t.Fatalf("a router without a key wrote %s", raw)
	}
	if err := old.rt.Close(); err != nil {
		t.Fatal(err)
	}

	r := startCPRouter(t, func(c *Config) { c.Directory, c.DirectoryKeyFile, c.ID = mem, keyFile(t), "r1" })
	raw := rawNode(t, mem, "n1")
	if bytes.Contains(raw, []byte(cpAdminToken)) || !bytes.Contains(raw, []byte(`"sealed"`)) || bytes.Contains(raw, []byte("clear")) {
		t.Fatalf("after the keyed router's start the directory holds %s", raw)
	}
	if st, _, body := r.data(t, "POST", "/t/acme/query", `{"query": "get c"}`, nil); st != 200 {
		t.Fatalf("forwarding over the sealed record: %d %s", st, body)
	}
}

// TestKeyedRouterRefusesClearRecords: a record in clear that appears
// after the start (written outside fenec) is not used by a router with
// the key.
func TestKeyedRouterRefusesClearRecords(t *testing.T) {
	mem := global.NewMemory()
	t.Cleanup(func() { mem.Close() })
	n1 := startCPNode(t)
	r := startCPRouter(t, func(c *Config) { c.Directory, c.DirectoryKeyFile = mem, keyFile(t) })
	r.addNode(t, "n1", n1)
	r.place(t, "acme", "n1")
	clear := `{"addr": "http://` + n1.Addr() + `", "token": "` + cpAdminToken + `", "region": "eu", "lease": false}`
	rev, err := mem.Put(cpCtx(t), global.NodeKey("n1"), []byte(clear))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.rt.watcher.WaitRev(cpCtx(t), rev); err != nil {
		t.Fatal(err)
	}
	if st, _, body := r.data(t, "POST", "/t/acme/query", `{"query": "get c"}`, nil); st != http.StatusBadGateway {
		t.Fatalf("a record in clear under a keyed router: %d %s", st, body)
	}
}

// TestKeyRotationResealsAtStart: a key file with a new key first and the
// old one after opens what the old sealed, and the leading router seals
// every record again under the new key as it starts; a router holding
// only the new key then uses them.
func TestKeyRotationResealsAtStart(t *testing.T) {
	mem := global.NewMemory()
	t.Cleanup(func() { mem.Close() })
	n1 := startCPNode(t)
	oldKey, newKey := global.NewKeyText(), global.NewKeyText()
	write := func(lines ...string) string {
		path := filepath.Join(t.TempDir(), "directory.key")
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	first := startCPRouter(t, func(c *Config) { c.Directory, c.DirectoryKeyFile, c.ID = mem, write(oldKey), "r1" })
	first.addNode(t, "n1", n1)
	first.place(t, "acme", "n1")
	first.mustQuery(t, "acme", "create collection c (name text)")
	sealedOld := rawNode(t, mem, "n1")
	if err := first.rt.Close(); err != nil {
		t.Fatal(err)
	}

	rotated := startCPRouter(t, func(c *Config) { c.Directory, c.DirectoryKeyFile, c.ID = mem, write(newKey, oldKey), "r1" })
	if bytes.Equal(rawNode(t, mem, "n1"), sealedOld) {
		t.Fatal("the rotated router's start left the record sealed under the old key")
	}
	if err := rotated.rt.Close(); err != nil {
		t.Fatal(err)
	}
	onlyNew := startCPRouter(t, func(c *Config) { c.Directory, c.DirectoryKeyFile, c.ID = mem, write(newKey), "r1" })
	if st, _, body := onlyNew.data(t, "POST", "/t/acme/query", `{"query": "get c"}`, nil); st != 200 {
		t.Fatalf("a router holding only the new key: %d %s", st, body)
	}
}
