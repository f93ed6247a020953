package node

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
)

// TestRestoreInPlace: PUT .../file?replace=true verifies the image beside
// the live tenant before it takes its place. A damaged image is refused
// and the tenant serves on, every row as it was; a good one replaces it;
// one for a tenant not there creates it; nothing is left beside them.
func TestRestoreInPlace(t *testing.T) {
	n := startNode(t, nil)
	people(t, n)
	n.q("a", "create collection notes (body text @text)")
	n.q("a", `put notes {body: "kept in the image"}`)
	img := n.admin("GET", "tenants/a/file", "")
	if img.Status != 200 {
		t.Fatalf("image: %d %s", img.Status, img.Body)
	}
	n.q("a", `put c {name: "after the image", n: 4}`)
	count := func(tenant string) string {
		t.Helper()
		return strings.TrimSpace(string(n.do("GET", "/t/"+tenant+"/c?count", "").Body))
	}

	good := string(img.Body)
	for what, body := range map[string]string{
		"cut short":      good[:len(good)-7],
		"a byte flipped": good[:len(good)/2] + string(good[len(good)/2]^0x55) + good[len(good)/2+1:],
		"not an image":   "hello",
		"empty":          "",
	} {
		r := n.do("PUT", "/_admin/tenants/a/file?replace=true", body, "Authorization", "Bearer "+adminToken)
		e := wantJSONError(t, r, 400)
		if msg := e["error"].(string); strings.Contains(msg, n.cfg.Dir) || strings.Contains(msg, "/") {
			t.Fatalf("an image %s: the refusal shows a path: %s", what, msg)
		}
		if got := count("a"); got != `{"count":4}` {
			t.Fatalf("a after an image %s: %s", what, got)
		}
	}
	ents, err := os.ReadDir(n.cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), restoreMark) || strings.HasSuffix(e.Name(), ".install") {
			t.Fatalf("a refused image left %s beside the tenant", e.Name())
		}
	}

	wantJSONError(t, n.do("PUT", "/_admin/tenants/a/file?replace=true", good), 401)
	wantJSONError(t, n.do("PUT", "/_admin/tenants/a/file?replace=maybe", good, "Authorization", "Bearer "+adminToken), 400)
	wantJSONError(t, n.do("PUT", "/_admin/tenants/a/file", good, "Authorization", "Bearer "+adminToken), 409)
	if got := count("a"); got != `{"count":4}` {
		t.Fatalf("a after refused calls: %s", got)
	}

	r := n.do("PUT", "/_admin/tenants/a/file?replace=true", good, "Authorization", "Bearer "+adminToken)
	if r.Status != 200 || r.Obj(t)["replaced"] != true {
		t.Fatalf("restore a: %d %s", r.Status, r.Body)
	}
	if got := count("a"); got != `{"count":3}` {
		t.Fatalf("a after its restore: %s", got)
	}
	if got := n.q("a", `get notes select id match body "image"`); !strings.Contains(string(got.Body), `"id":1`) {
		t.Fatalf("a's text index after its restore: %s", got.Body)
	}
	n.q("a", `put c {name: "after the restore"}`)

	r = n.do("PUT", "/_admin/tenants/b/file?replace=true", good, "Authorization", "Bearer "+adminToken)
	if r.Status != 201 || r.Obj(t)["replaced"] != false {
		t.Fatalf("restore b, not there: %d %s", r.Status, r.Body)
	}
	if got := count("b"); got != `{"count":3}` {
		t.Fatalf("b from a's image: %s", got)
	}
}

// TestRestoreLeftoversRemoved: the images a node was taking when it
// stopped — one a restore was verifying, an install's side file (a move
// onto the node killed midway, of a tenant it never held), the part of an
// image a copy was receiving — are removed at the next start; the tenants
// and every other file are left alone.
func TestRestoreLeftoversRemoved(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, func(c *Config) { c.Dir = dir })
	people(t, n)
	if err := n.s.Close(); err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, name := range []string{"a" + restoreMark + "0011223344556677", "moved" + fileExt + installExt, "a" + imagePartMark + "12345.part"} {
		left = append(left, dir+"/"+name)
		if err := os.WriteFile(dir+"/"+name, []byte("half an image"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	kept := []string{dir + "/notes.part", dir + "/Upper" + fileExt + installExt, dir + "/a" + fileExt}
	if err := os.WriteFile(kept[0], []byte("not fenec's"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kept[1], []byte("not a tenant's name"), 0o644); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, func(c *Config) { c.Dir = dir })
	for _, f := range left {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Fatalf("leftover %s: %v", f, err)
		}
	}
	for _, f := range kept {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("%s was not the node's to remove: %v", f, err)
		}
	}
	if got := strings.TrimSpace(string(n.do("GET", "/t/a/c?count", "").Body)); got != `{"count":3}` {
		t.Fatalf("a after the start: %s", got)
	}
}

// TestRestoreClientHangsUp: a client that sends half an image and hangs
// up leaves the tenant as it was and nothing beside it.
func TestRestoreClientHangsUp(t *testing.T) {
	audit := t.TempDir() + "/audit.log"
	n := startNode(t, func(c *Config) { c.Audit = audit })
	people(t, n)
	img := n.admin("GET", "tenants/a/file", "").Body
	n.q("a", `put c {name: "after the image"}`)
	conn, err := net.Dial("tcp", n.s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "PUT /_admin/tenants/a/file?replace=true HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n", adminToken, len(img))
	conn.Write(img[:len(img)/2])
	conn.Close()
	testkit.Eventually(t, 10*time.Second, func() bool {
		b, _ := os.ReadFile(audit)
		return strings.Contains(string(b), `"what":"restore"`)
	}, "the node refuses the half image")
	ents, err := os.ReadDir(n.cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), restoreMark) || strings.HasSuffix(e.Name(), ".install") {
			t.Fatalf("a half image left %s", e.Name())
		}
	}
	if got := strings.TrimSpace(string(n.do("GET", "/t/a/c?count", "").Body)); got != `{"count":4}` {
		t.Fatalf("a after a client hung up on its restore: %s", got)
	}
}
