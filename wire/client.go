package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Bounds on what AdminClient reads of an answer.
const (
	maxAnswer      = 16 << 20 // a JSON answer (the sizes of every tenant)
	maxErrorAnswer = 4 << 10  // an error answer's body, for its message
)

// AdminClient calls one node's /_admin/ API with the node's admin token.
// Every method takes a context, which bounds the whole call (an image's
// stream included); answers other than the route's own are an *Error.
type AdminClient struct {
	// Base is the node's base URL ("http://host:port"); a bare host:port
	// is taken as http.
	Base string
	// Token is the node's admin token.
	Token string
	// Node, if set, is the id of the node meant (HeaderNode): a node that
	// is not that one refuses every call but ID.
	Node string
	// HTTP sends the requests; nil: http.DefaultClient.
	HTTP *http.Client
	// Prepare, if set, is called on each request before it is sent, for
	// the caller's own headers (an X-Request-Id).
	Prepare func(*http.Request)
}

// Error is an answer a route does not give when it succeeds: its status
// and the node's own message ("error" of its body, else the body), and
// the refusal's code when the node gave one ("code" of its body).
type Error struct {
	Method, Path string
	Status       int
	Message      string
	// Code is the refusal's stable code (CodeCannotFollow); "" when the
	// node gave none. An *Error with a known code is errors.Is its
	// sentinel (ErrCannotFollow).
	Code string

	body []byte // the answer's first bytes, for fields a refusal names
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s %s: node answered %d: %s", e.Method, e.Path, e.Status, e.Message)
}

// Is says whether target is the sentinel of the refusal's code.
func (e *Error) Is(target error) bool {
	want, ok := codeErrors[e.Code]
	return ok && want == target
}

// Codes of a node's refusals, the "code" of its error answer: what a
// caller decides by, where the message is prose that may change.
const (
	// CodeCannotFollow: the node cannot follow another node's copy (it
	// has no --replication-token); a 400 to POST
	// /_admin/tenants/<t>/follow.
	CodeCannotFollow = "cannot_follow"
)

// ErrCannotFollow is an *Error coded CodeCannotFollow: the node cannot
// follow (no --replication-token), so a move copies the image instead.
var ErrCannotFollow = errors.New("the node cannot follow another node's copy: it has no --replication-token")

// codeErrors is the sentinel of each code.
var codeErrors = map[string]error{
	CodeCannotFollow: ErrCannotFollow,
}

// StatusOf is the status of the node's answer err carries (an *Error),
// or 0 when the node gave none (it could not be reached).
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// BaseURL is addr as a base URL: as it is when it names a scheme, else
// http://addr; no trailing slash.
func BaseURL(addr string) string {
	if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
		return strings.TrimSuffix(addr, "/")
	}
	return "http://" + strings.TrimSuffix(addr, "/")
}

// TenantPath is the admin path of tenant t.
func TenantPath(t string) string { return "/_admin/tenants/" + url.PathEscape(t) }

// Stats reads the node's totals; a node answering it has taken the token.
func (c *AdminClient) Stats(ctx context.Context) (Stats, error) {
	var out Stats
	_, err := c.json(ctx, http.MethodGet, "/_admin/stats", nil, &out, http.StatusOK)
	return out, err
}

// Tenants lists the tenant files on the node's disk.
func (c *AdminClient) Tenants(ctx context.Context) ([]string, error) {
	var out []string
	_, err := c.json(ctx, http.MethodGet, "/_admin/tenants", nil, &out, http.StatusOK)
	return out, err
}

// Sizes reads the bytes on disk of every tenant file.
func (c *AdminClient) Sizes(ctx context.Context) (map[string]int64, error) {
	var out map[string]int64
	_, err := c.json(ctx, http.MethodGet, "/_admin/sizes", nil, &out, http.StatusOK)
	return out, err
}

