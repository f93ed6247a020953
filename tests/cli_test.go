package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/tests/cluster"
)

// cliRun is one run of the fenec binary.
type cliRun struct {
	code           int
	stdout, stderr string
}

func (r cliRun) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// fenecEnv runs the fenec binary with only the environment given (and
// PATH), so nothing of the test's own environment leaks into it.
func fenecEnv(t *testing.T, env []string, args ...string) cliRun {
	t.Helper()
	return fenecIn(t, "", env, args...)
}

// fenecIn is fenecEnv in directory dir ("": the test's own).
func fenecIn(t *testing.T, dir string, env []string, args ...string) cliRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, cluster.Bins().Fenec, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("fenec %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return cliRun{code: code, stdout: out.String(), stderr: errb.String()}
}

// operator is the environment an operator's shell would hold: the router's
// URL and a file holding its token.
func operator(t *testing.T, r *cluster.Router) []string {
	t.Helper()
	tok := filepath.Join(t.TempDir(), "router-token")
	if err := os.WriteFile(tok, []byte(cluster.RouterToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"FENEC_ROUTER=" + r.URL(), "FENEC_ROUTER_TOKEN_FILE=" + tok}
}

// ok runs the CLI and fails t unless it exits 0; it returns stdout.
func ok(t *testing.T, env []string, args ...string) string {
	t.Helper()
	r := fenecEnv(t, env, args...)
	if r.code != 0 {
		t.Fatalf("fenec %v: %s", args, r)
	}
	return r.stdout
}

// refused runs the CLI and fails t unless it exits code with every want in
// its stderr; it returns the run.
func refused(t *testing.T, env []string, code int, want []string, args ...string) cliRun {
	t.Helper()
	r := fenecEnv(t, env, args...)
	if r.code != code {
		t.Fatalf("fenec %v: want exit %d: %s", args, code, r)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Fatalf("fenec %v: stderr lacks %q: %s", args, w, r)
		}
	}
	return r
}

// tableRow finds the line of a table whose first cell is name and returns
// its cells.
func tableRow(t *testing.T, out, name string) []string {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 0 && f[0] == name {
			return f
		}
	}
	t.Fatalf("no row %q in:\n%s", name, out)
	return nil
}

