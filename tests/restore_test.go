package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fenec-go/fenec/tests/cluster"
)

// fenecFails runs the fenec binary, fails t unless it exits non-zero, and
// returns what it printed.
func fenecFails(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	out, err := exec.CommandContext(ctx, cluster.Bins().Fenec, args...).CombinedOutput()
	if err == nil {
		t.Fatalf("fenec %v succeeded:\n%s", args, out)
	}
	return string(out)
}

// TestRestoreDamagedBackupKeepsTenant restores a damaged backup over a
// live tenant: the node refuses the image and the tenant is exactly as it
// was, every row and the tenant next to it too; a good backup then
// restores, ending the subscription open on the old file.
func TestRestoreDamagedBackupKeepsTenant(t *testing.T) {
	r, n := oneNode(t)
	c := r.Client()
	for _, tn := range []string{"x", "y"} {
		r.Place(tn, n)
		c.MustQuery(tn, "create collection c (who text @text)")
		c.MustQuery(tn, "put c [{who: 'one'}, {who: 'two'}]")
	}
	dir := filepath.Join(t.TempDir(), "backup")
	fenec(t, "backup", "http://"+n.Direct(), "--tenants", dir, "--token", cluster.AdminToken)
	for _, tn := range []string{"x", "y"} {
		c.MustQuery(tn, "put c {who: 'after the backup'}")
	}
	good, err := os.ReadFile(filepath.Join(dir, "x.fenec"))
	if err != nil {
		t.Fatal(err)
	}
	damaged := []struct {
		what string
		img  []byte
	}{
		{"cut short", good[:len(good)/2]},
		{"a byte flipped", flip(good, len(good)-40)},
		{"empty", nil},
	}
	for _, d := range damaged {
		if err := os.WriteFile(filepath.Join(dir, "x.fenec"), d.img, 0o644); err != nil {
			t.Fatal(err)
		}
		out := fenecFails(t, "restore", "http://"+n.Direct(), "--tenants", dir, "--token", cluster.AdminToken)
		res := c.Query("x", "get c select who order id")
		if res.Status != 200 {
			t.Fatalf("x after restoring a backup %s: %s", d.what, res)
		}
		if rows := res.Rows(t); len(rows) != 3 || rows[2]["who"] != "after the backup" {
			t.Fatalf("x after restoring a backup %s: %v", d.what, rows)
		}
		if !strings.Contains(out, "tenant x refused") {
			t.Fatalf("a backup %s: the failure does not name the tenant refused:\n%s", d.what, out)
		}
		if got := ids(t, c.MustQuery("x", "get c select id match who $1", "two")); got != "2" {
			t.Fatalf("x's text index after restoring a backup %s: %s", d.what, got)
		}
		// The good image beside it was restored all the same.
		if got := strings.TrimSpace(string(c.MustQuery("y", "get c count").Body)); got != `{"count":2}` {
			t.Fatalf("y beside a backup %s: %s", d.what, got)
		}
		c.MustQuery("y", "put c {who: 'after the backup'}")
	}
	ents, err := os.ReadDir(n.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), "restore") || strings.HasSuffix(e.Name(), ".install") {
			t.Fatalf("a refused restore left %s in the node's directory", e.Name())
		}
	}

	if err := os.WriteFile(filepath.Join(dir, "x.fenec"), good, 0o644); err != nil {
		t.Fatal(err)
	}
	s, res := c.Subscribe("/t/x/c/changes")
	if s == nil {
		t.Fatalf("subscribe: %s", res)
	}
	defer s.Close()
	if ev, err := s.Next(); err != nil || ev.Name != "seed" {
		t.Fatalf("seed: %+v %v", ev, err)
	}
	out := fenec(t, "restore", "http://"+n.Direct(), "--tenants", dir, "--token", cluster.AdminToken)
	if !strings.Contains(out, "restored 2 tenants") {
		t.Fatalf("restore said %q", out)
	}
	for {
		ev, err := s.Next()
		if err != nil {
			break // the old file's stream ended
		}
		if ev.Name == "change" {
			t.Fatalf("a change on the old file after the restore: %+v", ev)
		}
	}
	for _, tn := range []string{"x", "y"} {
		if got := strings.TrimSpace(string(c.MustQuery(tn, "get c count").Body)); got != `{"count":2}` {
			t.Fatalf("%s after a good restore: %s", tn, got)
		}
		if got := ids(t, c.MustQuery(tn, "get c select id match who $1", "two")); got != "2" {
			t.Fatalf("%s's text index after a good restore: %s", tn, got)
		}
		c.MustQuery(tn, "put c {who: 'after the restore'}")
	}
}

// flip returns b with the byte at i inverted.
func flip(b []byte, i int) []byte {
	out := append([]byte(nil), b...)
	out[i] ^= 0xff
	return out
}

