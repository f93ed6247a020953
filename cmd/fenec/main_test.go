package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/internal/testkit/testnode"
	"github.com/fenec-go/fenec/internal/tokenfile"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait bounds every wait in these tests: a bound on a hang, not a measure
// of speed.
const wait = 30 * time.Second

const testAdminToken = testnode.AdminToken

// call sends one request and returns the status and body.
func call(tb testing.TB, method, url, token, body string) (int, string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, strings.TrimSpace(string(b))
}

// must fails tb unless the status is want.
func must(tb testing.TB, want int) func(int, string) string {
	return func(got int, body string) string {
		tb.Helper()
		if got != want {
			tb.Fatalf("status %d, want %d: %s", got, want, body)
		}
		return body
	}
}

func query(tb testing.TB, base, tenant, q string) (int, string) {
	tb.Helper()
	b, _ := json.Marshal(map[string]string{"query": q})
	return call(tb, "POST", base+"/t/"+tenant+"/query", "", string(b))
}

// cli runs the command in process and returns its exit code and output.
func cli(ctx context.Context, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(ctx, args, &env{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }})
	return code, out.String(), errb.String()
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestUsage(t *testing.T) {
	ctx := context.Background()
	for _, args := range [][]string{
		nil,
		{"nope"},
		{"backup", "--tenants", t.TempDir(), "--token", "x"},
		{"backup", "http://127.0.0.1:1", "--token", "x"},
		{"restore", "http://127.0.0.1:1", "--tenants", t.TempDir()},
		{"backup", "a", "b", "--tenants", t.TempDir(), "--token", "x"},
		{"dev", "--bogus"},
		{"dev", "extra"},
	} {
		if code, _, _ := cli(ctx, args...); code != 2 {
			t.Errorf("fenec %q: exit %d, want 2", args, code)
		}
	}
}

func TestParseMixed(t *testing.T) {
	for _, args := range [][]string{
		{"URL", "--tenants", "D", "--token", "T"},
		{"--tenants", "D", "URL", "--token", "T"},
		{"--tenants", "D", "--token", "T", "URL"},
		{"--tenants=D", "--token=T", "--", "URL"},
	} {
		fs := flag.NewFlagSet("backup", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o := addCopyFlags(fs, &env{getenv: func(string) string { return "" }})
		pos, err := parseMixed(fs, args)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		a, err := nodeAdmin(&http.Client{}, pos, o.dir, o.token)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if a.api.Base != "http://URL" || o.dir != "D" || a.api.Token != "T" {
			t.Errorf("%q: base %q dir %q token %q", args, a.api.Base, o.dir, a.api.Token)
		}
	}
}

func TestBackupRestoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	src := testnode.Start(t, testnode.Options{})
	base := "http://" + src.Addr()
	for _, tn := range []string{"alpha", "beta"} {
		must(t, 201)(call(t, "PUT", base+"/_admin/tenants/"+tn, testAdminToken, ""))
		must(t, 200)(query(t, base, tn, "create collection c (name text @text, v vector<2> @hnsw(l2))"))
		must(t, 200)(query(t, base, tn, `put c [{name: "`+tn+` one", v: [0, 1]}, {name: "`+tn+` two", v: [1, 0]}]`))
	}
	must(t, 201)(call(t, "PUT", base+"/_admin/tenants/empty", testAdminToken, ""))

	dir := filepath.Join(t.TempDir(), "backup")
	code, out, errOut := cli(ctx, "backup", base, "--tenants", dir, "--token", testAdminToken)
	if code != 0 {
		t.Fatalf("backup: exit %d: %s %s", code, out, errOut)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, ","); got != "alpha.fenec,beta.fenec,empty.fenec" {
		t.Fatalf("backup dir holds %s (no temp file may stay)", got)
	}

	// The tenants change after the backup; a restore brings back the
	// backup's rows, ids and seq.
	must(t, 200)(query(t, base, "alpha", `put c {name: "alpha three"}`))
	must(t, 204)(call(t, "DELETE", base+"/_admin/tenants/beta", testAdminToken, ""))
	code, out, errOut = cli(ctx, "restore", base, "--tenants", dir, "--token", testAdminToken)
	if code != 0 {
		t.Fatalf("restore: exit %d: %s %s", code, out, errOut)
	}
	if !strings.Contains(out, "restored 3 tenants") {
		t.Fatalf("restore said %q", out)
	}
	for _, tn := range []string{"alpha", "beta"} {
		body := must(t, 200)(query(t, base, tn, "get c select id, name order id"))
		want := `[{"id":1,"name":"` + tn + ` one"},{"id":2,"name":"` + tn + ` two"}]`
		if body != want {
			t.Fatalf("%s after restore: %s, want %s", tn, body, want)
		}
		if body := must(t, 200)(query(t, base, tn, "get c select id near v [0.9, 0.1] limit 1")); !strings.HasPrefix(body, `[{"id":2,`) {
			t.Fatalf("%s near after restore: %s", tn, body)
		}
		if body := must(t, 200)(query(t, base, tn, "get c select id match name 'one'")); !strings.HasPrefix(body, `[{"id":1`) {
			t.Fatalf("%s match after restore: %s", tn, body)
		}
	}
	// A new write after the restore takes an id past every id the tenant
	// gave: 3 went to "alpha three", which the restore erased, and is
	// never given again.
	if body := must(t, 201)(call(t, "POST", base+"/t/alpha/c", "", `{"name":"alpha again"}`)); !strings.Contains(body, `"ids":[4]`) {
		t.Fatalf("insert after restore: %s", body)
	}

	// The same backup restores onto another, empty node.
	other := testnode.Start(t, testnode.Options{})
	obase := "http://" + other.Addr()
	if code, out, errOut := cli(ctx, "restore", obase, "--token", testAdminToken, "--tenants", dir); code != 0 {
		t.Fatalf("restore elsewhere: exit %d: %s %s", code, out, errOut)
	}
	if body := must(t, 200)(query(t, obase, "beta", "get c count")); body != `{"count":2}` {
		t.Fatalf("beta on the other node: %s", body)
	}
}