// TestCLIVerbs runs the operator's verbs against a leasing router and two
// leased nodes, as tables and as JSON, checking each against what the
// router and the nodes hold.
func TestCLIVerbs(t *testing.T) {
	cl, r, n1, _ := leasedPair(t)
	n3 := cl.StartNode("n3", cluster.NodeOptions{Args: []string{"--lease", "--sync", "always", "--replication-token", replToken}})
	r.Register(n3)
	env := operator(t, r)
	c := r.Client()

	nodes := ok(t, env, "nodes")
	if row := tableRow(t, nodes, "n1"); row[1] != n1.URL() || row[2] != "local" || row[4] != "yes" {
		t.Fatalf("nodes: n1 row %q", row)
	}
	var listed []map[string]any
	if err := json.Unmarshal([]byte(ok(t, env, "nodes", "-o", "json")), &listed); err != nil || len(listed) != 3 {
		t.Fatalf("nodes -o json: %v %v", listed, err)
	}

	if out := ok(t, env, "place", "a", "--node", "n1"); !strings.Contains(out, "tenant a placed on n1") {
		t.Fatalf("place: %s", out)
	}
	ok(t, env, "place", "b", "--node", "n1")
	for _, tn := range []string{"a", "b"} {
		c.MustQuery(tn, "create collection kv (k text @unique, v int)")
		for i := range 3 {
			c.MustQuery(tn, "put kv {k: $1, v: $2}", fmt.Sprintf("%s%d", tn, i), i)
		}
	}
	cluster.Eventually(t, wait, func() error {
		out := fenecEnv(t, env, "tenants", "--bytes").stdout
		if !strings.Contains(out, "BYTES") || !strings.Contains(out, "n2") {
			return fmt.Errorf("a's replica not listed yet:\n%s", out)
		}
		return nil
	})
	if row := tableRow(t, ok(t, env, "tenants"), "a"); row[1] != "n1" || row[2] != "active" || row[3] != "n2" {
		t.Fatalf("tenants: a row %q", row)
	}
	// One directory, no region of its own: its own router leases.
	if row := tableRow(t, ok(t, env, "regions"), "local"); row[1] != "this-directory" || row[2] != "router" || row[3] != "1" || row[4] != "3" {
		t.Fatalf("regions: local row %q", row)
	}
	leases := ok(t, env, "leases")
	if !strings.Contains(leases, "leasing at term") {
		t.Fatalf("leases: %s", leases)
	}
	if row := tableRow(t, leases, "n1"); row[1] != "yes" || row[5] != "yes" {
		t.Fatalf("leases: n1 row %q", row)
	}

	// A quota set from the CLI keeps the limits it does not name.
	ok(t, env, "quota", "a", "--rows", "1000")
	ok(t, env, "quota", "a", "--streams", "5")
	var q map[string]float64
	if err := json.Unmarshal([]byte(ok(t, env, "quota", "a", "-o", "json")), &q); err != nil || q["rows"] != 1000 || q["streams"] != 5 {
		t.Fatalf("quota: %v %v", q, err)
	}

	// The read across tenants, merged by order and by group.
	out := ok(t, env, "query", "--tenants", "a,b", "--order", "v:desc", "--limit", "2", "get kv select k, v order v desc limit 2")
	if !strings.Contains(out, "2 rows from 2 tenants") || tableRow(t, out, "a")[2] != "2" {
		t.Fatalf("query --order: %s", out)
	}
	var merged struct {
		Rows []map[string]any `json:"rows"`
	}
	js := ok(t, env, "query", "-o", "json", "--group", "_tenant", "--sum", "v", "--count", "n", "get kv")
	if err := json.Unmarshal([]byte(js), &merged); err != nil || len(merged.Rows) != 2 {
		t.Fatalf("query --group: %s %v", js, err)
	}

	// A backup through the router, more writes, a restore: the tenant is
	// as it was backed up, through the router.
	img := filepath.Join(t.TempDir(), "a.fenec")
	if out := ok(t, env, "backup", "a", "--file", img); !strings.Contains(out, "from node n1") {
		t.Fatalf("backup: %s", out)
	}
	c.MustQuery("a", "put kv {k: 'later', v: 9}")
	if out := ok(t, env, "restore", "a", "--file", img); !strings.Contains(out, "restored on node n1") {
		t.Fatalf("restore: %s", out)
	}
	if got := strings.TrimSpace(string(c.MustQuery("a", "get kv count").Body)); got != `{"count":3}` {
		t.Fatalf("a after the restore: %s", got)
	}
	c.MustQuery("a", "put kv {k: 'after', v: 10}") // it takes writes again

	if out := ok(t, env, "move", "b", "--to", "n3"); !strings.Contains(out, "moved b from n1 to n3") {
		t.Fatalf("move: %s", out)
	}
	if got := strings.TrimSpace(string(c.MustQuery("b", "get kv count").Body)); got != `{"count":3}` {
		t.Fatalf("b after the move: %s", got)
	}
	ok(t, env, "replicas")

	// A refusal comes back with the router's own message and what to do.
	refused(t, env, 1, []string{"409", "already exists"}, "place", "a", "--node", "n1")
	refused(t, env, 1, []string{"409", "node is a standby"}, "move", "a", "--to", "n2")
	refused(t, env, 1, []string{"404", "unknown node"}, "move", "a", "--to", "nope")
	// The handoff's answer, whatever it is, is the router's: the CLI says
	// what the router said.
	direct := c.Do("POST", "/_shard/regions/nosuch/handoff", map[string]any{"to": "region"})
	var e struct {
		Error string `json:"error"`
	}
	if direct.Status < 400 || json.Unmarshal(direct.Body, &e) != nil || e.Error == "" {
		t.Fatalf("handoff of an unknown region: %s", direct)
	}
	refused(t, env, 1, []string{fmt.Sprint(direct.Status), e.Error}, "handoff", "nosuch", "--to", "region")
	refused(t, env, 2, []string{"--to must be global or region"}, "handoff", "local", "--to", "elsewhere")
	refused(t, env, 2, []string{"--even-if-global-answers goes with --force"}, "handoff", "local", "--to", "region", "--even-if-global-answers")
}

