package region

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/netx"
	"github.com/fenec-go/fenec/wire"
)

// nodeClient drives nodes' /_admin/ routes with their admin tokens, through
// the admin API's client (package wire). Short calls are bounded by
// timeout; image transfers by their caller's context. Every failure is
// ErrNodeCall, wrapping the wire's (a *wire.Error when the node answered).
type nodeClient struct {
	hc      *http.Client
	tr      *http.Transport
	timeout time.Duration
}

func newNodeClient(timeout time.Duration, resolver string) *nodeClient {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         netx.Dialer(resolver, 30*time.Second).DialContext,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	return &nodeClient{hc: &http.Client{Transport: tr}, tr: tr, timeout: timeout}
}

// close drops the client's idle connections.
func (c *nodeClient) close() { c.tr.CloseIdleConnections() }

// nodeURL is the node's base URL: its address with http:// unless it
// names a scheme.
func nodeURL(addr string) string { return wire.BaseURL(addr) }

// admin is the admin API of node n, sending the X-Request-Id of the
// request that asked (if any) along, and naming the node's id when it is
// known, so that another node reached at its address refuses the call. A
// record that did not pass the router's check (global.UsableNode) gets a
// client that sends nothing and fails every call saying why.
func (c *nodeClient) admin(n global.Node) *wire.AdminClient {
	hc := c.hc
	if err := global.UsableNode(n); err != nil {
		hc = &http.Client{Transport: refusedTransport{err}}
	}
	return &wire.AdminClient{Base: n.Addr, Token: n.Token, Node: n.ID, HTTP: hc, Prepare: prepareAdmin}
}

// refusedTransport sends nothing: every request fails with err.
type refusedTransport struct{ err error }

func (t refusedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
	return nil, t.err
}

func prepareAdmin(req *http.Request) {
	if id, ok := req.Context().Value(requestIDKey{}).(string); ok {
		req.Header.Set("X-Request-Id", id)
	}
}

// bounded runs one short call within the client's timeout; its error is
// ErrNodeCall.
func (c *nodeClient) bounded(ctx context.Context, call func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return nodeCallError(call(ctx))
}

// nodeCallError wraps a wire error in ErrNodeCall (nil stays nil).
func nodeCallError(err error) error {
	if err == nil || errors.Is(err, ErrNodeCall) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrNodeCall, err)
}

