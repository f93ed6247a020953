package leasing

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/netx"
	"github.com/fenec-go/fenec/lease"
	"github.com/fenec-go/fenec/wire"
)

// maxGrantAnswer bounds a node's answer to a grant.
const maxGrantAnswer = 64 << 10

// HTTPTransport carries grants to nodes over HTTP: POST /_admin/lease
// with the node's admin token, the address and token read from the
// router's copy of the directory at each call. Every call, name
// resolution and connecting included, is bounded by its ctx: the dialer
// resolves within the ctx, so a node whose name a resolver is slow to
// refuse holds up only its own grant.
type HTTPTransport struct {
	nodes func(name string) (global.Node, bool)
	hc    *http.Client
	tr    *http.Transport
}

// NewHTTPTransport reaches the nodes that nodes names, resolving their
// names with resolver ("": the system's); secure, if not nil, has the
// transport speak TLS as the router does to its nodes.
func NewHTTPTransport(nodes func(name string) (global.Node, bool), resolver string, secure func(*http.Transport)) *HTTPTransport {
	d := netx.Dialer(resolver, 15*time.Second)
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         d.DialContext,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	if secure != nil {
		secure(tr)
	}
	return &HTTPTransport{nodes: nodes, hc: &http.Client{Transport: tr}, tr: tr}
}

// Send posts g to node and returns its answer, or the refusal it stands
// for (lease.DecodeReply).
func (t *HTTPTransport) Send(ctx context.Context, node string, g lease.Grant) (lease.Answer, error) {
	n, ok := t.nodes(node)
	if !ok {
		return lease.Answer{}, fmt.Errorf("grant to %s: %w", node, ErrUnknownNode)
	}
	body, err := json.Marshal(g)
	if err != nil {
		return lease.Answer{}, fmt.Errorf("grant to %s: %w", node, err)
	}
	status, ans, err := t.do(ctx, n, http.MethodPost, bytes.NewReader(body))
	if err != nil {
		return lease.Answer{}, fmt.Errorf("grant to %s: %w", node, err)
	}
	return lease.DecodeReply(status, ans)
}

// Probe asks node whether it takes leases (GET /_admin/lease): true on
// 200, false on the 409 of a node started without --lease; an error when
// it did not say (another 409 too: a node refusing a call meant for
// another node says nothing of its own leases).
func (t *HTTPTransport) Probe(ctx context.Context, n global.Node) (bool, error) {
	status, body, err := t.do(ctx, n, http.MethodGet, nil)
	if err != nil {
		return false, err
	}
	switch {
	case status == http.StatusOK:
		return true, nil
	case status == http.StatusConflict && errors.Is(decodeRefusal(body), lease.ErrTakesNoLease):
		return false, nil
	}
	return false, fmt.Errorf("%w: GET /_admin/lease: %d %.200s", ErrNodeCall, status, body)
}

// do makes one call and reads its answer whole.
func (t *HTTPTransport) do(ctx context.Context, n global.Node, method string, body io.Reader) (int, []byte, error) {
	if err := global.UsableNode(n); err != nil {
		return 0, nil, fmt.Errorf("%w: %w", ErrNodeCall, err)
	}
	req, err := http.NewRequestWithContext(ctx, method, wire.BaseURL(n.Addr)+"/_admin/lease", body)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %w", ErrNodeCall, err)
	}
	req.Header.Set("Authorization", "Bearer "+n.Token)
	if n.ID != "" {
		// A node that is not this one refuses the grant (the node's
		// identity check): it
		// never takes another node's list.
		req.Header.Set(wire.HeaderNode, n.ID)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %w", ErrNodeCall, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxGrantAnswer))
	if err != nil {
		return 0, nil, fmt.Errorf("%w: read answer: %w", ErrNodeCall, err)
	}
	return resp.StatusCode, b, nil
}

// decodeRefusal is the refusal a node's answer to a grant stands for.
func decodeRefusal(body []byte) error {
	_, err := lease.DecodeReply(http.StatusConflict, body)
	return err
}

// Close drops idle connections.
func (t *HTTPTransport) Close() { t.tr.CloseIdleConnections() }