// TestCLIFailoverAndPromote fails a dead node over by hand from the CLI,
// promotes a standby router, and has the old router's refusal name the new
// leader. A node that still answers is failed over only with --yes (no
// one to ask in a script), and the router that leads, asked to promote,
// says so and changes nothing unless --again.
func TestCLIFailoverAndPromote(t *testing.T) {
	r, n1, n2 := replPair(t)
	standby := r.Cluster().StartRouter("r2", cluster.RouterOptions{Directory: r.EtcdURL(), Args: []string{"--standby"}})
	env := operator(t, r)
	c := r.Client()
	ok(t, env, "place", "f", "--node", "n1")
	c.MustQuery("f", "create collection c (n int)")
	c.MustQuery("f", "put c {n: 1}")
	caughtUp(t, "f", n1, n2)

	// n1 answers: refused, nothing changed, and the way to do it said.
	refused(t, env, 1, []string{"node n1 answers the router", "nothing was failed over", "--yes"}, "failover", "n1")
	if row := placement(t, c, "f"); row["node"] != "n1" {
		t.Fatalf("a refused failover moved f: %v", row)
	}
	// The router leading at term 1: promote says so, and keeps the term.
	if out := ok(t, env, "promote"); !strings.Contains(out, "already leads at term 1: nothing changed") {
		t.Fatalf("promote of the leader: %s", out)
	}
	if out := ok(t, env, "leases", "-o", "json"); !strings.Contains(out, `"term": 1`) {
		t.Fatalf("leases of the router leading at term 1: %s", out)
	}
	// Asked to, it takes the lead again at term 2 (the failover below is
	// a change it takes), and its log does not call it another router.
	if out := ok(t, env, "promote", "--again"); !strings.Contains(out, "router router leads at term 2") {
		t.Fatalf("promote --again: %s", out)
	}
	if strings.Contains(r.Log(), "another router took the lead") {
		t.Fatalf("the router promoted again says another router took the lead:\n%s", r.Log())
	}

	n1.Kill()
	out := ok(t, env, "failover", "n1")
	if !strings.Contains(out, "1 tenant promoted on its copy: f") {
		t.Fatalf("failover: %s", out)
	}
	if got := strings.TrimSpace(string(c.MustQuery("f", "get c count").Body)); got != `{"count":1}` {
		t.Fatalf("f after the failover: %s", got)
	}
	// A second failover of n1 has nothing left to promote, forced or not.
	if out := ok(t, env, "failover", "n1", "--force"); !strings.Contains(out, "0 tenants promoted") {
		t.Fatalf("failover --force: %s", out)
	}

	senv := operator(t, standby)
	refused(t, senv, 1, []string{"409", "changes go to the leading router, router"}, "place", "g", "--node", "n2")
	if out := ok(t, senv, "promote"); !strings.Contains(out, "router r2 leads at term") {
		t.Fatalf("promote: %s", out)
	}
	refused(t, env, 1, []string{"409", "changes go to the leading router, r2"}, "place", "g", "--node", "n2")
	ok(t, senv, "place", "g", "--node", "n2")
}

// TestCLIFailoverLiveWithYes: --yes fails over a node that still
// answers, without asking; its tenant writes on the copy after.
func TestCLIFailoverLiveWithYes(t *testing.T) {
	r, n1, n2 := replPair(t)
	env := operator(t, r)
	c := r.Client()
	ok(t, env, "place", "f", "--node", "n1")
	c.MustQuery("f", "create collection c (n int)")
	c.MustQuery("f", "put c {n: 1}")
	caughtUp(t, "f", n1, n2)
	if out := ok(t, env, "failover", "n1", "--yes"); !strings.Contains(out, "1 tenant promoted on its copy: f") {
		t.Fatalf("failover --yes: %s", out)
	}
	if row := placement(t, c, "f"); row["node"] != "n2" {
		t.Fatalf("f after the failover: %v", row)
	}
	c.MustQuery("f", "put c {n: 2}")
	if got := strings.TrimSpace(string(c.MustQuery("f", "get c count").Body)); got != `{"count":2}` {
		t.Fatalf("f on its copy: %s", got)
	}
}

