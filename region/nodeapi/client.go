package nodeapi

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

// Client drives nodes' /_admin/ routes with their admin tokens, through
// the admin API's client (package wire). Short calls are bounded by
// timeout; image transfers by their caller's context. Every failure is
// ErrNodeCall, wrapping the wire's (a *wire.Error when the node answered).
type Client struct {
	hc      *http.Client
	tr      *http.Transport
	timeout time.Duration
}

// New returns a client bounding each short call by timeout, resolving
// names through resolver ("" for the system's).
func New(timeout time.Duration, resolver string) *Client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         netx.Dialer(resolver, 30*time.Second).DialContext,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	return &Client{hc: &http.Client{Transport: tr}, tr: tr, timeout: timeout}
}

// Transport is the client's transport, for the router to set its TLS
// dialer on before the first call.
func (c *Client) Transport() *http.Transport { return c.tr }

// Close drops the client's idle connections.
func (c *Client) Close() { c.tr.CloseIdleConnections() }

// requestIDKey carries a request's id into the admin calls it makes.
type requestIDKey struct{}

// WithRequestID returns ctx carrying id, which every admin call made with
// it sends as its X-Request-Id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID is the request id ctx carries ("" when none).
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// Admin is the admin API of node n, sending the X-Request-Id of the
// request that asked (if any) along, and naming the node's id when it is
// known, so that another node reached at its address refuses the call. A
// record that did not pass the router's check (global.UsableNode) gets a
// client that sends nothing and fails every call saying why.
func (c *Client) Admin(n global.Node) *wire.AdminClient {
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
func (c *Client) bounded(ctx context.Context, call func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return CallError(call(ctx))
}

// CallError wraps a wire error in ErrNodeCall (nil stays nil), for the
// router's own calls through Admin.
func CallError(err error) error {
	if err == nil || errors.Is(err, ErrNodeCall) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrNodeCall, err)
}

// CheckToken asks the node's stats with its token: it must answer 200.
func (c *Client) CheckToken(ctx context.Context, n global.Node) error {
	err := c.bounded(ctx, func(ctx context.Context) error {
		_, err := c.Admin(n).Stats(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNodeCheck, err)
	}
	return nil
}

// Identify asks the node at n.Addr its id, with n's token: the answer
// also proves the token. A node from before ids (its /_admin/node is 404
// while its token opens /_admin/stats) answers "".
func (c *Client) Identify(ctx context.Context, n global.Node) (string, error) {
	var id string
	err := c.bounded(ctx, func(ctx context.Context) (err error) {
		id, err = c.Admin(n).ID(ctx)
		return err
	})
	if wire.StatusOf(err) == http.StatusNotFound {
		return "", c.CheckToken(ctx, n)
	}
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNodeCheck, err)
	}
	return id, nil
}

// Sizes returns the bytes on disk of every tenant file on the node.
func (c *Client) Sizes(ctx context.Context, n global.Node) (map[string]int64, error) {
	var out map[string]int64
	err := c.bounded(ctx, func(ctx context.Context) (err error) {
		out, err = c.Admin(n).Sizes(ctx)
		return err
	})
	return out, err
}

// Create makes an empty tenant file on the node.
func (c *Client) Create(ctx context.Context, n global.Node, t string) error {
	err := c.bounded(ctx, func(ctx context.Context) error { return c.Admin(n).Create(ctx, t) })
	if wire.StatusOf(err) == http.StatusConflict {
		return fmt.Errorf("%w on its node: %w", ErrTenantExists, err)
	}
	return err
}

// Remove deletes the tenant's file on the node; gone is false when the
// node had none.
func (c *Client) Remove(ctx context.Context, n global.Node, t string) (gone bool, err error) {
	err = c.bounded(ctx, func(ctx context.Context) (err error) {
		gone, err = c.Admin(n).Delete(ctx, t)
		return err
	})
	return gone, err
}

// RemoveFrozen deletes the tenant's file on the node only if it is open
// and frozen there (the node decides, as it marks the file closing); a
// file that is not is kept, the node answering 412.
func (c *Client) RemoveFrozen(ctx context.Context, n global.Node, t string) (gone bool, err error) {
	err = c.bounded(ctx, func(ctx context.Context) (err error) {
		gone, err = c.Admin(n).DeleteFrozen(ctx, t)
		return err
	})
	return gone, err
}

// Tenants lists the tenant files the node holds.
func (c *Client) Tenants(ctx context.Context, n global.Node) ([]string, error) {
	var out []string
	err := c.bounded(ctx, func(ctx context.Context) (err error) {
		out, err = c.Admin(n).Tenants(ctx)
		return err
	})
	return out, err
}

// Freeze has the node refuse the tenant's writes and wait for those in
// flight (freeze true), or take them again (false).
func (c *Client) Freeze(ctx context.Context, n global.Node, t string, freeze bool) error {
	return c.bounded(ctx, func(ctx context.Context) error {
		var err error
		if freeze {
			_, err = c.Admin(n).Freeze(ctx, t)
		} else {
			_, err = c.Admin(n).Thaw(ctx, t)
		}
		return err
	})
}

