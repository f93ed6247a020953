package region

// The cross-tenant operator read, POST /_shard/query (router token, on any
// router: it changes nothing).
//
// The router runs the request's query, unread, on each named tenant (or
// every tenant of its copy of the directory, by name, for "*") as POST
// /t/<t>/query through its own forwarder, queryParallel at a time, and
// merges the answers by the rule the request states (package
// region/merge, which says the rules).
//
// The answer lists every tenant: {"seq": S, "rows": N}, where
// the read saw every write up to S (the router asks the node the tenant's
// change number and sends the read with Fenec-After at it), or {"error"}.
// Each tenant's answer is its own, of no one moment. Bounds: a tenant's
// answer body of maxTenantAnswer bytes (past it, that tenant's error), a
// merged answer of merge.MaxRows rows (past it, 400 for the whole read,
// never a silent cut). The read carries no data token: a node run with
// --http-token refuses it, and the tenant is listed with that refusal.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/region/forward"
	"github.com/fenec-go/fenec/region/merge"
)

// Bounds of a cross-tenant read (POST /_shard/query).
const (
	// queryParallel is how many tenants are read at once.
	queryParallel = 16
	// maxTenantAnswer bounds one tenant's answer body.
	maxTenantAnswer = 8 << 20
)

// queryRequest is the body of POST /_shard/query.
type queryRequest struct {
	Tenants json.RawMessage `json:"tenants"` // ["a", ...] or "*"
	Query   string          `json:"query"`
	Params  json.RawMessage `json:"params,omitempty"`
	Merge   merge.Rule      `json:"merge"`
}

// postQuery runs one read on each named tenant (or every tenant of the
// directory) through the router's own forwarding, and merges the answers
// by the request's rule. Any router answers it: it changes nothing.
func (c *shardCall) postQuery() {
	var req queryRequest
	if err := c.decode(&req); err != nil {
		c.fail(err)
		return
	}
	if err := req.Merge.Check(); err != nil {
		c.fail(err)
		return
	}
	if strings.TrimSpace(req.Query) == "" {
		c.fail(fmt.Errorf("%w: no query", ErrBadRequest))
		return
	}
	v, err := c.view()
	if err != nil {
		c.fail(err)
		return
	}
	names, err := queryTenants(v, req.Tenants)
	if err != nil {
		c.fail(err)
		return
	}
	body, err := json.Marshal(struct {
		Query  string          `json:"query"`
		Params json.RawMessage `json:"params,omitempty"`
	}{req.Query, req.Params})
	if err != nil {
		c.fail(fmt.Errorf("%w: %w", ErrBadRequest, err))
		return
	}
	reads := c.readTenants(v, names, body)
	ans, err := merge.Answer(req.Merge, reads)
	if err != nil {
		c.fail(err)
		return
	}
	failed := 0
	for _, r := range reads {
		if r.Err != nil {
			failed++
		}
	}
	c.rt.log.Info("cross-tenant read", "tenants", len(names), "failed", failed, "rows", len(ans.Rows),
		"request_id", c.r.Header.Get("X-Request-Id"))
	cpJSON(c.w, http.StatusOK, ans)
}

// queryTenants reads the request's tenants: a list of distinct valid
// names in its order, or "*" for every tenant of the view, by name.
func queryTenants(v *global.View, raw json.RawMessage) ([]string, error) {
	var all string
	if json.Unmarshal(raw, &all) == nil {
		if all != "*" {
			return nil, fmt.Errorf("%w: tenants is a list of names or \"*\"", ErrBadRequest)
		}
		var names []string
		for name := range v.Tenants() {
			names = append(names, name)
		}
		slices.Sort(names)
		return names, nil
	}
	var names []string
	if err := json.Unmarshal(raw, &names); err != nil || names == nil {
		return nil, fmt.Errorf("%w: tenants is a list of names or \"*\"", ErrBadRequest)
	}
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if err := global.CheckName("tenant", n); err != nil {
			return nil, err
		}
		if seen[n] {
			return nil, fmt.Errorf("%w: tenant %s named twice", ErrBadRequest, n)
		}
		seen[n] = true
	}
	return names, nil
}