// TestCLIHostile: no router named, no token, a wrong one, a token file
// missing, a router down, a tenant unknown: each exits non-zero saying
// what is wrong and what to do, and changes nothing.
func TestCLIHostile(t *testing.T) {
	r, n := oneNode(t)
	r.Place("h", n)
	good := operator(t, r)
	bad := filepath.Join(t.TempDir(), "bad-token")
	if err := os.WriteFile(bad, []byte("not-the-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := "FENEC_ROUTER=" + r.URL()

	refused(t, nil, 2, []string{"no router: set $FENEC_ROUTER"}, "nodes")
	refused(t, []string{url}, 1, []string{"401", "refused the token"}, "nodes")
	refused(t, []string{url, "FENEC_ROUTER_TOKEN=wrong"}, 1, []string{"401", "refused the token"}, "tenants")
	refused(t, []string{url, "FENEC_ROUTER_TOKEN_FILE=" + bad}, 1, []string{"401"}, "place", "x", "--node", "n1")
	refused(t, []string{url, "FENEC_ROUTER_TOKEN_FILE=" + bad + ".missing"}, 1, []string{"token file", "no such file"}, "nodes")
	refused(t, []string{url}, 1, []string{"401"}, "backup", "h", "--file", filepath.Join(t.TempDir(), "h.fenec"))
	if got := r.Client().Do("GET", "/_shard/tenants", nil); strings.Contains(string(got.Body), `"x"`) {
		t.Fatalf("a refused place placed: %s", got.Body)
	}
	refused(t, good, 1, []string{"404", "unknown tenant"}, "backup", "nosuch", "--file", filepath.Join(t.TempDir(), "n.fenec"))
	refused(t, good, 2, []string{"want one TENANT"}, "backup")
	refused(t, good, 2, []string{"-o \"yaml\""}, "nodes", "-o", "yaml")

	// A restore of a file that is no image: the CLI refuses it unsent; sent
	// anyway, the node refuses it at its first bytes, and the tenant is as
	// it was.
	c := r.Client()
	c.MustQuery("h", "create collection c (n int)")
	c.MustQuery("h", "put c {n: 1}")
	junk := filepath.Join(t.TempDir(), "junk.fenec")
	if err := os.WriteFile(junk, []byte("this is no image of a tenant"), 0o600); err != nil {
		t.Fatal(err)
	}
	refused(t, good, 1, []string{"not a fenec tenant file", "nothing sent"}, "restore", "h", "--file", junk)
	if m := wantError(t, c.Do("PUT", "/_shard/tenants/h/file", "this is no image of a tenant"), 400, "a restore of no image"); !strings.Contains(fmt.Sprint(m["error"]), "not a fenec tenant file") || !strings.Contains(fmt.Sprint(m["error"]), "as it was") {
		t.Fatalf("a restore of no image: %v", m)
	}
	if got := strings.TrimSpace(string(c.MustQuery("h", "get c count").Body)); got != `{"count":1}` {
		t.Fatalf("h after a refused restore: %s", got)
	}
	if row := placement(t, c, "h"); row["held_by"] != nil {
		t.Fatalf("h still held after a refused restore: %v", row)
	}

	wantError(t, c.Do("DELETE", "/_shard/tenants/h/file", nil), 405, "the file route with the wrong method")
	wantError(t, cluster.NewClient(t, r.URL(), "wrong").Do("GET", "/_shard/tenants/h/file", nil), 401, "a backup with a wrong token")

	// A client that hangs up halfway through its image: nothing changes.
	conn, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "PUT /_shard/tenants/h/file HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 100000\r\n\r\nhalf an image", cluster.RouterToken)
	conn.Close()
	cluster.Eventually(t, wait, func() error {
		// The router notices the hang-up, refuses the restore, and holds
		// nothing: a quota (refused while held) goes through.
		if res := c.Do("PUT", "/_shard/tenants/h/quota", map[string]any{"rows": 50}); res.Status != 200 {
			return fmt.Errorf("quota after a cut restore: %s", res)
		}
		return nil
	})
	if got := strings.TrimSpace(string(c.MustQuery("h", "get c count").Body)); got != `{"count":1}` {
		t.Fatalf("h after a cut restore: %s", got)
	}

	r.Stop()
	refused(t, good, 1, []string{"cannot reach the router", "is it running"}, "tenants")
}

// TestCLIHealth: `fenec health` answers for a node and a router, alive and
// ready, and fails for an address nobody serves.
func TestCLIHealth(t *testing.T) {
	r, n := oneNode(t)
	ok(t, nil, "health", r.URL())
	ok(t, nil, "health", r.URL(), "--ready")
	ok(t, nil, "health", "http://"+n.Direct(), "--ready")
	if out := ok(t, nil, "health", "http://"+n.Direct()+"/_ready"); !strings.Contains(out, `"ready":true`) {
		t.Fatalf("health of a path: %s", out)
	}
	port := cluster.FreePorts(t, 1)[0]
	refused(t, nil, 1, []string{"connection refused"}, "health", fmt.Sprintf("127.0.0.1:%d", port))
}

// rollBackHandoff rolls region's handoff in flight back in the directory,
// as a giver past its bound does, saying why.
func rollBackHandoff(t *testing.T, r *cluster.Router, region, why string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	d, err := global.OpenEtcd(ctx, []string{r.EtcdURL()}, global.DefaultPrefix, global.WithPassword(r.DirectoryPassword()))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s := global.NewStore(d)
	at, err := s.ReadRegion(ctx, region)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateRegion(ctx, region, at, func(g *global.Region) error { return g.RollBack(why, time.Now()) }); err != nil {
		t.Fatalf("roll back the handoff of %s: %v", region, err)
	}
}

// A handoff the router answers 202 (still in flight once the router's
// wait, half the CLI's --timeout, passed) is no failure: the CLI shows its
// state and exits 0. With --wait it follows the handoff until it ends: a
// roll back is a failure, with the giver's why. Nobody takes this
// region's leasing (it has no router of its own), so its handoffs stay
// offered until rolled back.
func TestCLIHandoffInFlight(t *testing.T) {
	c := cluster.New(t)
	r := c.StartRouter("router", cluster.RouterOptions{Args: []string{"--auto-failover", leaseSecs}})
	n1 := c.StartNode("n1", cluster.NodeOptions{Args: []string{"--lease", "--sync", "always"}})
	r.Register(n1)
	waitLeased(t, r, "n1")
	env := operator(t, r)
	for _, w := range []string{"31", "-1", "NaN", "Inf", "abc", ""} {
		wantError(t, r.Client().Do("POST", "/_shard/regions/local/handoff?wait="+w, map[string]any{"to": "region"}), 400, "a wait of "+w)
	}

	out := ok(t, env, "handoff", "local", "--to", "region", "--timeout", "2s")
	if !strings.Contains(out, "handoff to region in flight (offered)") {
		t.Fatalf("handoff in flight: %s", out)
	}
	var regions []map[string]any
	if err := json.Unmarshal([]byte(ok(t, env, "regions", "-o", "json")), &regions); err != nil || len(regions) != 1 {
		t.Fatalf("regions: %v %v", regions, err)
	}
	if h, _ := regions[0]["handoff"].(map[string]any); h["state"] != "offered" {
		t.Fatalf("the region after the CLI's answer: %v", regions[0])
	}
	rollBackHandoff(t, r, "local", "first offer withdrawn")

	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, cluster.Bins().Fenec, "handoff", "local", "--to", "region", "--timeout", "2s", "--wait")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	// The router answered 202 and the CLI says it follows the handoff.
	first, open := <-lines
	if !open || !strings.Contains(first, "in flight (offered): waiting") {
		t.Fatalf("fenec handoff --wait began with %q (stderr %s)", first, stderr.String())
	}
	rollBackHandoff(t, r, "local", "the region's router never came")
	for l := range lines {
		t.Fatalf("fenec handoff --wait printed %q after the roll back", l)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), "rolled back: the region's router never came") {
		t.Fatalf("fenec handoff --wait after the roll back: %v\nstderr:\n%s", err, stderr.String())
	}
}