// restoreThrough puts img in tenant's place through the router (PUT
// /_shard/tenants/<t>/file, query added) and returns the answer.
func restoreThrough(t *testing.T, c *cluster.Client, tenant, query string, img []byte) *cluster.Resp {
	t.Helper()
	path := "/_shard/tenants/" + tenant + "/file"
	if query != "" {
		path += "?" + query
	}
	return c.Do("PUT", path, img)
}

// A restore in place through the router starts a new history. Before it,
// the restored tenant took the image's history and seqs on: a change
// cursor of the writes the restore erased was answered with the writes
// made after it as if they followed, a read after one of those writes
// with their history was answered, and row ids were given again. Now the
// cursor is 410, the read 504, ids go on past every id given, the answer
// names the new history, and the copy takes the restored file with it.
func TestRestoreThroughRouterStartsANewHistory(t *testing.T) {
	r, n1, n2 := replPair(t)
	c := r.Client()
	r.Place("a", n1)
	c.MustQuery("a", "create collection c (who text)")
	c.MustQuery("a", "put c [{who: 'one'}, {who: 'two'}, {who: 'three'}]")
	img := c.Do("GET", "/_shard/tenants/a/file", nil)
	wantStatus(t, img, 200, "backup of a")
	var cursor string
	for i := range 5 {
		cursor = c.MustQuery("a", "put c {who: $1}", fmt.Sprint("erased ", i)).Header.Get("Fenec-Seq")
	}
	_, _, oldHistory := replState(t, n1, "a")
	res := restoreThrough(t, c, "a", "", img.Body)
	wantStatus(t, res, 200, "restore of a")
	// More writes after the restore than it erased: their seqs pass the
	// cursor's, as the erased writes' did.
	var after []string
	for i := range 8 {
		ans := c.MustQuery("a", "put c {who: $1}", fmt.Sprint("after ", i))
		after = append(after, ids(t, c.MustQuery("a", "get c select id where who = $1", fmt.Sprint("after ", i))))
		_ = ans
	}
	if after[0] != "9" {
		t.Fatalf("the first row after the restore has id %s: the erased rows had 4 to 8", after[0])
	}
	ch := c.Do("GET", "/t/a/_changes?since="+cursor, nil)
	if m := wantError(t, ch, 410, "a change cursor of erased writes"); m["seq"] == nil {
		t.Fatalf("410 without the file's seq: %s", ch)
	}
	wantError(t, c.Do("GET", "/t/a/c?count", nil, "Fenec-After", cursor, "Fenec-History", oldHistory), 504,
		"a read after an erased write, with its history")
	var ans struct {
		Seq, History, Lineage uint64
		Node                  string
	}
	if err := json.Unmarshal(res.Body, &ans); err != nil {
		t.Fatal(err)
	}
	if was, _ := strconv.ParseUint(cursor, 10, 64); ans.Seq <= was || fmt.Sprint(ans.History) == oldHistory || ans.Lineage == 0 || ans.Node != "n1" {
		t.Fatalf("the restore's answer %s, over a file at %s of history %s", res.Body, cursor, oldHistory)
	}
	caughtUp(t, "a", n1, n2)
	if _, _, h := replState(t, n2, "a"); h == oldHistory {
		t.Fatal("the copy kept the history the restore left")
	}
	if got := strings.TrimSpace(string(NewDirect(t, n2).MustQuery("a", "get c count").Body)); got != `{"count":11}` {
		t.Fatalf("the copy after the restore holds %s", got)
	}
	// A change cursor from after the restore goes on.
	last := c.MustQuery("a", "put c {who: 'last'}").Header.Get("Fenec-Seq")
	ch = c.Do("GET", "/t/a/_changes?since="+fmt.Sprint(ans.Seq), nil)
	wantStatus(t, ch, 200, "a cursor at the restore")
	if ch.Header.Get("Fenec-Next") != last || strings.Count(string(ch.Body), "\n") != 9 {
		t.Fatalf("changes since the restore: next %s, %s", ch.Header.Get("Fenec-Next"), ch.Body)
	}
}

