package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/tests/cluster"
)

// TestDevDirectoryClosed: `fenec dev` (what `make run` starts) keeps its
// directory in an etcd member on loopback, where every local user
// reaches the port. etcdctl with no credentials, as such a user runs it,
// learns nothing there — no node's token or address, no key, no member —
// and changes nothing: the node stays reachable through the router.
func TestDevDirectoryClosed(t *testing.T) {
	c := cluster.New(t)
	data := filepath.Join(c.Dir(), "data")
	addr := "127.0.0.1:" + strconv.Itoa(cluster.FreePorts(t, 1)[0])
	p := cluster.StartProc(t, c.Dir(), "dev", cluster.Bins().Fenec, "dev", "--data", data, "--listen", addr)
	cluster.WaitHealthy(t, p, "http://"+addr+"/_health")
	var etcd string
	cluster.Eventually(t, wait, func() error {
		m := regexp.MustCompile(`etcd: +(http://\S+)`).FindStringSubmatch(p.Log())
		if m == nil {
			return fmt.Errorf("no etcd url in the welcome yet:\n%s", p.Log())
		}
		etcd = m[1]
		return nil
	})
	cl := cluster.NewClient(t, "http://"+addr, "")
	wantStatus(t, cl.Do("PUT", "/_shard/tenants/demo", nil), 201, "place")
	wantStatus(t, cl.Query("demo", "create collection notes (body text)"), 200, "create")

	if got := testkit.EtcdStranger(t, []string{etcd}, nil); len(got) > 0 {
		t.Fatalf("etcdctl with no credentials against fenec dev's directory got:\n%s", strings.Join(got, "\n"))
	}
	wantStatus(t, cl.Query("demo", "get notes"), 200, "read after the stranger")
	for _, f := range []string{"directory.key", "directory.password"} {
		wantMode(t, filepath.Join(data, "shard", f), 0o600)
	}
}

// TestPlainRouterDirectoryClosed: a router started as `fenec-shard
// --etcd-dir DIR`, given no key or password, closes its new directory:
// a client with no credentials learns nothing and changes nothing, and
// the router started again reads the key and password it made.
func TestPlainRouterDirectoryClosed(t *testing.T) {
	c := cluster.New(t)
	r := c.StartRouter("router", cluster.RouterOptions{NoSecrets: true})
	n1 := c.StartNode("n1", cluster.NodeOptions{})
	r.Register(n1)
	r.Place("acme", n1)
	cl := r.Client()
	wantStatus(t, cl.Query("acme", "create collection c (v int)"), 200, "create")

	if got := testkit.EtcdStranger(t, []string{r.EtcdURL()}, nil); len(got) > 0 {
		t.Fatalf("etcdctl with no credentials against the router's directory got:\n%s", strings.Join(got, "\n"))
	}
	for _, f := range []string{"directory.key", "directory.password"} {
		wantMode(t, filepath.Join(r.DataDir, f), 0o600)
	}
	r.Stop()
	r.Restart()
	wantStatus(t, cl.Query("acme", "get c"), 200, "read after the router's restart")
}

// wantMode fails t unless path's permission bits are want.
func wantMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != want {
		t.Fatalf("%s: mode %#o, want %#o", path, got, want)
	}
}