func TestBackupRefusals(t *testing.T) {
	ctx := context.Background()
	s := testnode.Start(t, testnode.Options{})
	base := "http://" + s.Addr()
	code, _, errOut := cli(ctx, "backup", base, "--tenants", t.TempDir(), "--token", "wrong")
	if code != 1 || !strings.Contains(errOut, "401") {
		t.Fatalf("wrong token: exit %d: %s", code, errOut)
	}
	// A damaged image is refused by the node and the restore says so.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad.fenec"), []byte("not an image"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = cli(ctx, "restore", base, "--tenants", dir, "--token", testAdminToken)
	if code != 1 || !strings.Contains(errOut, "tenant bad") {
		t.Fatalf("bad image: exit %d: %s", code, errOut)
	}
}

func TestDev(t *testing.T) {
	data := t.TempDir()
	for round := range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		out := &syncBuffer{}
		done := make(chan error, 1)
		cfg := devConfig{Data: data, Listen: "127.0.0.1:0"}
		go func() { done <- dev(ctx, cfg, out, testkit.Logger()) }()
		var base string
		testkit.Eventually(t, wait, func() bool {
			s := out.String()
			if _, rest, ok := strings.Cut(s, "router at "); ok {
				base, _, _ = strings.Cut(rest, " ")
				return true
			}
			select {
			case err := <-done:
				t.Fatalf("dev stopped: %v", err)
			default:
			}
			return false
		}, "fenec dev prints its address")
		if !strings.Contains(out.String(), "curl ") {
			t.Fatalf("no curl example: %s", out)
		}
		if round == 0 {
			must(t, 201)(call(t, "PUT", base+"/_shard/tenants/demo", "", ""))
			must(t, 200)(query(t, base, "demo", "create collection notes (body text @text)"))
			must(t, 201)(call(t, "POST", base+"/t/demo/notes", "", `{"body": "hello from fenec"}`))
		}
		// The second round runs on the same data: the placement and the
		// rows are still there, the node recorded again at its new port.
		body := must(t, 200)(query(t, base, "demo", "get notes select id, body match body 'hello'"))
		if !strings.HasPrefix(body, `[{"id":1,`) || !strings.HasSuffix(body, `"body":"hello from fenec"}]`) {
			t.Fatalf("round %d: match answered %s", round, body)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("dev stop: %v", err)
		}
	}
}