// Create makes an empty tenant file; one there already is a 409 *Error.
func (c *AdminClient) Create(ctx context.Context, t string) error {
	_, err := c.json(ctx, http.MethodPut, TenantPath(t), nil, nil, http.StatusCreated)
	return err
}

// Delete ends the tenant's streams and removes its file; existed is false
// when the node had none.
func (c *AdminClient) Delete(ctx context.Context, t string) (existed bool, err error) {
	code, err := c.json(ctx, http.MethodDelete, TenantPath(t), nil, nil, http.StatusNoContent, http.StatusNotFound)
	return code == http.StatusNoContent, err
}

// DeleteFrozen is Delete only while the tenant's file is open and frozen
// (DELETE /_admin/tenants/<t>?if=frozen): a file that is not — a new
// copy, a move's install, a file thawed — is kept and the node answers
// 412 (an *Error). existed is false when the node had no file.
func (c *AdminClient) DeleteFrozen(ctx context.Context, t string) (existed bool, err error) {
	code, err := c.json(ctx, http.MethodDelete, TenantPath(t)+"?if=frozen", nil, nil, http.StatusNoContent, http.StatusNotFound)
	return code == http.StatusNoContent, err
}

// IsDamaged says whether err is a node's refusal of a tenant whose file
// is damaged (it fails its checksums or framing and does not open): the
// node's answer says "damaged": true.
func IsDamaged(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	var body struct {
		Damaged bool `json:"damaged"`
	}
	return json.Unmarshal(e.body, &body) == nil && body.Damaged
}

// Freeze has the node refuse the tenant's writes and wait for those in
// flight; Thaw takes them again.
func (c *AdminClient) Freeze(ctx context.Context, t string) (Frozen, error) {
	var out Frozen
	_, err := c.json(ctx, http.MethodPost, TenantPath(t)+"/freeze", nil, &out, http.StatusOK)
	return out, err
}

// Thaw undoes Freeze.
func (c *AdminClient) Thaw(ctx context.Context, t string) (Frozen, error) {
	var out Frozen
	_, err := c.json(ctx, http.MethodPost, TenantPath(t)+"/thaw", nil, &out, http.StatusOK)
	return out, err
}

// Image opens the tenant's whole image as a stream, with its length (-1
// when the node gave none). The caller closes it; ctx bounds reading it.
func (c *AdminClient) Image(ctx context.Context, t string) (io.ReadCloser, int64, error) {
	path := TenantPath(t) + "/file"
	res, err := c.send(ctx, http.MethodGet, path, nil, -1, "")
	if err != nil {
		return nil, 0, err
	}
	if res.StatusCode != http.StatusOK {
		defer res.Body.Close()
		return nil, 0, answerError(http.MethodGet, path, res)
	}
	return res.Body, res.ContentLength, nil
}

// Install puts the image read from r as tenant t (size bytes, or -1 when
// not known). The node replays it whole before it renames it into place;
// a tenant already there is a 409 *Error.
func (c *AdminClient) Install(ctx context.Context, t string, r io.Reader, size int64) error {
	path := TenantPath(t) + "/file"
	res, err := c.send(ctx, http.MethodPut, path, r, size, "application/octet-stream")
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		return answerError(http.MethodPut, path, res)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxErrorAnswer))
	return nil
}

// ID reads the node's id (GET /_admin/node). A node from before ids
// answers 404, which is an *Error.
func (c *AdminClient) ID(ctx context.Context) (string, error) {
	var out Identity
	if _, err := c.json(ctx, http.MethodGet, "/_admin/node", nil, &out, http.StatusOK); err != nil {
		return "", err
	}
	if out.ID == "" {
		return "", fmt.Errorf("GET /_admin/node: the answer names no id")
	}
	return out.ID, nil
}

// RestoreOptions are what a restore asks beside its image: the tenant's
// lineage as the caller knows it (0: the replaced file's), and Force to
// take an image of another lineage.
type RestoreOptions struct {
	Lineage uint64
	Force   bool
}