// readTenants reads every tenant, queryParallel at a time; each read's
// error is its own and stops no other.
func (c *shardCall) readTenants(v *global.View, names []string, body []byte) []merge.Read {
	out := make([]merge.Read, len(names))
	var g errgroup.Group
	g.SetLimit(queryParallel)
	for i, name := range names {
		g.Go(func() error {
			out[i] = c.readTenant(c.r.Context(), v, name, body)
			return nil
		})
	}
	_ = g.Wait() // every read answers nil; its error is in out
	return out
}

// readTenant asks the tenant's node its change number, then sends the read
// through the router's forwarder with Fenec-After at that number, so the
// read saw at least every write up to the seq it is listed with.
func (c *shardCall) readTenant(ctx context.Context, v *global.View, name string, body []byte) merge.Read {
	tr := merge.Read{Tenant: name}
	t, ok := v.Tenant(name)
	if !ok {
		tr.Err = ErrUnknownTenant
		return tr
	}
	n, ok := v.Node(t.Node)
	if !ok {
		tr.Err = fmt.Errorf("%w: %s", ErrUnknownNode, t.Node)
		return tr
	}
	var rep struct {
		Seq uint64 `json:"seq"`
	}
	if _, err := c.rt.nodes.short(ctx, n, http.MethodGet, tenantPath(name)+"/replication", &rep, http.StatusOK); err != nil {
		tr.Err = fmt.Errorf("read seq: %w", err)
		return tr
	}
	tr.Seq = rep.Seq
	ans, err := c.forwardRead(ctx, name, body, rep.Seq)
	if err != nil {
		tr.Err = err
		return tr
	}
	if s := ans.header.Get("Fenec-Seq"); s != "" {
		if later, err := strconv.ParseUint(s, 10, 64); err == nil && later > tr.Seq {
			tr.Seq = later
		}
	}
	tr.Rows, tr.Err = merge.DecodeRows(ans.body.Bytes())
	return tr
}

// forwardRead sends POST /t/<name>/query through the router's forwarder,
// with the router's X-Request-Id, and returns a 200 answer whole; any
// other status is an error carrying the node's (or the router's) own.
func (c *shardCall) forwardRead(ctx context.Context, name string, body []byte, after uint64) (*captured, error) {
	path := "/t/" + name + "/query"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+c.r.Host+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build read: %w", err)
	}
	req.RequestURI = path
	req.Host = c.r.Host
	req.RemoteAddr = c.r.RemoteAddr
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", c.r.Header.Get("X-Request-Id"))
	req.Header.Set("Fenec-After", strconv.FormatUint(after, 10))
	ans := &captured{header: http.Header{}, limit: maxTenantAnswer}
	aborted := serveCaptured(c.rt.fwd, ans, req)
	switch {
	case ans.over:
		return nil, fmt.Errorf("%w (%d bytes)", ErrAnswerTooLarge, maxTenantAnswer)
	case aborted:
		return nil, fmt.Errorf("%w: answer cut short", forward.ErrBadAnswer)
	case ans.code != http.StatusOK:
		return nil, fmt.Errorf("answered %d: %s", ans.code, answerMessage(ans.body.Bytes()))
	}
	return ans, nil
}

// serveCaptured runs h on req into w; aborted is true when h ended the
// answer mid-way (http.ErrAbortHandler), which is recovered here.
func serveCaptured(h http.Handler, w *captured, req *http.Request) (aborted bool) {
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				panic(p)
			}
			aborted = true
		}
	}()
	h.ServeHTTP(w, req)
	return false
}

// answerMessage is an error answer's "error", else its text (shortened).
func answerMessage(b []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		return e.Error
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// captured is an http.ResponseWriter that keeps a bounded answer.
type captured struct {
	header http.Header
	code   int
	body   bytes.Buffer
	limit  int
	over   bool // the answer passed limit; what followed was refused
}

func (w *captured) Header() http.Header { return w.header }

func (w *captured) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	if n, err := strconv.ParseInt(w.header.Get("Content-Length"), 10, 64); err == nil && n > int64(w.limit) {
		w.over = true
	}
}

func (w *captured) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.over || w.body.Len()+len(b) > w.limit {
		w.over = true
		return 0, errCaptureFull
	}
	return w.body.Write(b)
}

// errCaptureFull stops the forwarder copying an answer past the bound.
var errCaptureFull = errors.New("answer past its bound")
