package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/fenec-go/fenec/internal/tokenfile"
	"github.com/fenec-go/fenec/wire"
)

// setupRegister is `fenec register`: it records a node with a router (PUT
// /_shard/nodes/<name>), asking again until the router and the node answer
// or --wait passes: a deploy starts it beside them.
func setupRegister(fs *flag.FlagSet, e *env) runFunc {
	name := fs.String("name", "", "the node's `NAME` ([a-z0-9_-]{1,64})")
	addr := fs.String("addr", "", "the node's `URL` as the router reaches it")
	region := fs.String("region", "", "the node's `REGION` (default: the router's)")
	adminToken := fs.String("admin-token", e.getenv("FENEC_ADMIN_TOKEN"), "the node's admin `TOKEN` (default $FENEC_ADMIN_TOKEN)")
	tokenfile.Flag(fs, "admin-token", adminToken, "the node's admin token")
	token := fs.String("token", e.getenv(envToken), "the router's `TOKEN` (default $"+envToken+")")
	tokenfile.Flag(fs, "token", token, "the router's token")
	addTLSFlags(fs, e)
	wait := fs.Duration("wait", time.Minute, "keep asking this long while the router or the node does not answer (a refusal asking again cannot change ends it at once)")
	return func(ctx context.Context, pos []string) error {
		return register(ctx, e, pos, *name, *addr, *region, *adminToken, *token, *wait)
	}
}

// register records the node, asking again until wait passes.
func register(ctx context.Context, e *env, pos []string, name, addr, region, adminToken, token string, wait time.Duration) error {
	stdout, stderr := e.stdout, e.stderr
	switch {
	case len(pos) != 1:
		return fmt.Errorf("%w: want one ROUTER_URL, got %d arguments", errUsage, len(pos))
	case !wire.ValidName(name):
		return fmt.Errorf("%w: --name must be [a-z0-9_-]{1,64}", errUsage)
	case addr == "" || adminToken == "":
		return fmt.Errorf("%w: --addr and --admin-token (or --admin-token-file) are required", errUsage)
	}
	body, _ := json.Marshal(map[string]string{"addr": addr, "token": adminToken, "region": region})
	url := nodeURL(pos[0]) + "/_shard/nodes/" + name
	hc, err := e.httpClient()
	if err != nil {
		return err
	}
	hc.Timeout = callTimeout
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(wait)
	for {
		err := putNode(ctx, hc, url, token, body)
		if err == nil {
			fmt.Fprintf(stdout, "node %s recorded at %s\n", name, addr)
			return nil
		}
		var perm *permanentError
		if errors.As(err, &perm) || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		fmt.Fprintf(stderr, "fenec register: %v; asking again\n", err)
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// permanentError is a refusal asking again cannot change: the request
// itself is wrong (a bad name or body, a wrong router token, the node
// recorded under another name).
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// putNode asks the router once. A refusal that may pass when asked again
// is a plain error: the router or the node not answering yet (a connection
// refused, 502, 503, 504), too many requests (429), a router that does not
// lead (409 naming the leader, while a leader is chosen); any other
// refusal is a *permanentError.
func putNode(ctx context.Context, hc *http.Client, url, token string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, "PUT", url, bytes.NewReader(body))
	if err != nil {
		return &permanentError{err}
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	if res.StatusCode == http.StatusCreated {
		return nil
	}
	err = fmt.Errorf("PUT %s: %s: %s", url, res.Status, bytes.TrimSpace(b))
	switch res.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return err
	case http.StatusConflict:
		var e struct {
			Leader *string `json:"leader"`
		}
		if json.Unmarshal(b, &e) == nil && e.Leader != nil {
			return err // a router that does not lead: the lead may settle
		}
	}
	return &permanentError{err}
}