// Two operators setting a tenant's quota at once each keep their limit:
// operator B's `fenec quota` lands between operator A's read and A's
// write (a proxy in front of the router holds A's write until B's CLI
// returned), so A's write, conditioned on the quota A read, is refused and
// A's CLI applies its limit again to the quota B left.
func TestCLIQuotaConcurrentOperators(t *testing.T) {
	c := cluster.New(t)
	r := c.StartRouter("router", cluster.RouterOptions{})
	n1 := c.StartNode("n1", cluster.NodeOptions{})
	r.Register(n1)
	r.Place("q", n1)
	envB := operator(t, r)
	ok(t, envB, "quota", "q", "--streams", "3")

	target, err := url.Parse(r.URL())
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var b cliRun // operator B's run, between A's read and A's write
	rp := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPut && strings.HasSuffix(req.URL.Path, "/quota") {
			once.Do(func() { b = fenecEnv(t, envB, "quota", "q", "--rows", "7") })
		}
		rp.ServeHTTP(w, req)
	}))
	t.Cleanup(front.Close)
	envA := append(operator(t, r), "FENEC_ROUTER="+front.URL)

	ok(t, envA, "quota", "q", "--bytes", "4096")
	if b.code != 0 || !strings.Contains(b.stdout, "rows") {
		t.Fatalf("operator B's quota, between A's read and write: %s", b)
	}
	var q map[string]float64
	if err := json.Unmarshal([]byte(ok(t, envB, "quota", "q", "-o", "json")), &q); err != nil {
		t.Fatal(err)
	}
	if q["bytes"] != 4096 || q["rows"] != 7 || q["streams"] != 3 {
		t.Fatalf("the quota after both operators: %v", q)
	}
}
