package region

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/netx"
)

// nodeClient drives nodes' /_admin/ routes with their admin tokens. Short
// calls are bounded by timeout; image transfers by their caller's context.
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
func nodeURL(addr string) string {
	if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
		return strings.TrimSuffix(addr, "/")
	}
	return "http://" + addr
}

// call sends one admin request and returns the answer for the caller to
// read and close; body may be nil.
func (c *nodeClient) call(ctx context.Context, n global.Node, method, path string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, nodeURL(n.Addr)+path, body)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s: %w", ErrNodeCall, method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+n.Token)
	if id, ok := ctx.Value(requestIDKey{}).(string); ok {
		req.Header.Set("X-Request-Id", id)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s: %w", ErrNodeCall, method, path, err)
	}
	return resp, nil
}

// short is one bounded admin call expecting one of want; the answer body
// is decoded into out when out is not nil. It returns the status.
func (c *nodeClient) short(ctx context.Context, n global.Node, method, path string, out any, want ...int) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.call(ctx, n, method, path, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	for _, w := range want {
		if resp.StatusCode != w {
			continue
		}
		if out != nil && w < 300 {
			if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(out); err != nil {
				return w, fmt.Errorf("%w: %s %s: decode answer: %w", ErrNodeCall, method, path, err)
			}
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return w, nil
	}
	return resp.StatusCode, answerError(method, path, resp)
}

// answerError describes an unexpected answer, with the node's own error.
func answerError(method, path string, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	var e struct {
		Error string `json:"error"`
	}
	msg := strings.TrimSpace(string(b))
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		msg = e.Error
	}
	return fmt.Errorf("%w: %s %s: node answered %d: %s", ErrNodeCall, method, path, resp.StatusCode, msg)
}

func tenantPath(t string) string { return "/_admin/tenants/" + url.PathEscape(t) }

// checkToken asks the node's stats with its token: it must answer 200.
func (c *nodeClient) checkToken(ctx context.Context, n global.Node) error {
	if _, err := c.short(ctx, n, http.MethodGet, "/_admin/stats", nil, http.StatusOK); err != nil {
		return fmt.Errorf("%w: %w", ErrNodeCheck, err)
	}
	return nil
}

// sizes returns the bytes on disk of every tenant file on the node.
func (c *nodeClient) sizes(ctx context.Context, n global.Node) (map[string]int64, error) {
	var out map[string]int64
	_, err := c.short(ctx, n, http.MethodGet, "/_admin/sizes", &out, http.StatusOK)
	return out, err
}

// create makes an empty tenant file on the node.
func (c *nodeClient) create(ctx context.Context, n global.Node, t string) error {
	code, err := c.short(ctx, n, http.MethodPut, tenantPath(t), nil, http.StatusCreated)
	if code == http.StatusConflict {
		return fmt.Errorf("%w on its node: %w", ErrTenantExists, err)
	}
	return err
}

// remove deletes the tenant's file on the node; gone is false when the
// node had none.
func (c *nodeClient) remove(ctx context.Context, n global.Node, t string) (gone bool, err error) {
	code, err := c.short(ctx, n, http.MethodDelete, tenantPath(t), nil, http.StatusNoContent, http.StatusNotFound)
	return code == http.StatusNoContent, err
}

// freeze has the node refuse the tenant's writes and wait for those in
// flight; thaw takes them again.
func (c *nodeClient) freeze(ctx context.Context, n global.Node, t string, freeze bool) error {
	what := "/thaw"
	if freeze {
		what = "/freeze"
	}
	_, err := c.short(ctx, n, http.MethodPost, tenantPath(t)+what, nil, http.StatusOK)
	return err
}

// imageOut opens the tenant's whole image on the node as a stream.
func (c *nodeClient) imageOut(ctx context.Context, n global.Node, t string) (io.ReadCloser, error) {
	resp, err := c.call(ctx, n, http.MethodGet, tenantPath(t)+"/file", nil)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, answerError(http.MethodGet, tenantPath(t)+"/file", resp)
	}
	return resp.Body, nil
}

// imageIn installs an image read from r as the tenant on the node.
func (c *nodeClient) imageIn(ctx context.Context, n global.Node, t string, r io.Reader) error {
	resp, err := c.call(ctx, n, http.MethodPut, tenantPath(t)+"/file", r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return answerError(http.MethodPut, tenantPath(t)+"/file", resp)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return nil
}

// read runs one statement on the tenant through the node's admin read
// route, which runs it only if it reads, and returns the answer body (at
// most limit bytes, else ErrAnswerTooLarge) and the seq the read saw. A
// refusal of the statement itself is a *statementError.
func (c *nodeClient) read(ctx context.Context, n global.Node, t string, body []byte, limit int64) ([]byte, uint64, error) {
	path := tenantPath(t) + "/read"
	resp, err := c.call(ctx, n, http.MethodPost, path, bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var e struct {
			Error            string `json:"error"`
			StatementRefused bool   `json:"statement_refused"`
			Verb             string `json:"verb"`
		}
		if resp.StatusCode == http.StatusBadRequest && json.Unmarshal(b, &e) == nil && e.StatementRefused {
			return nil, 0, &statementError{msg: e.Error, verb: e.Verb}
		}
		resp.Body = io.NopCloser(bytes.NewReader(b))
		return nil, 0, answerError(http.MethodPost, path, resp)
	}
	if resp.ContentLength > limit {
		return nil, 0, fmt.Errorf("%w (%d bytes)", ErrAnswerTooLarge, limit)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	switch {
	case err != nil:
		return nil, 0, fmt.Errorf("%w: %s %s: read answer: %w", ErrNodeCall, http.MethodPost, path, err)
	case int64(len(b)) > limit:
		return nil, 0, fmt.Errorf("%w (%d bytes)", ErrAnswerTooLarge, limit)
	}
	seq, err := strconv.ParseUint(resp.Header.Get("Fenec-Seq"), 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %s %s: answer names no Fenec-Seq", ErrNodeCall, http.MethodPost, path)
	}
	return b, seq, nil
}
