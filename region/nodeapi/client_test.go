package nodeapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/wire"
)

// stubNode serves h on loopback as a node's admin API, counting the
// requests it got, and returns the node's record (token "tok", id "n-1").
func stubNode(tb testing.TB, h http.HandlerFunc) (global.Node, *atomic.Int64) {
	tb.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		h(w, r)
	}))
	tb.Cleanup(srv.Close)
	return global.Node{Addr: srv.URL, Token: "tok", ID: "n-1"}, &hits
}

func newClient(tb testing.TB, timeout time.Duration) *Client {
	tb.Helper()
	c := New(timeout, "")
	tb.Cleanup(c.Close)
	return c
}

func answer(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}

// TestAdminNamesRequestAndNode: a call made with a request's id sends it,
// with the node's token and the id the record names.
func TestAdminNamesRequestAndNode(t *testing.T) {
	var got http.Header
	n, _ := stubNode(t, func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		answer(w, http.StatusOK, `{"t": 10, "u": 5}`)
	})
	c := newClient(t, 5*time.Second)
	sizes, err := c.Sizes(WithRequestID(context.Background(), "req-7"), n)
	if err != nil {
		t.Fatal(err)
	}
	if sizes["t"] != 10 || sizes["u"] != 5 {
		t.Errorf("sizes %v", sizes)
	}
	if got.Get("X-Request-Id") != "req-7" || got.Get("Authorization") != "Bearer tok" || got.Get(wire.HeaderNode) != "n-1" {
		t.Errorf("headers sent: %v", got)
	}
	if id := RequestID(WithRequestID(context.Background(), "x")); id != "x" {
		t.Errorf("RequestID = %q", id)
	}
	if id := RequestID(context.Background()); id != "" {
		t.Errorf("RequestID of a bare context = %q", id)
	}
}

// TestUnusableRecordSendsNothing: a record the router cannot use (its
// token sealed under another key, or in clear) fails every call saying
// why, and the node hears nothing of it.
func TestUnusableRecordSendsNothing(t *testing.T) {
	n, hits := stubNode(t, func(w http.ResponseWriter, r *http.Request) { answer(w, http.StatusOK, `{}`) })
	c := newClient(t, 5*time.Second)
	for _, bad := range []global.Node{{Addr: n.Addr, Token: n.Token, Sealed: "x"}, {Addr: n.Addr, Token: n.Token, Clear: true}} {
		err := c.Create(context.Background(), bad, "t")
		if !errors.Is(err, ErrNodeCall) || !errors.Is(err, global.ErrUntrusted) {
			t.Errorf("create on %+v: %v; want ErrNodeCall and global.ErrUntrusted", bad, err)
		}
		if err := c.FollowAs(context.Background(), n, "r", "t", bad, wire.RoleRead); !errors.Is(err, ErrNodeCall) || !errors.Is(err, global.ErrUntrusted) {
			t.Errorf("follow an unusable primary: %v", err)
		}
	}
	if h := hits.Load(); h != 0 {
		t.Errorf("the node got %d requests", h)
	}
}

// TestCallErrors: what each refusal of a node is, by its sentinel.
func TestCallErrors(t *testing.T) {
	n, _ := stubNode(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case wire.TenantPath("t"):
			answer(w, http.StatusConflict, `{"error": "tenant t exists"}`)
		case "/_admin/promote":
			answer(w, http.StatusNotFound, `{"error": "no such route"}`)
		case wire.TenantPath("t") + "/read":
			answer(w, http.StatusBadRequest, `{"error": "insert writes", "statement_refused": true, "verb": "insert"}`)
		case wire.TenantPath("big") + "/read":
			answer(w, http.StatusOK, `[{"v": "a long enough answer"}]`)
		default:
			answer(w, http.StatusInternalServerError, `{"error": "boom"}`)
		}
	})
	c := newClient(t, 5*time.Second)
	ctx := context.Background()

	err := c.Create(ctx, n, "t")
	if !errors.Is(err, ErrTenantExists) || !errors.Is(err, ErrNodeCall) || wire.StatusOf(err) != http.StatusConflict {
		t.Errorf("create of a tenant the node holds: %v", err)
	}
	if _, err := c.PromoteMany(ctx, n, []string{"t"}, []global.Tenant{{}}, false, wire.Promote{}); !errors.Is(err, ErrNoBulkPromote) {
		t.Errorf("bulk promote on a node without the route: %v", err)
	}
	_, _, err = c.Read(ctx, n, "t", wire.Statement{Query: "insert"}, 1<<20)
	var refused *wire.StatementRefused
	if !errors.As(err, &refused) || refused.Verb != "insert" || refused.Message != "insert writes" || errors.Is(err, ErrNodeCall) {
		t.Errorf("read refused: %v", err)
	}
	if _, _, err := c.Read(ctx, n, "big", wire.Statement{Query: "select"}, 4); !errors.Is(err, ErrAnswerTooLarge) || err.Error() != ErrAnswerTooLarge.Error()+" (4 bytes)" {
		t.Errorf("read past its bound: %v", err)
	}
	if _, err := c.Replication(ctx, n, "u"); !errors.Is(err, ErrNodeCall) || wire.StatusOf(err) != http.StatusInternalServerError {
		t.Errorf("replication answered 500: %v", err)
	}
}

// TestIdentify: a node answers its id; one from before ids (no
// /_admin/node) answers "" once its token opens its stats; a wrong token
// is ErrNodeCheck either way.
func TestIdentify(t *testing.T) {
	withID, _ := stubNode(t, func(w http.ResponseWriter, r *http.Request) {
		answer(w, http.StatusOK, `{"id": "n-1"}`)
	})
	var legacyToken atomic.Value
	legacyToken.Store("tok")
	legacy, _ := stubNode(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get("Authorization") != "Bearer "+legacyToken.Load().(string):
			answer(w, http.StatusUnauthorized, `{"error": "wrong token"}`)
		case r.URL.Path == "/_admin/stats":
			answer(w, http.StatusOK, `{}`)
		default:
			http.NotFound(w, r)
		}
	})
	c := newClient(t, 5*time.Second)
	ctx := context.Background()
	if id, err := c.Identify(ctx, withID); err != nil || id != "n-1" {
		t.Errorf("identify: %q, %v", id, err)
	}
	if id, err := c.Identify(ctx, legacy); err != nil || id != "" {
		t.Errorf("identify a node from before ids: %q, %v", id, err)
	}
	legacyToken.Store("other")
	if _, err := c.Identify(ctx, legacy); !errors.Is(err, ErrNodeCheck) || !errors.Is(err, ErrNodeCall) {
		t.Errorf("identify with a wrong token: %v", err)
	}
	if err := c.CheckToken(ctx, legacy); !errors.Is(err, ErrNodeCheck) {
		t.Errorf("check a wrong token: %v", err)
	}
}

// TestBounded: a node that does not answer fails a short call within the
// client's timeout.
func TestBounded(t *testing.T) {
	release := make(chan struct{})
	n, _ := stubNode(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	c := newClient(t, 100*time.Millisecond)
	start := time.Now()
	err := c.Freeze(context.Background(), n, "t", true)
	if !errors.Is(err, ErrNodeCall) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("freeze on a silent node: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("freeze on a silent node took %v, bounded by 100ms", took)
	}
}