// Restore has the node take the image read from r in tenant t's place,
// once it has verified it whole beside the live tenant (PUT
// .../file?replace=true), as a new history; a refused image leaves the
// tenant as it was. size is the image's length (-1: unknown). The answer
// says whether a live tenant was replaced (false: the node had none, and
// created it) and where the restored file starts.
func (c *AdminClient) Restore(ctx context.Context, t string, r io.Reader, size int64, o RestoreOptions) (Restored, error) {
	path := TenantPath(t) + "/file?replace=true"
	if o.Lineage != 0 {
		path += "&lineage=" + strconv.FormatUint(o.Lineage, 10)
	}
	if o.Force {
		path += "&force=true"
	}
	var out Restored
	res, err := c.send(ctx, http.MethodPut, path, r, size, "application/octet-stream")
	if err != nil {
		return out, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK && res.StatusCode != http.StatusCreated {
		return out, answerError(http.MethodPut, path, res)
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, maxErrorAnswer)).Decode(&out); err != nil {
		return out, fmt.Errorf("%s %s: decode answer: %w", http.MethodPut, path, err)
	}
	return out, nil
}

// Compact rewrites tenant t's file as an image of what it holds now (POST
// /_admin/tenants/<t>/compact).
func (c *AdminClient) Compact(ctx context.Context, t string) (Compacted, error) {
	var out Compacted
	_, err := c.json(ctx, http.MethodPost, TenantPath(t)+"/compact", nil, &out, http.StatusOK)
	return out, err
}

// Promote has the node's copy of t take writes; a refusal (another
// lineage, a copy that has not heard from the new primary) is a 409
// *Error saying why.
func (c *AdminClient) Promote(ctx context.Context, t string, p Promote) (Promoted, error) {
	var out Promoted
	_, err := c.json(ctx, http.MethodPost, TenantPath(t)+"/promote", p, &out, http.StatusOK)
	return out, err
}

// PromoteMany has the node's copies of many tenants take writes in one
// call (POST /_admin/promote); each tenant's outcome is in the answer, a
// refusal of the whole call (the lease's fence) a 409 *Error.
func (c *AdminClient) PromoteMany(ctx context.Context, p PromoteMany) (PromotedMany, error) {
	var out PromotedMany
	_, err := c.json(ctx, http.MethodPost, "/_admin/promote", p, &out, http.StatusOK)
	return out, err
}

// Follow has the node's file of t follow another node's copy.
func (c *AdminClient) Follow(ctx context.Context, t string, f Follow) (Followed, error) {
	var out Followed
	_, err := c.json(ctx, http.MethodPost, TenantPath(t)+"/follow", f, &out, http.StatusOK)
	return out, err
}

// Replication reads the file's role and position.
func (c *AdminClient) Replication(ctx context.Context, t string) (Replication, error) {
	var out Replication
	_, err := c.json(ctx, http.MethodGet, TenantPath(t)+"/replication", nil, &out, http.StatusOK)
	return out, err
}

// PutQuota sets the tenant's quota and returns it as the node keeps it.
func (c *AdminClient) PutQuota(ctx context.Context, t string, q Quota) (Quota, error) {
	var out Quota
	_, err := c.json(ctx, http.MethodPut, TenantPath(t)+"/quota", q, &out, http.StatusOK)
	return out, err
}

// Quota reads the tenant's quota.
func (c *AdminClient) Quota(ctx context.Context, t string) (Quota, error) {
	var out Quota
	_, err := c.json(ctx, http.MethodGet, TenantPath(t)+"/quota", nil, &out, http.StatusOK)
	return out, err
}

// Usage reads what the tenant holds.
func (c *AdminClient) Usage(ctx context.Context, t string) (Usage, error) {
	var out Usage
	_, err := c.json(ctx, http.MethodGet, TenantPath(t)+"/usage", nil, &out, http.StatusOK)
	return out, err
}

