package wire_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/internal/testkit/testnode"
	"github.com/fenec-go/fenec/node"
	"github.com/fenec-go/fenec/wire"
)

func withSync(c *node.Config) { c.Sync = "always" }

// query runs one statement on a node's tenant straight (the test nodes
// take data requests with no token).
func query(tb testing.TB, n *testnode.Node, tenant, q string) {
	tb.Helper()
	res, err := http.Post(n.URL()+"/t/"+tenant+"/query", "application/json", strings.NewReader(`{"query": `+quote(q)+`}`))
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode/100 != 2 {
		tb.Fatalf("%.80s: %d %s", q, res.StatusCode, b)
	}
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

// TestAdminClientDrivesANode: every call of the typed client against a
// real node, so the node decodes what the client sends and the other way
// round, field by field.
func TestAdminClientDrivesANode(t *testing.T) {
	ctx := testnode.Ctx(t)
	a := testnode.Start(t, testnode.Options{Configure: withSync})
	b := testnode.Start(t, testnode.Options{Configure: withSync})
	ac, bc := a.Admin(), b.Admin()

	if err := ac.Create(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	query(t, a, "t", "create collection c (n int)")
	query(t, a, "t", "put c [{n: 1}, {n: 2}]")
	st, err := ac.Stats(ctx)
	if err != nil || st.Tenants != 1 || st.Disk <= 0 || st.Open != 1 {
		t.Fatalf("stats %+v, %v", st, err)
	}
	names, err := ac.Tenants(ctx)
	if err != nil || len(names) != 1 || names[0] != "t" {
		t.Fatalf("tenants %v, %v", names, err)
	}
	sizes, err := ac.Sizes(ctx)
	if err != nil || sizes["t"] != st.Disk {
		t.Fatalf("sizes %v (disk %d), %v", sizes, st.Disk, err)
	}

	q := wire.Quota{Rows: 100, Streams: 3, RowsPerS: 0.5, BytesPerS: 1 << 20}
	if got, err := ac.PutQuota(ctx, "t", q); err != nil || got != q {
		t.Fatalf("put quota: %+v, %v", got, err)
	}
	if got, err := ac.Quota(ctx, "t"); err != nil || got != q {
		t.Fatalf("quota: %+v, %v", got, err)
	}
	if u, err := ac.Usage(ctx, "t"); err != nil || u.Rows != 2 || u.Bytes <= 0 {
		t.Fatalf("usage %+v, %v", u, err)
	}

	fr, err := ac.Freeze(ctx, "t")
	if err != nil || !fr.Frozen || fr.Tenant != "t" || fr.Seq != 3 {
		t.Fatalf("freeze %+v, %v", fr, err)
	}
	image, size, err := ac.Image(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	img, err := io.ReadAll(image)
	image.Close()
	if err != nil || (size >= 0 && int64(len(img)) != size) {
		t.Fatalf("image of %d bytes (said %d): %v", len(img), size, err)
	}
	if fr, err := ac.Thaw(ctx, "t"); err != nil || fr.Frozen {
		t.Fatalf("thaw %+v, %v", fr, err)
	}
	if err := bc.Install(ctx, "copy", bytes.NewReader(img), int64(len(img))); err != nil {
		t.Fatal(err)
	}
	if err := bc.Install(ctx, "streamed", bytes.NewReader(img), -1); err != nil {
		t.Fatalf("install of unknown length: %v", err)
	}

	primary, err := ac.Replication(ctx, "t")
	if err != nil || primary.Role != "primary" || primary.Seq != 3 || primary.LineageID() == 0 || primary.Heard {
		t.Fatalf("primary's replication %+v, %v", primary, err)
	}
	if err := bc.Create(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	fw, err := bc.Follow(ctx, "t", wire.Follow{From: a.URL(), As: "b"})
	if err != nil || fw.From != a.URL() || fw.Tenant != "t" {
		t.Fatalf("follow %+v, %v", fw, err)
	}
	testkit.Eventually(t, time.Minute, func() error {
		r, err := bc.Replication(ctx, "t")
		switch {
		case err != nil:
			return err
		case r.Role != "replica" || !r.Heard || r.Seq != primary.Seq || r.LineageID() != primary.LineageID() || r.From != a.URL():
			return errors.New("copy not caught up")
		case r.LastHello == nil:
			return errors.New("no hello recorded")
		}
		return nil
	})
	testkit.Eventually(t, time.Minute, func() error {
		r, err := ac.Replication(ctx, "t")
		if err != nil || len(r.Copies) != 1 || r.Copies[0].Acked != primary.Seq {
			return errors.New("the primary lists no copy acknowledging its seq")
		}
		return nil
	})

	// A copy of another lineage is refused, saying why; the right one
	// is promoted and forks a history of its own.
	_, err = bc.Promote(ctx, "t", wire.Promote{Lineage: primary.LineageID() + 1})
	var we *wire.Error
	if !errors.As(err, &we) || we.Status != http.StatusConflict || !strings.Contains(we.Message, "lineage") {
		t.Fatalf("promote of another lineage: %v", err)
	}
	pr, err := bc.Promote(ctx, "t", wire.Promote{Lineage: primary.LineageID(), ForkedHistory: primary.History})
	if err != nil || !pr.Promoted || pr.Seq != primary.Seq || pr.History == primary.History {
		t.Fatalf("promote %+v, %v", pr, err)
	}

	if existed, err := bc.Delete(ctx, "copy"); err != nil || !existed {
		t.Fatalf("delete: %v %v", existed, err)
	}
	if existed, err := bc.Delete(ctx, "copy"); err != nil || existed {
		t.Fatalf("delete again: %v %v", existed, err)
	}
}

// TestAdminClientRefusals: what the client makes of a node that says no,
// or of one that does not answer.
func TestAdminClientRefusals(t *testing.T) {
	ctx := testnode.Ctx(t)
	n := testnode.Start(t, testnode.Options{})
	good := n.Admin()
	if err := good.Create(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		call   func() error
		status int
		says   string
	}{
		{"no token", func() error {
			c := *good
			c.Token = ""
			_, err := c.Stats(ctx)
			return err
		}, http.StatusUnauthorized, "token"},
		{"wrong token", func() error {
			c := *good
			c.Token = "not-it"
			_, err := c.Tenants(ctx)
			return err
		}, http.StatusUnauthorized, "token"},
		{"tenant there already", func() error { return good.Create(ctx, "t") }, http.StatusConflict, "exists"},
		{"no such tenant", func() error { _, err := good.Replication(ctx, "ghost"); return err }, http.StatusNotFound, "unknown tenant"},
		{"bad name", func() error { _, err := good.Usage(ctx, "Not_A_Name!"); return err }, http.StatusBadRequest, ""},
		{"negative quota", func() error { _, err := good.PutQuota(ctx, "t", wire.Quota{Rows: -1}); return err }, http.StatusBadRequest, "never negative: rows is -1"},
		{"follow a bad URL", func() error { _, err := good.Follow(ctx, "t", wire.Follow{From: "ftp://x"}); return err }, http.StatusBadRequest, "http://host:port"},
		{"follow as a bad name", func() error { _, err := good.Follow(ctx, "t", wire.Follow{From: n.URL(), As: "No Name"}); return err }, http.StatusBadRequest, "node name"},
		{"cut-short image", func() error { return good.Install(ctx, "cut", strings.NewReader("FENEC not an image"), -1) }, http.StatusBadRequest, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var we *wire.Error
			if !errors.As(err, &we) || we.Status != tc.status || wire.StatusOf(err) != tc.status || !strings.Contains(we.Message, tc.says) {
				t.Fatalf("got %v, want a %d saying %q", err, tc.status, tc.says)
			}
			if !strings.Contains(err.Error(), we.Path) || strings.Contains(err.Error(), "{") {
				t.Fatalf("error %q should name the route and the node's message, not its JSON", err)
			}
		})
	}

	// A node stopped behind its address answers 502: an *Error too.
	n.Stop()
	if _, err := good.Stats(ctx); wire.StatusOf(err) != http.StatusBadGateway {
		t.Fatalf("stopped node: %v", err)
	}
	// Nothing listening: an error with no status.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	gone := &wire.AdminClient{Base: addr, Token: "x"}
	if _, err := gone.Stats(ctx); err == nil || wire.StatusOf(err) != 0 || !strings.Contains(err.Error(), "/_admin/stats") {
		t.Fatalf("nothing listening: %v", err)
	}
}

// stalling passes the first bytes of an answer on and holds the rest
// until the client has gone, as a node stuck half-way would.
type stalling struct {
	http.ResponseWriter
	gone  <-chan struct{}
	wrote bool
}

func (w *stalling) Write(p []byte) (int, error) {
	if !w.wrote {
		w.wrote = true
		if _, err := w.ResponseWriter.Write(p[:min(len(p), 16)]); err != nil {
			return 0, err
		}
		w.ResponseWriter.(http.Flusher).Flush()
	}
	<-w.gone
	return 0, errors.New("client gone")
}

// TestAdminClientBoundedByContext: a node that holds a call, or an image
// whose reader gives up half-way, ends with the caller's context; the
// node serves on.
func TestAdminClientBoundedByContext(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	n := testnode.Start(t, testnode.Options{Wrap: func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case strings.HasSuffix(r.URL.Path, "/sizes"):
				select {
				case <-release:
				case <-r.Context().Done():
				}
			case strings.HasSuffix(r.URL.Path, "/file") && r.Method == http.MethodGet:
				next.ServeHTTP(&stalling{ResponseWriter: w, gone: r.Context().Done()}, r)
			default:
				next.ServeHTTP(w, r)
			}
		})
	}})
	c := n.Admin()
	ctx, cancel := context.WithTimeout(testnode.Ctx(t), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Sizes(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("held call: %v", err)
	}

	bg := testnode.Ctx(t)
	if err := c.Create(bg, "t"); err != nil {
		t.Fatal(err)
	}
	query(t, n, "t", "create collection c (s text)")
	query(t, n, "t", "put c [{s: '"+strings.Repeat("x", 64<<10)+"'}]")
	ictx, icancel := context.WithCancel(bg)
	image, _, err := c.Image(ictx, "t")
	if err != nil {
		t.Fatal(err)
	}
	var buf [8]byte
	if _, err := io.ReadFull(image, buf[:]); err != nil {
		t.Fatal(err)
	}
	icancel() // the client hangs up half-way
	if _, err := io.ReadAll(image); err == nil {
		t.Fatal("an image read on after its context ended")
	}
	image.Close()
	if _, err := c.Stats(bg); err != nil {
		t.Fatalf("node after a client hung up: %v", err)
	}
}