// Another tenant's image put in a tenant's place is refused, naming both
// lineages and force: before, it was taken (200) while the directory
// kept the tenant's lineage, so every later failover refused its copy as
// "of another lineage". Forced, it is taken, the directory records its
// lineage, and a failover promotes the copy holding it.
func TestRestoreOfAnotherTenantsImage(t *testing.T) {
	r, n1, n2 := replPair(t)
	c := r.Client()
	for _, tn := range []string{"a", "b"} {
		r.Place(tn, n1)
		c.MustQuery(tn, "create collection c (who text)")
		c.MustQuery(tn, "put c {who: $1}", tn)
	}
	img := c.Do("GET", "/_shard/tenants/b/file", nil)
	wantStatus(t, img, 200, "backup of b")
	m := wantError(t, restoreThrough(t, c, "a", "", img.Body), 409, "b's image in a's place")
	if msg := fmt.Sprint(m["error"]); !strings.Contains(msg, "lineage") || !strings.Contains(msg, "force=true") {
		t.Fatalf("b's image in a's place: %v", m)
	}
	if rows := c.MustQuery("a", "get c select who").Rows(t); len(rows) != 1 || rows[0]["who"] != "a" {
		t.Fatalf("a after a refused restore: %v", rows)
	}
	if row := placement(t, c, "a"); row["held_by"] != nil {
		t.Fatalf("a still held after a refused restore: %v", row)
	}
	wantError(t, restoreThrough(t, c, "a", "force=maybe", img.Body), 400, "force=maybe")
	wantStatus(t, restoreThrough(t, c, "a", "force=true", img.Body), 200, "b's image in a's place, forced")
	caughtUp(t, "a", n1, n2)
	n1.Kill()
	st, promoted, refusedWhy := failover(t, c, "n1", false)
	if st != 200 || !slices.Contains(promoted, "a") {
		t.Fatalf("failover after a forced restore: %d, promoted %v, refused %v", st, promoted, refusedWhy)
	}
	if rows := c.MustQuery("a", "get c select who").Rows(t); len(rows) != 1 || rows[0]["who"] != "b" {
		t.Fatalf("a on its copy after the failover: %v", rows)
	}
}

// zeroStream is size zero bytes, made as they are read and counted (the
// count read while the client's transport may still be reading).
type zeroStream struct {
	size int64
	read atomic.Int64
}

func (z *zeroStream) Read(p []byte) (int, error) {
	done := z.read.Load()
	if done >= z.size {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), z.size-done)]
	clear(p)
	z.read.Add(int64(len(p)))
	return len(p), nil
}

// Through the router: 1.5 GB of zeros put as a tenant's image is refused
// at its first bytes (400, "not a fenec tenant file") with the client
// cut off after what the connections' buffers took, and nothing of it on
// the node's disk; an image past the tenant's bytes quota is refused 413
// saying what to do. The tenant is as it was, and held by nothing.
func TestRestoreBoundedThroughRouter(t *testing.T) {
	r, n := oneNode(t)
	c := r.Client()
	r.Place("a", n)
	c.MustQuery("a", "create collection c (b text)")
	for range 3 {
		c.MustQuery("a", "put c {b: $1}", strings.Repeat("x", 256<<10))
	}
	img := c.Do("GET", "/_shard/tenants/a/file", nil)
	wantStatus(t, img, 200, "backup of a")

	z := &zeroStream{size: 1536 << 20}
	req, err := http.NewRequest("PUT", r.URL()+"/_shard/tenants/a/file", z)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = z.size
	req.Header.Set("Authorization", "Bearer "+cluster.RouterToken)
	hc := &http.Client{Transport: &http.Transport{}, Timeout: wait}
	defer hc.CloseIdleConnections()
	res, err := hc.Do(req)
	if err != nil {
		t.Fatalf("zeros as a's image: %v (the client sent %d MB)", err, z.read.Load()>>20)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 400 || !strings.Contains(string(body), "not a fenec tenant file") || !strings.Contains(string(body), "as it was") {
		t.Fatalf("zeros as a's image: %d %s", res.StatusCode, body)
	}
	if z.read.Load() > 64<<20 {
		t.Fatalf("the router took %d MB of zeros before refusing them", z.read.Load()>>20)
	}
	t.Logf("1.5 GB of zeros through the router: refused after the client sent %d KB", z.read.Load()>>10)
	ents, err := os.ReadDir(n.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), "restore") || strings.HasSuffix(e.Name(), ".install") {
			t.Fatalf("refused zeros left %s on the node", e.Name())
		}
	}

	wantStatus(t, c.Do("PUT", "/_shard/tenants/a/quota", map[string]any{"bytes": 256 << 10}), 200, "a small quota")
	m := wantError(t, restoreThrough(t, c, "a", "", img.Body), 413, "an image past a's quota")
	if msg := fmt.Sprint(m["error"]); !strings.Contains(msg, "raise the quota") {
		t.Fatalf("an image past a's quota: %v", m)
	}
	if got := strings.TrimSpace(string(c.MustQuery("a", "get c count").Body)); got != `{"count":3}` {
		t.Fatalf("a after refused images: %s", got)
	}
	if row := placement(t, c, "a"); row["held_by"] != nil {
		t.Fatalf("a still held after refused restores: %v", row)
	}
}