func TestRegister(t *testing.T) {
	data := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- dev(ctx, devConfig{Data: data, Listen: "127.0.0.1:0", Token: "rt"}, out, testkit.Logger())
	}()
	var base string
	testkit.Eventually(t, wait, func() bool {
		_, rest, ok := strings.Cut(out.String(), "router at ")
		base, _, _ = strings.Cut(rest, " ")
		return ok
	}, "fenec dev prints its address")
	other := testnode.Start(t, testnode.Options{})
	code, stdout, errOut := cli(ctx, "register", base, "--name", "n2", "--addr", "http://"+other.Addr(),
		"--admin-token", testAdminToken, "--token", "rt", "--region", "local")
	if code != 0 || !strings.Contains(stdout, "node n2 recorded") {
		t.Fatalf("register: exit %d: %s %s", code, stdout, errOut)
	}
	if body := must(t, 200)(call(t, "GET", base+"/_shard/nodes", "rt", "")); !strings.Contains(body, `"name":"n2"`) {
		t.Fatalf("nodes: %s", body)
	}
	// A wrong admin token is refused by the router's check of the node,
	// and register gives up once --wait passed.
	code, _, errOut = cli(ctx, "register", base, "--name", "n3", "--addr", "http://"+other.Addr(),
		"--admin-token", "wrong", "--token", "rt", "--region", "local", "--wait", "0s")
	if code != 1 || !strings.Contains(errOut, "502") {
		t.Fatalf("register with a wrong token: exit %d: %s", code, errOut)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestRegisterRetriesOnlyWhatCanPass: register asks again while the
// router or the node is not there yet, and gives up at once on a refusal
// asking again cannot change, however long --wait is.
func TestRegisterRetriesOnlyWhatCanPass(t *testing.T) {
	for _, c := range []struct {
		name    string
		answers []int    // statuses answered in turn; the last one repeats
		bodies  []string // bodies, likewise
		code    int      // register's exit code
		asked   int      // how many PUTs the router got
	}{
		{"bad request", []int{400}, []string{`{"error": "bad request: a node needs an addr and a region"}`}, 1, 1},
		{"wrong router token", []int{401}, []string{`{"error": "missing or wrong router token"}`}, 1, 1},
		{"one node twice", []int{409}, []string{`{"error": "node already recorded under another name"}`}, 1, 1},
		{"not up yet", []int{503, 502, 201}, []string{`{"error": "not ready"}`, `{"error": "node does not answer"}`, `{"node": "n"}`}, 0, 3},
		{"no leader yet", []int{409, 201}, []string{`{"error": "no router leads", "leader": "", "term": 0}`, `{"node": "n"}`}, 0, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			asked := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				i := min(asked, len(c.answers)-1)
				asked++
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(c.answers[i])
				io.WriteString(w, c.bodies[i])
			}))
			defer srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			code, _, errOut := cli(ctx, "register", srv.URL, "--name", "n", "--addr", "http://127.0.0.1:1",
				"--admin-token", "a", "--region", "r", "--wait", "1m")
			mu.Lock()
			defer mu.Unlock()
			if code != c.code || asked != c.asked {
				t.Fatalf("exit %d after %d asks, want %d after %d: %s", code, asked, c.code, c.asked, errOut)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, _ := cli(context.Background(), args...)
		if code != 0 || !strings.HasPrefix(out, "fenec ") {
			t.Fatalf("%v: exit %d %q", args, code, out)
		}
	}
}

// TestDevTokenFiles: fenec dev makes DATA/tokens its user's alone whatever
// it was, writes its token files 0600 over ones left with another mode,
// removes a router token an earlier run left, and takes the router's
// token from --token-file, showing it nowhere in its welcome.
func TestDevTokenFiles(t *testing.T) {
	data := t.TempDir()
	tokens := filepath.Join(data, "tokens")
	if err := os.MkdirAll(tokens, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"node-admin", "router"} {
		if err := os.WriteFile(filepath.Join(tokens, f), []byte("old\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(tokens, f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runDev := func(cfg devConfig, check func(base, welcome string)) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		out := &syncBuffer{}
		done := make(chan error, 1)
		go func() { done <- dev(ctx, cfg, out, testkit.Logger()) }()
		var base string
		testkit.Eventually(t, wait, func() bool {
			_, rest, ok := strings.Cut(out.String(), "router at ")
			base, _, _ = strings.Cut(rest, " ")
			select {
			case err := <-done:
				t.Fatalf("dev stopped: %v", err)
			default:
			}
			return ok && strings.Contains(out.String(), "curl ")
		}, "fenec dev prints its welcome")
		check(base, out.String())
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("dev stop: %v", err)
		}
	}
	mode := func(path string) os.FileMode {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return st.Mode().Perm()
	}

	runDev(devConfig{Data: data, Listen: "127.0.0.1:0"}, func(string, string) {
		if m := mode(tokens); m != 0o700 {
			t.Fatalf("tokens dir %#o, want 0700", m)
		}
		if m := mode(filepath.Join(tokens, "node-admin")); m != 0o600 {
			t.Fatalf("node-admin %#o, want 0600", m)
		}
		if _, err := os.Stat(filepath.Join(tokens, "router")); !os.IsNotExist(err) {
			t.Fatalf("a stale router token left behind: %v", err)
		}
	})

	file := filepath.Join(t.TempDir(), "router.token")
	if err := os.WriteFile(file, []byte("dev-router-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := cli(context.Background(), "dev", "--token-file", filepath.Join(t.TempDir(), "none"))
	if code != 2 {
		t.Fatalf("a --token-file that is not there: exit %d %s", code, errOut)
	}
	tok, err := tokenfile.Read(file)
	if err != nil {
		t.Fatal(err)
	}
	runDev(devConfig{Data: data, Listen: "127.0.0.1:0", Token: tok, TokenFile: file}, func(base, welcome string) {
		if strings.Contains(welcome, "dev-router-secret") || !strings.Contains(welcome, file) {
			t.Fatalf("the welcome shows the token or not its file:\n%s", welcome)
		}
		must(t, 401)(call(t, "GET", base+"/_shard/nodes", "", ""))
		must(t, 200)(call(t, "GET", base+"/_shard/nodes", "dev-router-secret", ""))
		if _, err := os.Stat(filepath.Join(tokens, "router")); !os.IsNotExist(err) {
			t.Fatalf("the token file's token copied into the data dir: %v", err)
		}
	})
}
