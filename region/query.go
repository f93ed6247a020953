package region

// The cross-tenant operator read, POST /_shard/query (router token, on any
// router: it changes nothing).
//
// The router runs the request's query, unread, on each named tenant (or
// every tenant of its copy of the directory, by name, for "*"),
// queryParallel at a time, and merges the answers by the rule the request
// states (package region/merge, which says the rules).
//
// The answer lists every tenant: {"seq": S, "rows": N}, where S is the
// tenant's seq the read saw, or {"error"}. Each tenant's answer is its
// own, of no one moment. Bounds: a tenant's read of timeout_ms (the
// request's, default defaultReadTimeout, at most --upstream-timeout; past
// it, that tenant's error "timed out after N ms", and the node's other
// tenants not yet read are listed as not read, rather than each waiting
// out the bound), a tenant's answer body of maxTenantAnswer bytes (past
// it, that tenant's error), a merged answer of merge.MaxRows rows (past
// it, 400 for the whole read, never a silent cut).
//
// Each tenant is read through its node's admin read route (POST
// /_admin/tenants/<t>/read, with the node's admin token, which the router
// holds): the read needs no data token, counts toward no client's
// back-off, and runs only if it reads. The router never parses the query;
// the node refuses one that would write before anything runs, and that
// refusal — or any of the statement itself, the same on every tenant — is
// the whole read's: 400, no tenant read.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/region/merge"
	"github.com/fenec-go/fenec/wire"
)

// Bounds of a cross-tenant read (POST /_shard/query).
const (
	// queryParallel is how many tenants are read at once.
	queryParallel = 16
	// maxTenantAnswer bounds one tenant's answer body.
	maxTenantAnswer = 8 << 20
	// defaultReadTimeout bounds one tenant's read when the request names
	// no timeout_ms (or --upstream-timeout, if that is shorter).
	defaultReadTimeout = 10 * time.Second
)

// queryRequest is the body of POST /_shard/query.
type queryRequest struct {
	Tenants json.RawMessage `json:"tenants"` // ["a", ...] or "*"
	Query   string          `json:"query"`
	Params  json.RawMessage `json:"params,omitempty"`
	Merge   merge.Rule      `json:"merge"`
	// TimeoutMS bounds each tenant's read, in milliseconds: a whole
	// number from 1 to --upstream-timeout's.
	TimeoutMS json.RawMessage `json:"timeout_ms,omitempty"`
}

// postQuery runs one read on each named tenant (or every tenant of the
// directory) on its node, and merges the answers by the request's rule.
// Any router answers it: it changes nothing.
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
	timeout, err := readTimeout(req.TimeoutMS, c.rt.cfg.Forward.UpstreamTimeout)
	if err != nil {
		c.fail(err)
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
	// Params was read as JSON from the request: it is valid JSON as it is.
	reads := c.readTenants(v, names, wire.Statement{Query: req.Query, Params: req.Params}, timeout)
	for _, r := range reads {
		var se *statementError
		if errors.As(r.Err, &se) {
			c.fail(se.whole())
			return
		}
	}
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
		"timeout_ms", timeout.Milliseconds(), "request_id", c.r.Header.Get("X-Request-Id"))
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

// readTimeout reads timeout_ms: absent or null, defaultReadTimeout (or
// upstream, if shorter); else a whole number of milliseconds from 1 to
// upstream's, anything else refused saying the range.
func readTimeout(raw json.RawMessage, upstream time.Duration) (time.Duration, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return min(defaultReadTimeout, upstream), nil
	}
	most := upstream.Milliseconds()
	ms, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || ms < 1 || ms > most {
		return 0, fmt.Errorf("%w: timeout_ms is %s: send a whole number of milliseconds from 1 to %d (this router's --upstream-timeout), "+
			"or leave it out for %d", ErrBadRequest, raw, most, min(defaultReadTimeout, upstream).Milliseconds())
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// readTenants reads every tenant, queryParallel at a time, each within
// timeout; each read's error is its own and stops no other. Once a
// node's read timed out, its tenants not yet read are listed as not read
// rather than each waiting the bound out.
func (c *shardCall) readTenants(v *global.View, names []string, st wire.Statement, timeout time.Duration) []merge.Read {
	out := make([]merge.Read, len(names))
	var mu sync.Mutex             // guards silent
	silent := map[string]string{} // node -> the tenant whose read on it timed out
	var g errgroup.Group
	g.SetLimit(queryParallel)
	for i, name := range names {
		g.Go(func() error {
			node := ""
			if t, ok := v.Tenant(name); ok {
				node = t.Node
			}
			mu.Lock()
			first, timedOut := silent[node]
			mu.Unlock()
			if timedOut {
				out[i] = merge.Read{Tenant: name, Err: fmt.Errorf("%w after %d ms: not read, node %s having left %s's read unanswered that long",
					ErrReadTimeout, timeout.Milliseconds(), node, first)}
				return nil
			}
			out[i] = c.readTenant(c.r.Context(), v, name, st, timeout)
			if errors.Is(out[i].Err, ErrReadTimeout) {
				mu.Lock()
				if _, ok := silent[node]; !ok {
					silent[node] = name
				}
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait() // every read answers nil; its error is in out
	return out
}

// readTenant reads the tenant on its node through the node's admin read
// route, bounded by timeout; the node answers the seq its read saw.
func (c *shardCall) readTenant(ctx context.Context, v *global.View, name string, st wire.Statement, timeout time.Duration) merge.Read {
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
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	b, seq, err := c.rt.nodes.Read(rctx, n, name, st, maxTenantAnswer)
	var refused *wire.StatementRefused
	if errors.As(err, &refused) {
		err = &statementError{msg: refused.Message, verb: refused.Verb}
	}
	if err != nil {
		if ctx.Err() == nil && errors.Is(rctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("%w after %d ms: node %s did not answer (timeout_ms)", ErrReadTimeout, timeout.Milliseconds(), t.Node)
		}
		tr.Err = err
		return tr
	}
	tr.Seq = seq
	tr.Rows, tr.Err = merge.DecodeRows(b)
	return tr
}

// statementError is a node's refusal of the cross-tenant read's statement
// itself — it writes, does not parse, or its parameters do not fit —
// which is the same on every tenant: the whole read is answered 400.
type statementError struct {
	msg  string // the node's message
	verb string // the statement's verb when it writes ("" otherwise)
}

func (e *statementError) Error() string { return e.msg }

// whole is the refusal of the whole cross-tenant read, saying what to do.
func (e *statementError) whole() error {
	if e.verb != "" {
		return fmt.Errorf("%w: POST /_shard/query runs reads only, and this query is a %s, which writes: "+
			"nothing ran on any tenant; send a write to each tenant itself with POST /t/{tenant}/query", ErrBadRequest, e.verb)
	}
	return fmt.Errorf("%w: the query was refused, so no tenant was read: %s", ErrBadRequest, e.msg)
}
