package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/fenec-go/fenec/internal/tokenfile"
)

// Environment variables the router commands read.
const (
	envRouter    = "FENEC_ROUTER"            // the router's URL
	envToken     = "FENEC_ROUTER_TOKEN"      // its token
	envTokenFile = "FENEC_ROUTER_TOKEN_FILE" // a file holding its token
)

// Output formats of -o.
const (
	outTable = "table"
	outJSON  = "json"
)

// routerOpts are the flags every router command takes.
type routerOpts struct {
	url       string
	tokenFile string
	output    string
	timeout   time.Duration
}

// addRouterFlags registers --router, --token-file, -o and --timeout.
func addRouterFlags(fs *flag.FlagSet, e *env) *routerOpts {
	o := &routerOpts{}
	fs.StringVar(&o.url, "router", e.getenv(envRouter), "the router's `URL` (default $"+envRouter+")")
	fs.StringVar(&o.tokenFile, "token-file", e.getenv(envTokenFile), "read the router's token from the first line of `PATH` (default $"+envTokenFile+", else the token in $"+envToken+")")
	fs.StringVar(&o.output, "o", outTable, "output `FORMAT`: table or json")
	fs.DurationVar(&o.timeout, "timeout", time.Minute, "give up on the router after this long")
	addTLSFlags(fs, e)
	return o
}

// client checks the options and returns a client of the router.
func (o *routerOpts) client(e *env) (*routerClient, error) {
	if o.url == "" {
		return nil, fmt.Errorf("%w: no router: set $%s or --router to the router's URL (http://host:7700)", errUsage, envRouter)
	}
	if o.output != outTable && o.output != outJSON {
		return nil, fmt.Errorf("%w: -o %q: want table or json", errUsage, o.output)
	}
	if o.timeout <= 0 {
		return nil, fmt.Errorf("%w: --timeout must be positive", errUsage)
	}
	tok := e.getenv(envToken)
	if o.tokenFile != "" {
		t, err := tokenfile.Read(o.tokenFile)
		if err != nil {
			return nil, err
		}
		tok = t
	}
	hc, err := e.httpClient()
	if err != nil {
		return nil, err
	}
	return &routerClient{base: nodeURL(o.url), token: tok, timeout: o.timeout, hc: hc, out: e.stdout, json: o.output == outJSON}, nil
}

// routerClient speaks to one router's /_shard/.
type routerClient struct {
	base    string
	token   string
	timeout time.Duration // bounds a call that moves no image
	hc      *http.Client
	out     io.Writer
	json    bool // -o json
}

// close lets the client's connections go.
func (c *routerClient) close() { c.hc.CloseIdleConnections() }

// request builds a request to the router with its token.
func (c *routerClient) request(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, fmt.Errorf("%w: router URL %q: %v", errUsage, c.base, err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// send sends req and returns the answer when its status is one of want;
// any other is a *refusal holding the router's message.
func (c *routerClient) send(req *http.Request, want ...int) (*http.Response, error) {
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, c.unreachable(err)
	}
	for _, w := range want {
		if res.StatusCode == w {
			return res, nil
		}
	}
	defer res.Body.Close()
	return nil, readRefusal(res)
}

// call sends one JSON request (body nil: none) and returns the answer's
// body when its status is one of want (200 and 201 when none is named).
func (c *routerClient) call(ctx context.Context, method, path string, body any, want ...int) ([]byte, error) {
	_, b, err := c.callStatus(ctx, method, path, body, want...)
	return b, err
}

// callStatus is call that also says which of want the answer was.
func (c *routerClient) callStatus(ctx context.Context, method, path string, body any, want ...int) (int, []byte, error) {
	a, err := c.callWith(ctx, method, path, body, nil, want...)
	return a.status, a.body, err
}

// answer is one answer of the router read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// callWith is call with extra request headers (hdr, may be nil), giving
// the answer's status and headers too.
func (c *routerClient) callWith(ctx context.Context, method, path string, body any, hdr http.Header, want ...int) (answer, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return answer{}, err
		}
		r = bytes.NewReader(b)
	}
	req, err := c.request(ctx, method, path, r)
	if err != nil {
		return answer{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	if len(want) == 0 {
		want = []int{http.StatusOK, http.StatusCreated}
	}
	res, err := c.send(req, want...)
	if err != nil {
		return answer{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return answer{}, fmt.Errorf("read the router's answer: %w", err)
	}
	return answer{status: res.StatusCode, header: res.Header, body: b}, nil
}

// unreachable describes a router that could not be reached.
func (c *routerClient) unreachable(err error) error {
	var ne net.Error
	hint := "is it running, and is $" + envRouter + " (or --router) its URL?"
	if errors.As(err, &ne) && ne.Timeout() {
		hint = "it did not answer within --timeout; it may be overloaded or cut off"
	}
	return fmt.Errorf("cannot reach the router at %s: %v: %s", c.base, err, hint)
}

// refusal is an answer the router gave with a status the command did not
// want: its message, and what to do about it.
type refusal struct {
	status     int
	message    string
	leader     string
	retryAfter string
	heldBy     string
	answers    bool // a failover asked only of a node that is down: the node answers
}

func (r *refusal) Error() string {
	msg := fmt.Sprintf("the router refused (%d %s): %s", r.status, http.StatusText(r.status), inVerbs(r.message))
	if h := r.hint(); h != "" {
		msg += "\n  " + h
	}
	return msg
}

// hint says what to do next, where the router's message may not.
func (r *refusal) hint() string {
	switch {
	case r.status == http.StatusUnauthorized:
		return "the router refused the token: put its --token in $" + envToken + ", or in a file named by --token-file or $" + envTokenFile
	case r.leader != "":
		return "changes go to the leading router, " + r.leader + ": point $" + envRouter + " (or --router) at it"
	case r.heldBy != "":
		return "another operation (" + r.heldBy + ") holds the tenant: send it again once that one ends"
	case r.retryAfter != "":
		return "send it again after " + r.retryAfter + " s"
	case r.status == http.StatusNotFound && strings.Contains(r.message, "no such route"):
		return "this router does not serve that route: is $" + envRouter + " a fenec-shard of this version?"
	}
	return ""
}

// readRefusal reads the router's {"error": ...} answer.
func readRefusal(res *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	r := &refusal{status: res.StatusCode, retryAfter: res.Header.Get("Retry-After")}
	var e struct {
		Error   string `json:"error"`
		Leader  string `json:"leader"`
		HeldBy  string `json:"held_by"`
		Answers bool   `json:"answers"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		r.message, r.leader, r.heldBy, r.answers = e.Error, e.Leader, e.HeldBy, e.Answers
	} else {
		r.message = strings.TrimSpace(string(b))
		if r.message == "" {
			r.message = "(no message)"
		}
	}
	return r
}

// printJSON writes b indented, as -o json prints every answer.
func (c *routerClient) printJSON(b []byte) error {
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return fmt.Errorf("the router's answer is not JSON: %w", err)
	}
	out.WriteByte('\n')
	_, err := c.out.Write(out.Bytes())
	return err
}