// ErrTooLarge: an answer longer than the caller's bound.
var ErrTooLarge = errors.New("answer larger than the bound")

// Read runs one statement on tenant t only if it reads (POST
// /_admin/tenants/<t>/read) and returns the answer's body, at most limit
// bytes (ErrTooLarge past it), with the seq the read saw (HeaderSeq). A
// refusal of the statement itself is a *StatementRefused.
func (c *AdminClient) Read(ctx context.Context, t string, st Statement, limit int64) ([]byte, uint64, error) {
	path := TenantPath(t) + "/read"
	b, err := json.Marshal(st)
	if err != nil {
		return nil, 0, fmt.Errorf("%s %s: %w", http.MethodPost, path, err)
	}
	res, err := c.send(ctx, http.MethodPost, path, bytes.NewReader(b), int64(len(b)), "application/json")
	if err != nil {
		return nil, 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		e := answerError(http.MethodPost, path, res).(*Error)
		var refused struct {
			StatementRefused bool   `json:"statement_refused"`
			Verb             string `json:"verb"`
		}
		if res.StatusCode == http.StatusBadRequest && json.Unmarshal(e.body, &refused) == nil && refused.StatementRefused {
			return nil, 0, &StatementRefused{Message: e.Message, Verb: refused.Verb}
		}
		return nil, 0, e
	}
	if res.ContentLength > limit {
		return nil, 0, fmt.Errorf("%s %s: %w (%d bytes)", http.MethodPost, path, ErrTooLarge, limit)
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, limit+1))
	switch {
	case err != nil:
		return nil, 0, fmt.Errorf("%s %s: read answer: %w", http.MethodPost, path, err)
	case int64(len(body)) > limit:
		return nil, 0, fmt.Errorf("%s %s: %w (%d bytes)", http.MethodPost, path, ErrTooLarge, limit)
	}
	seq, err := strconv.ParseUint(res.Header.Get(HeaderSeq), 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("%s %s: the answer names no %s", http.MethodPost, path, HeaderSeq)
	}
	return body, seq, nil
}

// json sends one request with body (nil: none) as JSON, and decodes a 2xx
// answer among want into out (nil: read and dropped). It returns the
// status.
func (c *AdminClient) json(ctx context.Context, method, path string, body, out any, want ...int) (int, error) {
	var rd io.Reader
	size := int64(0)
	ctype := ""
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, fmt.Errorf("%s %s: %w", method, path, err)
		}
		rd, size, ctype = bytes.NewReader(b), int64(len(b)), "application/json"
	}
	res, err := c.send(ctx, method, path, rd, size, ctype)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	for _, w := range want {
		if res.StatusCode != w {
			continue
		}
		if out != nil && w/100 == 2 && w != http.StatusNoContent {
			if err := json.NewDecoder(io.LimitReader(res.Body, maxAnswer)).Decode(out); err != nil {
				return w, fmt.Errorf("%s %s: decode answer: %w", method, path, err)
			}
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxErrorAnswer))
		return w, nil
	}
	return res.StatusCode, answerError(method, path, res)
}

// send sends one request with the token and returns the answer, its body
// for the caller to close.
func (c *AdminClient) send(ctx context.Context, method, path string, body io.Reader, size int64, ctype string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, BaseURL(c.Base)+path, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.ContentLength = size
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if c.Node != "" {
		req.Header.Set(HeaderNode, c.Node)
	}
	if c.Prepare != nil {
		c.Prepare(req)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	res, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return res, nil
}

// answerError reads an answer the route does not give on success into an
// *Error with the node's own message.
func answerError(method, path string, res *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorAnswer))
	msg := strings.TrimSpace(string(b))
	var e struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	if json.Unmarshal(b, &e) != nil {
		e.Error, e.Code = "", ""
	}
	if e.Error != "" {
		msg = e.Error
	}
	return &Error{Method: method, Path: path, Status: res.StatusCode, Message: msg, Code: e.Code, body: b}
}
