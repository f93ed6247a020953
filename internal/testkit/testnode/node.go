// Package testnode starts a real fenec-node in process for tests, on a
// loopback address of its own that stays the node's across a restart. It
// is testkit's half that imports the node: the engine's and the node's
// own tests, which the node imports, cannot use it.
package testnode

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/node"
	"github.com/fenec-go/fenec/wire"
)

// The tokens a test node takes unless Configure says otherwise.
const (
	AdminToken       = "test-admin-token"
	ReplicationToken = "test-replication-token"
)

// Options adjust a test node.
type Options struct {
	// Configure adjusts the node's configuration (--lease, --sync, a
	// token, a directory of its own) after the test defaults: a fresh
	// temp dir, AdminToken, ReplicationToken, --sync off, logs discarded
	// unless FENEC_TEST_LOG is set (testkit.Logger).
	Configure func(*node.Config)
	// Wrap, if set, stands in front of the node: it is given the node's
	// handler and answers every request (a test refusing, holding or
	// cutting some of them).
	Wrap func(next http.Handler) http.Handler
}

// Node is a fenec-node served in process. Stop takes it down (its
// address then answers 502 to everything) and Start brings it back on the
// same directory, as a restart of the process would.
type Node struct {
	tb  testing.TB
	cfg node.Config
	srv *httptest.Server
	cur atomic.Pointer[node.Server] // nil while down
}

// Start starts a node and stops it at the end of the test.
func Start(tb testing.TB, o Options) *Node {
	tb.Helper()
	cfg := node.DefaultConfig()
	cfg.Dir = tb.TempDir()
	cfg.HTTP = "127.0.0.1:0"
	cfg.AdminToken = AdminToken
	cfg.ReplicationToken = ReplicationToken
	cfg.Sync = "off"
	cfg.Logger = testkit.Logger()
	if o.Configure != nil {
		o.Configure(&cfg)
	}
	n := &Node{tb: tb, cfg: cfg}
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := n.cur.Load()
		if s == nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		s.ServeHTTP(w, r)
	})
	if o.Wrap != nil {
		h = o.Wrap(h)
	}
	n.srv = httptest.NewServer(h)
	n.Start()
	tb.Cleanup(n.Close)
	return n
}

// Start brings a stopped node back on its directory (its copies resume
// following); a node up already is left as it is.
func (n *Node) Start() {
	n.tb.Helper()
	if n.cur.Load() != nil {
		return
	}
	s, err := node.New(n.cfg)
	if err != nil {
		n.tb.Fatalf("new node: %v", err)
	}
	if err := s.Start(); err != nil {
		n.tb.Fatalf("start node: %v", err)
	}
	n.cur.Store(s)
}

// Stop stops the node: it answers nothing but 502 from then on, and the
// connections open to it are closed.
func (n *Node) Stop() {
	n.tb.Helper()
	s := n.cur.Swap(nil)
	if s == nil {
		return
	}
	n.srv.CloseClientConnections()
	if err := s.Close(); err != nil {
		n.tb.Errorf("close node: %v", err)
	}
}

// Close stops the node and closes its address: connections to it are
// refused from then on, as to a machine gone. Safe to call twice.
func (n *Node) Close() {
	n.tb.Helper()
	n.Stop()
	n.srv.Close()
}

// Server is the node running now (nil while stopped).
func (n *Node) Server() *node.Server { return n.cur.Load() }

// Config is the node's configuration.
func (n *Node) Config() node.Config { return n.cfg }

// URL is the node's base URL ("http://127.0.0.1:port").
func (n *Node) URL() string { return n.srv.URL }

// Addr is the node's host:port.
func (n *Node) Addr() string { return strings.TrimPrefix(n.srv.URL, "http://") }

// CloseClientConnections closes every connection open to the node.
func (n *Node) CloseClientConnections() { n.srv.CloseClientConnections() }

// Admin is the node's admin API with its admin token.
func (n *Node) Admin() *wire.AdminClient {
	return &wire.AdminClient{Base: n.srv.URL, Token: n.cfg.AdminToken, HTTP: n.srv.Client()}
}

// Ctx is a context bounding one call a test makes, cancelled at cleanup.
func Ctx(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	tb.Cleanup(cancel)
	return ctx
}