// FreezeAt freezes the tenant on the node and returns its seq once the
// writes in flight ended: its last until it thaws.
func (c *Client) FreezeAt(ctx context.Context, n global.Node, t string) (uint64, error) {
	var ans wire.Frozen
	err := c.bounded(ctx, func(ctx context.Context) (err error) {
		ans, err = c.Admin(n).Freeze(ctx, t)
		return err
	})
	return ans.Seq, err
}

// ImageOut opens the tenant's whole image on the node as a stream.
func (c *Client) ImageOut(ctx context.Context, n global.Node, t string) (io.ReadCloser, error) {
	rc, _, err := c.Admin(n).Image(ctx, t)
	return rc, CallError(err)
}

// ImageIn installs an image read from r as the tenant on the node.
func (c *Client) ImageIn(ctx context.Context, n global.Node, t string, r io.Reader) error {
	return CallError(c.Admin(n).Install(ctx, t, r, -1))
}

// Replication reads a tenant's role and position on a node.
func (c *Client) Replication(ctx context.Context, n global.Node, t string) (wire.Replication, error) {
	var st wire.Replication
	err := c.bounded(ctx, func(ctx context.Context) (err error) {
		st, err = c.Admin(n).Replication(ctx, t)
		return err
	})
	return st, err
}

// Follow has the node's file of t follow the node at from, as the node
// named as (the name its primary's lease list gives the replica).
func (c *Client) Follow(ctx context.Context, n global.Node, as, t string, from global.Node) error {
	return c.FollowAs(ctx, n, as, t, from, "")
}

// FollowAs is Follow in a role: wire.RoleVoting ("" too) or wire.RoleRead.
func (c *Client) FollowAs(ctx context.Context, n global.Node, as, t string, from global.Node, role string) error {
	if err := global.UsableNode(from); err != nil {
		return fmt.Errorf("%w: the primary to follow: %w", ErrNodeCall, err)
	}
	return c.bounded(ctx, func(ctx context.Context) error {
		_, err := c.Admin(n).Follow(ctx, t, wire.Follow{From: wire.BaseURL(from.Addr), As: as, Role: role})
		return err
	})
}

// Promote asks the node to promote its copy of t; a refusal (409) is
// returned as an error naming the node's reason.
func (c *Client) Promote(ctx context.Context, n global.Node, t string, rec global.Tenant, force bool, fence wire.Promote) (wire.Promoted, error) {
	var ans wire.Promoted
	err := c.bounded(ctx, func(ctx context.Context) (err error) {
		ans, err = c.Admin(n).Promote(ctx, t, wire.Promote{Lineage: rec.Lineage, ForkedHistory: rec.ForkedHistory, Force: force,
			Dir: fence.Dir, Epoch: fence.Epoch, Term: fence.Term})
		return err
	})
	return ans, err
}

// PromoteMany asks the node to promote its copies of many tenants in one
// call, each checked as Promote checks one (recs: each tenant's record).
// A node that does not know the route (older than it) answers it 404:
// ErrNoBulkPromote.
func (c *Client) PromoteMany(ctx context.Context, n global.Node, names []string, recs []global.Tenant, force bool, fence wire.Promote) (wire.PromotedMany, error) {
	req := wire.PromoteMany{Force: force, Dir: fence.Dir, Epoch: fence.Epoch, Term: fence.Term, Tenants: make([]wire.PromoteTenant, len(names))}
	for i, t := range names {
		req.Tenants[i] = wire.PromoteTenant{Tenant: t, Lineage: recs[i].Lineage, ForkedHistory: recs[i].ForkedHistory}
	}
	var ans wire.PromotedMany
	err := c.bounded(ctx, func(ctx context.Context) (err error) {
		ans, err = c.Admin(n).PromoteMany(ctx, req)
		return err
	})
	var we *wire.Error
	if errors.As(err, &we) && we.Status == http.StatusNotFound {
		return ans, fmt.Errorf("%w: %w", ErrNoBulkPromote, err)
	}
	if err == nil && len(ans.Tenants) != len(names) {
		return ans, fmt.Errorf("%w: promoted %d tenants answered for %d asked", ErrNodeCall, len(ans.Tenants), len(names))
	}
	return ans, err
}

// PutQuota sends the tenant's quota to the node.
func (c *Client) PutQuota(ctx context.Context, n global.Node, t string, q global.Quota) error {
	return c.bounded(ctx, func(ctx context.Context) error {
		_, err := c.Admin(n).PutQuota(ctx, t, q)
		return err
	})
}

// Read runs one statement on the tenant through the node's admin read
// route, which runs it only if it reads, and returns the answer body (at
// most limit bytes, else ErrAnswerTooLarge) and the seq the read saw. A
// refusal of the statement itself is the node's *wire.StatementRefused,
// as it is.
func (c *Client) Read(ctx context.Context, n global.Node, t string, st wire.Statement, limit int64) ([]byte, uint64, error) {
	b, seq, err := c.Admin(n).Read(ctx, t, st, limit)
	var refused *wire.StatementRefused
	switch {
	case errors.As(err, &refused):
		return nil, 0, refused
	case errors.Is(err, wire.ErrTooLarge):
		return nil, 0, fmt.Errorf("%w (%d bytes)", ErrAnswerTooLarge, limit)
	}
	return b, seq, CallError(err)
}
