package tests

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/tlsx"
	"github.com/fenec-go/fenec/tests/cluster"
)

// The README's examples are run as written, with only what a test must
// change: its addresses and directories. A flag renamed, a route moved or
// a body the router now refuses fails here, not in a reader's shell.

// readmeBlocks returns the README's fenced code blocks, each as its lines.
func readmeBlocks(t *testing.T) [][]string {
	t.Helper()
	f, err := os.Open("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks [][]string
	var cur []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			if in {
				blocks = append(blocks, cur)
			}
			in, cur = !in, nil
			continue
		}
		if in {
			cur = append(cur, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return blocks
}

// readmeBlock is the first block with a line starting with first.
func readmeBlock(t *testing.T, first string) []string {
	t.Helper()
	for _, b := range readmeBlocks(t) {
		for _, l := range b {
			if strings.HasPrefix(l, first) {
				return b
			}
		}
	}
	t.Fatalf("the README has no example starting with %q", first)
	return nil
}

// shellWords splits a command line as a POSIX shell would for the
// examples' needs: words, '...' and "..." quoting, and a # comment.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		switch ch := line[i]; {
		case ch == '\'' || ch == '"':
			end := strings.IndexByte(line[i+1:], ch)
			if end < 0 {
				t.Fatalf("unclosed quote in %q", line)
			}
			w.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case ch == ' ' || ch == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case ch == '#' && !inWord:
			return words
		default:
			w.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// runCurl runs one example curl command line and fails t unless it is
// answered 2xx; -N (a stream) is read up to its first event.
func runCurl(t *testing.T, line string) {
	t.Helper()
	words := shellWords(t, line)
	if len(words) == 0 || words[0] != "curl" {
		t.Fatalf("not a curl line: %q", line)
	}
	method, url, body, stream := "", "", "", false
	hdr := http.Header{}
	for i := 1; i < len(words); i++ {
		switch words[i] {
		case "-X":
			i++
			method = words[i]
		case "-H":
			i++
			k, v, _ := strings.Cut(words[i], ":")
			hdr.Set(strings.TrimSpace(k), strings.TrimSpace(v))
		case "-d":
			i++
			body = words[i]
		case "-N":
			stream = true
		default:
			if strings.HasPrefix(words[i], "-") {
				t.Fatalf("an example's curl flag the test does not know: %s in %q", words[i], line)
			}
			url = words[i]
		}
	}
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	if method == "" {
		method = "GET"
		if body != "" {
			method = "POST"
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
		hdr.Set("Content-Type", "application/x-www-form-urlencoded") // what curl -d sends
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	req.Header = hdr
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("the README's %q is answered %d %s", line, res.StatusCode, b)
	}
	if stream {
		if ev, err := bufio.NewReader(res.Body).ReadString('\n'); err != nil || !strings.HasPrefix(ev, "event: ") {
			t.Fatalf("the README's %q streamed %q %v", line, ev, err)
		}
		return
	}
	_, _ = io.Copy(io.Discard, res.Body)
}

// TestReadmeTryIt runs the README's path against `fenec dev`, as a
// newcomer would: `make run` in one terminal, then in a second the "Try
// it" requests and the CLI block, each line as written but for the
// router's address (and the CLI's directory, a temp dir).
func TestReadmeTryIt(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	tryIt := readmeBlock(t, "curl -X PUT localhost:7700")
	cli := readmeBlock(t, `export PATH="$PWD/bin:$PATH" FENEC_ROUTER=http://127.0.0.1:7700`)
	// make run is its own block, and a second terminal is asked for
	// before the requests.
	text := string(readme)
	run, second, curls := strings.Index(text, "```\nmake run\n```"), strings.Index(text, "second terminal"), strings.Index(text, tryIt[0])
	if run < 0 || second < run || curls < second {
		t.Fatalf("the README does not start `make run` on its own and then send the requests from a second terminal (at %d, %d, %d)", run, second, curls)
	}
	c := cluster.New(t)
	addr := "127.0.0.1:" + strconv.Itoa(cluster.FreePorts(t, 1)[0])
	dev := startReadmeDev(t, c, addr)

	ran := 0
	for _, line := range tryIt {
		if strings.HasPrefix(line, "curl ") {
			runCurl(t, strings.ReplaceAll(line, "localhost:7700", addr))
			ran++
		}
	}
	if ran < 5 {
		t.Fatalf("ran %d of the example's requests", ran)
	}
	if !strings.Contains(dev.Log(), "FENEC_ROUTER=http://"+addr) {
		t.Fatalf("fenec dev does not print the CLI's FENEC_ROUTER:\n%s", dev.Log())
	}
	runReadmeCLI(t, cli, c.Dir(), "http://127.0.0.1:7700", "http://"+addr)

	// What the block did is there: the tenant it placed, the backup it
	// wrote into the directory it ran in.
	tenants := cluster.NewClient(t, "http://"+addr, "").Do("GET", "/_shard/tenants", nil)
	if !strings.Contains(string(tenants.Body), `"name":"orders"`) {
		t.Fatalf("the README's CLI block placed no tenant orders: %s", tenants.Body)
	}
	if fi, err := os.Stat(filepath.Join(c.Dir(), "demo.fenec")); err != nil || fi.Size() == 0 {
		t.Fatalf("the README's backup wrote no demo.fenec: %v", err)
	}
}

// startReadmeDev starts `fenec dev` as `make run` does, on addr, and waits
// until its node is recorded.
func startReadmeDev(t *testing.T, c *cluster.Cluster, addr string) *cluster.Proc {
	t.Helper()
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	// make run builds into bin/ and runs bin/fenec dev: the README's
	// PATH line names that directory.
	if !strings.Contains(string(mk), "BIN     := bin\n") || !strings.Contains(string(mk), "run: build\n\t$(BIN)/fenec dev --data ./data\n") {
		t.Fatal("make run no longer runs bin/fenec dev --data ./data: the README's blocks need looking at")
	}
	p := cluster.StartProc(t, c.Dir(), "dev", cluster.Bins().Fenec, "dev", "--data", filepath.Join(c.Dir(), "data"), "--listen", addr)
	cluster.WaitHealthy(t, p, "http://"+addr+"/_health")
	cl := cluster.NewClient(t, "http://"+addr, "")
	cluster.Eventually(t, wait, func() error {
		if r := cl.Do("GET", "/_shard/nodes", nil); !strings.Contains(string(r.Body), `"name":"local"`) {
			return fmt.Errorf("node not recorded yet: %s", r)
		}
		return nil
	})
	return p
}

// runReadmeCLI runs a README block of CLI lines in dir: export lines set
// the environment (the README's router URL replaced by router; its PATH
// must put make's bin/ first, whose fenec the test runs as it built it);
// every other line is fenec commands separated by ";", each of which must
// exit 0.
func runReadmeCLI(t *testing.T, block []string, dir, readmeRouter, router string) {
	t.Helper()
	var env []string
	ran := 0
	for _, line := range block {
		for _, words := range shellCommands(t, line) {
			switch words[0] {
			case "export":
				for _, kv := range words[1:] {
					k, v, ok := strings.Cut(kv, "=")
					switch {
					case !ok:
						t.Fatalf("the README exports %q, with no value", kv)
					case k == "PATH":
						if v != "$PWD/bin:$PATH" {
							t.Fatalf("the README's PATH is %q, not make's bin/ first", v)
						}
					case k == "FENEC_ROUTER":
						if v != readmeRouter {
							t.Fatalf("the README's FENEC_ROUTER is %q, not fenec dev's %q", v, readmeRouter)
						}
						env = append(env, k+"="+router)
					default:
						env = append(env, k+"="+v)
					}
				}
			case "fenec":
				r := fenecIn(t, dir, env, words[1:]...)
				if r.code != 0 {
					t.Fatalf("the README's %q: %s", strings.Join(words, " "), r)
				}
				if words[1] == "promote" && !strings.Contains(r.stdout, "already leads") {
					t.Fatalf("fenec promote on the dev router: %s", r)
				}
				ran++
			default:
				t.Fatalf("the README's CLI block runs %q, which the test does not know", words[0])
			}
		}
	}
	if ran < 8 {
		t.Fatalf("ran %d of the block's commands", ran)
	}
}

// shellCommands splits a line at its unquoted ";" into commands, each as
// its words (shellWords); an unquoted # after a space ends the line.
func shellCommands(t *testing.T, line string) [][]string {
	t.Helper()
	var cuts []int // the unquoted ;s
	quote := byte(0)
scan:
	for i := 0; i < len(line); i++ {
		switch ch := line[i]; {
		case quote != 0:
			if ch == quote {
				quote = 0
			}
		case ch == '\'' || ch == '"':
			quote = ch
		case ch == '#' && (i == 0 || line[i-1] == ' '):
			line = line[:i]
			break scan
		case ch == ';':
			cuts = append(cuts, i)
		}
	}
	var out [][]string
	start := 0
	for _, end := range append(cuts, len(line)) {
		if words := shellWords(t, line[start:end]); len(words) > 0 {
			out = append(out, words)
		}
		start = end + 1
	}
	return out
}

// TestReadmeDeployment starts a node and a router by the README's
// command lines, on loopback and in temp dirs, and records the node as
// the README's example does.
func TestReadmeDeployment(t *testing.T) {
	block := readmeBlock(t, "fenec-node ")
	c := cluster.New(t)
	work := c.Dir()
	// The tokens the example reads from files, and the paths it names,
	// in the test's directory.
	for name, tok := range map[string]string{"admin.token": "A", "data.token": "D", "router.token": "R"} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	local := func(args []string) {
		for i, a := range args {
			if strings.HasSuffix(a, ".token") || strings.HasPrefix(a, "certs/") || (i > 0 && args[i-1] == "--out") {
				args[i] = filepath.Join(work, a)
			}
		}
	}
	ports := cluster.FreePorts(t, 4)
	nodeAddr := "127.0.0.1:" + strconv.Itoa(ports[0])
	routerAddr := "127.0.0.1:" + strconv.Itoa(ports[1])
	var readmeNode, readmeRouter string
	var hc *http.Client // verifies against the example's CA, once made
	ran := 0
	for _, line := range block {
		words := shellWords(t, line)
		if len(words) == 0 {
			continue
		}
		args := words[1:]
		local(args)
		switch words[0] {
		case "fenec-node":
			readmeNode = flagValue(t, args, "--http")
			setFlag(t, args, "--dir", filepath.Join(work, "node"))
			setFlag(t, args, "--http", nodeAddr)
			p := cluster.StartProc(t, work, "node", cluster.Bins().Node, args...)
			readmeHealthy(t, p, hc, "https://"+nodeAddr+"/_health")
		case "fenec-shard":
			readmeRouter = flagValue(t, args, "--listen")
			setFlag(t, args, "--listen", routerAddr)
			setFlag(t, args, "--etcd-dir", filepath.Join(work, "shard"))
			setFlag(t, args, "--etcd-client-url", "https://127.0.0.1:"+strconv.Itoa(ports[2]))
			setFlag(t, args, "--etcd-peer-url", "https://127.0.0.1:"+strconv.Itoa(ports[3]))
			p := cluster.StartProc(t, work, "router", cluster.Bins().Shard, args...)
			readmeHealthy(t, p, hc, "https://"+routerAddr+"/_health")
		case "fenec":
			if args[0] == "register" && (readmeNode == "" || readmeRouter == "") {
				t.Fatalf("the README records a node before starting it: %q", line)
			}
			for i, a := range args {
				if readmeNode != "" {
					a = strings.ReplaceAll(a, readmeNode, nodeAddr)
				}
				if readmeRouter != "" {
					a = strings.ReplaceAll(a, readmeRouter, routerAddr)
				}
				args[i] = a
			}
			fenec(t, args...)
			if args[0] == "certs" {
				src := cluster.MustSource(t, tlsx.Files{CA: filepath.Join(work, "certs", "ca.pem")})
				var d net.Dialer
				tr := &http.Transport{DialTLSContext: src.Dialer(d.DialContext)}
				t.Cleanup(tr.CloseIdleConnections)
				hc = &http.Client{Transport: tr, Timeout: 2 * time.Second}
			} else {
				ran++
			}
		}
	}
	if ran == 0 {
		t.Fatal("the deployment example records no node")
	}
	// The node the example recorded takes a tenant and a write.
	src := cluster.MustSource(t, tlsx.Files{CA: filepath.Join(work, "certs", "ca.pem")})
	r := cluster.NewClientWith(t, "https://"+routerAddr, "R", src)
	wantStatus(t, r.Do("PUT", "/_shard/tenants/demo", map[string]any{"node": "n1"}), 201, "place on the README's node")
	cl := cluster.NewClientWith(t, "https://"+routerAddr, "D", src)
	cluster.Eventually(t, 30*time.Second, func() error { // its first lease grant
		if res := cl.Query("demo", "create collection c (v int)"); res.Status != 200 {
			return fmt.Errorf("first write: %s", res)
		}
		return nil
	})
}

// readmeHealthy waits for a process of the deployment example, over TLS.
func readmeHealthy(t *testing.T, p *cluster.Proc, hc *http.Client, url string) {
	t.Helper()
	if hc == nil {
		t.Fatalf("the README starts %s before making its certificates", p.Name())
	}
	cluster.Eventually(t, cluster.ReadyWait, func() error {
		select {
		case <-p.Exited():
			return fmt.Errorf("%s exited:\n%s", p.Name(), p.Log())
		default:
		}
		res, err := hc.Get(url)
		if err != nil {
			return err
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			return fmt.Errorf("%s: %d", url, res.StatusCode)
		}
		return nil
	})
}

// flagValue is the value of flag name in args.
func flagValue(t *testing.T, args []string, name string) string {
	t.Helper()
	for i := 0; i+1 < len(args); i++ {
		if args[i] == name {
			return args[i+1]
		}
	}
	t.Fatalf("the README's command has no %s: %v", name, args)
	return ""
}

// setFlag replaces the value of flag name in args.
func setFlag(t *testing.T, args []string, name, value string) {
	t.Helper()
	for i := 0; i+1 < len(args); i++ {
		if args[i] == name {
			args[i+1] = value
			return
		}
	}
	t.Fatalf("the README's command has no %s: %v", name, args)
}