// TestAdminClientRead: the read route runs a read and names its seq,
// refuses a write as the statement's own fault, and a bound cuts an
// answer past it.
func TestAdminClientRead(t *testing.T) {
	ctx := testnode.Ctx(t)
	n := testnode.Start(t, testnode.Options{})
	c := n.Admin()
	if err := c.Create(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	query(t, n, "t", "create collection c (n int)")
	query(t, n, "t", "put c [{n: 1}, {n: 2}, {n: 3}]")
	rows, seq, err := c.Read(ctx, "t", wire.Statement{Query: "get c select n where n > $1 order n", Params: []byte(`[1]`)}, 1<<20)
	if err != nil || seq != 4 || !strings.Contains(string(rows), `"n":2`) || strings.Contains(string(rows), `"n":1}`) {
		t.Fatalf("read: %s at %d, %v", rows, seq, err)
	}
	_, _, err = c.Read(ctx, "t", wire.Statement{Query: "del c where n = 1"}, 1<<20)
	var refused *wire.StatementRefused
	if !errors.As(err, &refused) || refused.Verb != "del" || refused.Message == "" {
		t.Fatalf("a write sent to the read route: %v", err)
	}
	if _, _, err := c.Read(ctx, "t", wire.Statement{Query: "get c"}, 10); !errors.Is(err, wire.ErrTooLarge) {
		t.Fatalf("an answer past the bound: %v", err)
	}
	if _, _, err := c.Read(ctx, "ghost", wire.Statement{Query: "get c"}, 1<<20); wire.StatusOf(err) != http.StatusNotFound {
		t.Fatalf("read of no tenant: %v", err)
	}
}

// TestAdminClientIdentityRestoreCompact: the node's id, a call naming
// another node's id refused unrun, a damaged image refused in a tenant's
// place and a good one taken, a compact; each against a real node.
func TestAdminClientIdentityRestoreCompact(t *testing.T) {
	ctx := testnode.Ctx(t)
	a := testnode.Start(t, testnode.Options{})
	ac := a.Admin()
	id, err := ac.ID(ctx)
	if err != nil || len(id) != 32 {
		t.Fatalf("id %q, %v", id, err)
	}
	if err := ac.Create(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	query(t, a, "t", "create collection c (n int)")
	query(t, a, "t", "put c [{n: 1}, {n: 2}]")

	other := *ac
	other.Node = strings.Repeat("0", 32)
	var we *wire.Error
	if _, err := other.Delete(ctx, "t"); !errors.As(err, &we) || we.Status != http.StatusConflict || !strings.Contains(we.Message, id) {
		t.Fatalf("a delete meant for another node: %v", err)
	}
	if got, err := other.ID(ctx); err != nil || got != id {
		t.Fatalf("the id asked by a client meaning another node: %q %v", got, err)
	}
	mine := *ac
	mine.Node = id
	if _, err := mine.Stats(ctx); err != nil {
		t.Fatalf("a call naming the node's own id: %v", err)
	}

	image, _, err := ac.Image(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	img, err := io.ReadAll(image)
	image.Close()
	if err != nil {
		t.Fatal(err)
	}
	query(t, a, "t", "put c {n: 3}")
	if _, err := ac.Restore(ctx, "t", bytes.NewReader(img[:len(img)-3]), -1, wire.RestoreOptions{}); wire.StatusOf(err) != http.StatusBadRequest {
		t.Fatalf("a cut image restored: %v", err)
	}
	if u, err := ac.Usage(ctx, "t"); err != nil || u.Rows != 3 {
		t.Fatalf("after a refused restore: %+v %v", u, err)
	}
	if got, err := ac.Restore(ctx, "t", bytes.NewReader(img), int64(len(img)), wire.RestoreOptions{}); err != nil || !got.Replaced || got.History == 0 {
		t.Fatalf("restore: %+v %v", got, err)
	}
	if u, err := ac.Usage(ctx, "t"); err != nil || u.Rows != 2 {
		t.Fatalf("after the restore: %+v %v", u, err)
	}
	if got, err := ac.Restore(ctx, "new", bytes.NewReader(img), int64(len(img)), wire.RestoreOptions{}); err != nil || got.Replaced {
		t.Fatalf("restore of a tenant not there: %+v %v", got, err)
	}

	query(t, a, "t", "del c where n > 0")
	cp, err := ac.Compact(ctx, "t")
	if err != nil || cp.Tenant != "t" || cp.Bytes >= cp.Was || !strings.HasPrefix(cp.Message, "compacted") {
		t.Fatalf("compact %+v, %v", cp, err)
	}
	if _, err := ac.Compact(ctx, "nosuch"); wire.StatusOf(err) != http.StatusNotFound {
		t.Fatalf("compact of no tenant: %v", err)
	}
}

// TestAdminClientCannotFollow: a node with no replication token refuses
// to follow with its own code, which the client makes errors.Is
// ErrCannotFollow; no other refusal is, however its text reads — not one
// that names the flag in prose, nor a code the client does not know, nor
// a body that is not JSON.
func TestAdminClientCannotFollow(t *testing.T) {
	ctx := testnode.Ctx(t)
	plain := testnode.Start(t, testnode.Options{Configure: func(c *node.Config) { c.ReplicationToken = "" }})
	repl := testnode.Start(t, testnode.Options{})
	for _, n := range []*testnode.Node{plain, repl} {
		if err := n.Admin().Create(ctx, "t"); err != nil {
			t.Fatal(err)
		}
	}
	_, err := plain.Admin().Follow(ctx, "t", wire.Follow{From: repl.URL()})
	var we *wire.Error
	if !errors.Is(err, wire.ErrCannotFollow) || !errors.As(err, &we) || we.Status != http.StatusBadRequest || we.Code != wire.CodeCannotFollow {
		t.Fatalf("follow on a node with no replication token: %v (%+v)", err, we)
	}
	if wrapped := fmt.Errorf("move: %w", err); !errors.Is(wrapped, wire.ErrCannotFollow) {
		t.Fatal("wrapped, the refusal is no longer ErrCannotFollow")
	}
	if _, err := repl.Admin().Follow(ctx, "t", wire.Follow{From: "ftp://x"}); wire.StatusOf(err) != http.StatusBadRequest || errors.Is(err, wire.ErrCannotFollow) {
		t.Fatalf("a bad URL to follow: %v", err)
	}

	for _, body := range []string{
		`{"error": "this node has no --replication-token to follow with"}`,
		`{"error": "no", "code": "cannot_follow_later"}`,
		`{"error": "no", "code": "CANNOT_FOLLOW"}`,
		`{"error": "no", "code": 7}`,
		`cannot_follow`,
		`{"error": "no", "code": "cannot_follow"`,
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, body)
		}))
		_, err := (&wire.AdminClient{Base: srv.URL, Token: "x"}).Follow(ctx, "t", wire.Follow{From: repl.URL()})
		srv.Close()
		if wire.StatusOf(err) != http.StatusBadRequest || errors.Is(err, wire.ErrCannotFollow) {
			t.Fatalf("answer %s: %v, ErrCannotFollow %v", body, err, errors.Is(err, wire.ErrCannotFollow))
		}
	}
}