// checkToken asks the node's stats with its token: it must answer 200.
func (c *nodeClient) checkToken(ctx context.Context, n global.Node) error {
	err := c.bounded(ctx, func(ctx context.Context) error {
		_, err := c.admin(n).Stats(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNodeCheck, err)
	}
	return nil
}

// sizes returns the bytes on disk of every tenant file on the node.
func (c *nodeClient) sizes(ctx context.Context, n global.Node) (map[string]int64, error) {
	var out map[string]int64
	err := c.bounded(ctx, func(ctx context.Context) (err error) {
		out, err = c.admin(n).Sizes(ctx)
		return err
	})
	return out, err
}

// create makes an empty tenant file on the node.
func (c *nodeClient) create(ctx context.Context, n global.Node, t string) error {
	err := c.bounded(ctx, func(ctx context.Context) error { return c.admin(n).Create(ctx, t) })
	if wire.StatusOf(err) == http.StatusConflict {
		return fmt.Errorf("%w on its node: %w", ErrTenantExists, err)
	}
	return err
}

// remove deletes the tenant's file on the node; gone is false when the
// node had none.
func (c *nodeClient) remove(ctx context.Context, n global.Node, t string) (gone bool, err error) {
	err = c.bounded(ctx, func(ctx context.Context) (err error) {
		gone, err = c.admin(n).Delete(ctx, t)
		return err
	})
	return gone, err
}

// removeFrozen deletes the tenant's file on the node only if it is open
// and frozen there (the node decides, as it marks the file closing); a
// file that is not is kept, the node answering 412.
func (c *nodeClient) removeFrozen(ctx context.Context, n global.Node, t string) (gone bool, err error) {
	err = c.bounded(ctx, func(ctx context.Context) (err error) {
		gone, err = c.admin(n).DeleteFrozen(ctx, t)
		return err
	})
	return gone, err
}

// tenants lists the tenant files the node holds.
func (c *nodeClient) tenants(ctx context.Context, n global.Node) ([]string, error) {
	var out []string
	err := c.bounded(ctx, func(ctx context.Context) (err error) {
		out, err = c.admin(n).Tenants(ctx)
		return err
	})
	return out, err
}

// freeze has the node refuse the tenant's writes and wait for those in
// flight; thaw takes them again.
func (c *nodeClient) freeze(ctx context.Context, n global.Node, t string, freeze bool) error {
	return c.bounded(ctx, func(ctx context.Context) error {
		var err error
		if freeze {
			_, err = c.admin(n).Freeze(ctx, t)
		} else {
			_, err = c.admin(n).Thaw(ctx, t)
		}
		return err
	})
}

// freezeAt freezes the tenant on the node and returns its seq once the
// writes in flight ended: its last until it thaws.
func (c *nodeClient) freezeAt(ctx context.Context, n global.Node, t string) (uint64, error) {
	var ans wire.Frozen
	err := c.bounded(ctx, func(ctx context.Context) (err error) {
		ans, err = c.admin(n).Freeze(ctx, t)
		return err
	})
	return ans.Seq, err
}

// imageOut opens the tenant's whole image on the node as a stream.
func (c *nodeClient) imageOut(ctx context.Context, n global.Node, t string) (io.ReadCloser, error) {
	rc, _, err := c.admin(n).Image(ctx, t)
	return rc, nodeCallError(err)
}

// imageIn installs an image read from r as the tenant on the node.
func (c *nodeClient) imageIn(ctx context.Context, n global.Node, t string, r io.Reader) error {
	return nodeCallError(c.admin(n).Install(ctx, t, r, -1))
}

// replication reads a tenant's role and position on a node.
func (c *nodeClient) replication(ctx context.Context, n global.Node, t string) (wire.Replication, error) {
	var st wire.Replication
	err := c.bounded(ctx, func(ctx context.Context) (err error) {
		st, err = c.admin(n).Replication(ctx, t)
		return err
	})
	return st, err
}

// follow has the node's file of t follow the node at from, as the node
// named as (the name its primary's lease list gives the replica).
func (c *nodeClient) follow(ctx context.Context, n global.Node, as, t string, from global.Node) error {
	return c.followAs(ctx, n, as, t, from, "")
}

// followAs is follow in a role: wire.RoleVoting ("" too) or wire.RoleRead.
func (c *nodeClient) followAs(ctx context.Context, n global.Node, as, t string, from global.Node, role string) error {
	if err := global.UsableNode(from); err != nil {
		return fmt.Errorf("%w: the primary to follow: %w", ErrNodeCall, err)
	}
	return c.bounded(ctx, func(ctx context.Context) error {
		_, err := c.admin(n).Follow(ctx, t, wire.Follow{From: nodeURL(from.Addr), As: as, Role: role})
		return err
	})
}

// promote asks the node to promote its copy of t; a refusal (409) is
// returned as an error naming the node's reason.
func (c *nodeClient) promote(ctx context.Context, n global.Node, t string, rec global.Tenant, force bool, fence wire.Promote) (wire.Promoted, error) {
	var ans wire.Promoted
	err := c.bounded(ctx, func(ctx context.Context) (err error) {
		ans, err = c.admin(n).Promote(ctx, t, wire.Promote{Lineage: rec.Lineage, ForkedHistory: rec.ForkedHistory, Force: force,
			Dir: fence.Dir, Epoch: fence.Epoch, Term: fence.Term})
		return err
	})
	return ans, err
}

// promoteMany asks the node to promote its copies of many tenants in one
// call, each checked as promote checks one (rec: each tenant's record).
// A node that does not know the route (older than it) answers it 404:
// errNoBulkPromote.
func (c *nodeClient) promoteMany(ctx context.Context, n global.Node, names []string, recs []global.Tenant, force bool, fence wire.Promote) (wire.PromotedMany, error) {
	req := wire.PromoteMany{Force: force, Dir: fence.Dir, Epoch: fence.Epoch, Term: fence.Term, Tenants: make([]wire.PromoteTenant, len(names))}
	for i, t := range names {
		req.Tenants[i] = wire.PromoteTenant{Tenant: t, Lineage: recs[i].Lineage, ForkedHistory: recs[i].ForkedHistory}
	}
	var ans wire.PromotedMany
	err := c.bounded(ctx, func(ctx context.Context) (err error) {
		ans, err = c.admin(n).PromoteMany(ctx, req)
		return err
	})
	var we *wire.Error
	if errors.As(err, &we) && we.Status == http.StatusNotFound {
		return ans, fmt.Errorf("%w: %w", errNoBulkPromote, err)
	}
	if err == nil && len(ans.Tenants) != len(names) {
		return ans, fmt.Errorf("%w: promoted %d tenants answered for %d asked", ErrNodeCall, len(ans.Tenants), len(names))
	}
	return ans, err
}

// errNoBulkPromote: a node without POST /_admin/promote; its copies are
// promoted one call each.
var errNoBulkPromote = errors.New("the node promotes one tenant a call")

// putQuota sends the tenant's quota to the node.
func (c *nodeClient) putQuota(ctx context.Context, n global.Node, t string, q global.Quota) error {
	return c.bounded(ctx, func(ctx context.Context) error {
		_, err := c.admin(n).PutQuota(ctx, t, q)
		return err
	})
}

// read runs one statement on the tenant through the node's admin read
// route, which runs it only if it reads, and returns the answer body (at
// most limit bytes, else ErrAnswerTooLarge) and the seq the read saw. A
// refusal of the statement itself is a *statementError.
func (c *nodeClient) read(ctx context.Context, n global.Node, t string, st wire.Statement, limit int64) ([]byte, uint64, error) {
	b, seq, err := c.admin(n).Read(ctx, t, st, limit)
	var refused *wire.StatementRefused
	switch {
	case errors.As(err, &refused):
		return nil, 0, &statementError{msg: refused.Message, verb: refused.Verb}
	case errors.Is(err, wire.ErrTooLarge):
		return nil, 0, fmt.Errorf("%w (%d bytes)", ErrAnswerTooLarge, limit)
	}
	return b, seq, nodeCallError(err)
}
