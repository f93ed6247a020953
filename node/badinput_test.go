package node

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
)

func TestBadInputWritesNothing(t *testing.T) {
	n := startNode(t, func(c *Config) { c.MaxBody = 1024 })
	people(t, n)
	seq, size := seqOf(t, n, "a"), fileSize(t, n, "a")
	big := `{"query":"put c {name: $1}","params":["` + strings.Repeat("x", 2000) + `"]}`
	wantJSONError(t, n.do("POST", "/t/a/query", big), 413)
	wantJSONError(t, n.do("POST", "/t/a/batch", big), 413)
	wantJSONError(t, n.do("POST", "/t/a/c", `{"name":"`+strings.Repeat("x", 2000)+`"}`), 413)
	for _, body := range []string{"", "{", `{"query": 5}`, `{"query":"get c"} trailing`, `[]`, `{"query":"get c","params":{}}`, "\xff\xfe"} {
		wantJSONError(t, n.do("POST", "/t/a/query", body), 400)
	}
	wantJSONError(t, n.do("POST", "/t/a/query", `{"query":"put c {name: \"\xff\"}"}`), 400)
	// Chunked garbage: a chunk size that is not hex.
	res := rawRequest(t, n.s.Addr(), "POST /t/a/query HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{\"query\"\r\n0\r\n\r\n")
	body, _ := io.ReadAll(res.Body)
	wantJSONError(t, &resp{Status: res.StatusCode, Header: res.Header, Body: body}, 400)
	// A chunk longer than it says.
	res = rawRequest(t, n.s.Addr(), "POST /t/a/c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"name\":\"x\"}\r\n0\r\n\r\n")
	body, _ = io.ReadAll(res.Body)
	wantJSONError(t, &resp{Status: res.StatusCode, Header: res.Header, Body: body}, 400)
	// Traversal attempts through a real tenant's name.
	for _, path := range []string{"/t/a/..%2f..%2fx", "/t/a/%2e%2e/c", "/t/a/../a/c"} {
		res := rawRequest(t, n.s.Addr(), fmt.Sprintf("DELETE %s?n=gt.0 HTTP/1.1\r\nHost: x\r\n\r\n", path))
		if res.StatusCode != 400 && res.StatusCode != 404 {
			t.Fatalf("%s: %d", path, res.StatusCode)
		}
	}
	if seqOf(t, n, "a") != seq || fileSize(t, n, "a") != size {
		t.Fatal("bad input wrote")
	}
	if r := n.do("GET", "/t/a/c?count", ""); r.Status != 200 || strings.TrimSpace(string(r.Body)) != `{"count":3}` {
		t.Fatalf("node not serving after bad input: %d %s", r.Status, r.Body)
	}
}

func TestSIGTERMSyncsAndExitsZero(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	dir := t.TempDir()
	// Build the tenant in-process, then serve it from the binary.
	n := startNode(t, func(c *Config) { c.Dir = dir })
	people(t, n)
	if err := n.s.Close(); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	logf, err := os.Create(filepath.Join(t.TempDir(), "node.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(nodeBin, "--dir", dir, "--http", addr, "--sync", "60000", "--admin-token", adminToken)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-exited
		}
	})
	proc := &testNode{tb: t, url: "http://" + addr, client: n.client, cfg: n.cfg}
	testkit.Eventually(t, 10*time.Second, func() bool {
		res, err := n.client.Get(proc.url + "/_health")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200
	}, "the process serves")
	// Writes the process syncs only every minute, unless it shuts down well.
	proc.q("a", `put c [{name: "late1"}, {name: "late2"}]`)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("fenec-node exited: %v\n%s", err, b)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("fenec-node did not exit on SIGTERM")
	}
	n2 := startNode(t, func(c *Config) { c.Dir = dir })
	if r := n2.do("GET", "/t/a/c?name=in.(late1,late2)&count", ""); strings.TrimSpace(string(r.Body)) != `{"count":2}` {
		t.Fatalf("after SIGTERM: %d %s", r.Status, r.Body)
	}
}

// freeAddr is a loopback address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	n := startNode(t, nil)
	addr := n.s.Addr()
	if err := n.s.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// A refused insert says what in the body is wrong, in the body's terms:
// which document of several, a number out of range as the body's (not as
// a parameter of the statement the insert becomes), an id's value.
func TestRefusedInsertSaysWhere(t *testing.T) {
	n := startNode(t, nil)
	people(t, n)
	seq := seqOf(t, n, "a")
	for _, c := range []struct{ body, want string }{
		{`[{"name": "dee", "n": 4}, {"name": 5}]`, "document 2 of 2: "},
		{`{"name": "dee", "n": 1e400}`, "body: number 1e400 is out of range"},
		{`{"name": "dee", "id": -5}`, "id must be a positive int, got -5"},
	} {
		r := n.do("POST", "/t/a/c", c.body)
		wantJSONError(t, r, 400)
		if !strings.Contains(string(r.Body), c.want) || strings.Contains(string(r.Body), "$1") {
			t.Errorf("insert %s: %s, want it to say %q", c.body, r.Body, c.want)
		}
	}
	if seqOf(t, n, "a") != seq {
		t.Fatal("a refused insert wrote")
	}
}
