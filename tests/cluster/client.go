package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// RequestWait bounds one request of Client: a bound on a hang, not a
// measure of speed.
const RequestWait = 60 * time.Second

// Client speaks the data API and /_shard/ to one base URL with one bearer
// token, over its own keep-alive connections closed at cleanup.
type Client struct {
	tb    testing.TB
	base  string
	token string
	hc    *http.Client
}

// NewClient returns a client of base ("http://host:port"); token may be "".
func NewClient(tb testing.TB, base, token string) *Client {
	tb.Helper()
	return NewClientFrom(tb, base, token, "")
}

// NewClientFrom is NewClient whose connections leave from the local
// address ip (another loopback address, such as 127.0.0.2, makes a
// client a server tells apart from the others); "" is the system's choice.
func NewClientFrom(tb testing.TB, base, token, ip string) *Client {
	tb.Helper()
	d := &net.Dialer{}
	if ip != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(ip)}
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16, DialContext: d.DialContext}}
	tb.Cleanup(hc.CloseIdleConnections)
	return &Client{tb: tb, base: base, token: token, hc: hc}
}

// Base is the client's base URL.
func (c *Client) Base() string { return c.base }

// Resp is an answer read whole.
type Resp struct {
	Status int
	Header http.Header
	Body   []byte
	Err    error // the transport's error; Status is 0 then
}

// JSON decodes the body, failing tb if it is not JSON.
func (r *Resp) JSON(tb testing.TB) any {
	tb.Helper()
	var v any
	d := json.NewDecoder(bytes.NewReader(r.Body))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		tb.Fatalf("answer %d is not JSON: %v: %q", r.Status, err, r.Body)
	}
	return v
}

// Rows decodes a JSON array of objects.
func (r *Resp) Rows(tb testing.TB) []map[string]any {
	tb.Helper()
	var rows []map[string]any
	if err := json.Unmarshal(r.Body, &rows); err != nil {
		tb.Fatalf("answer %d is not rows: %v: %q", r.Status, err, r.Body)
	}
	return rows
}

func (r *Resp) String() string {
	if r.Err != nil {
		return "error: " + r.Err.Error()
	}
	return fmt.Sprintf("%d %s", r.Status, bytes.TrimSpace(r.Body))
}

// Do sends one request; body is a string or []byte sent as it is, or any
// other value sent as JSON; hdr are extra header pairs. A transport error
// is returned in Resp.Err, not failed on.
func (c *Client) Do(method, path string, body any, hdr ...string) *Resp {
	c.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), RequestWait)
	defer cancel()
	return c.DoCtx(ctx, method, path, body, hdr...)
}

// DoCtx is Do bounded by ctx.
func (c *Client) DoCtx(ctx context.Context, method, path string, body any, hdr ...string) *Resp {
	c.tb.Helper()
	req, err := c.request(ctx, method, path, body, hdr)
	if err != nil {
		c.tb.Fatalf("%s %s: %v", method, path, err)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return &Resp{Err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return &Resp{Status: res.StatusCode, Header: res.Header, Body: b, Err: err}
}

func (c *Client) request(ctx context.Context, method, path string, body any, hdr []string) (*http.Request, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return req, nil
}

// Query runs one statement on tenant (POST /t/<tenant>/query).
func (c *Client) Query(tenant, query string, params ...any) *Resp {
	c.tb.Helper()
	body := map[string]any{"query": query}
	if len(params) > 0 {
		body["params"] = params
	}
	return c.Do("POST", "/t/"+tenant+"/query", body)
}

// QueryH runs one statement on tenant with headers hdr (name, value,
// ...).
func (c *Client) QueryH(tenant, query string, hdr ...string) *Resp {
	c.tb.Helper()
	return c.Do("POST", "/t/"+tenant+"/query", map[string]any{"query": query}, hdr...)
}

// MustQuery is Query failing the test unless the answer is 2xx.
func (c *Client) MustQuery(tenant, query string, params ...any) *Resp {
	c.tb.Helper()
	r := c.Query(tenant, query, params...)
	if r.Err != nil || r.Status/100 != 2 {
		c.tb.Fatalf("query %q on %s: %s", query, tenant, r)
	}
	return r
}

// Stream is an open server-sent event stream.
type Stream struct {
	res    *http.Response
	rd     *bufio.Reader
	cancel context.CancelFunc
}

// Event is one server-sent event.
type Event struct {
	Name string
	Data string
}

// Subscribe opens GET path as an event stream and returns it once its
// headers arrived; the stream is closed at cleanup if not before.
func (c *Client) Subscribe(path string) (*Stream, *Resp) {
	c.tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := c.request(ctx, "GET", path, nil, []string{"Accept", "text/event-stream"})
	if err != nil {
		cancel()
		c.tb.Fatalf("subscribe %s: %v", path, err)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		cancel()
		return nil, &Resp{Err: err}
	}
	if res.StatusCode != http.StatusOK {
		defer cancel()
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return nil, &Resp{Status: res.StatusCode, Header: res.Header, Body: b}
	}
	s := &Stream{res: res, rd: bufio.NewReader(res.Body), cancel: cancel}
	c.tb.Cleanup(s.Close)
	return s, &Resp{Status: res.StatusCode, Header: res.Header}
}

// Header is the stream's answer header.
func (s *Stream) Header() http.Header { return s.res.Header }

// Next reads the next event, skipping comments (keep-alives). It blocks
// until one arrives or the stream ends.
func (s *Stream) Next() (Event, error) {
	var ev Event
	var data []string
	for {
		line, err := s.rd.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if ev.Name != "" || len(data) > 0 {
				ev.Data = strings.Join(data, "\n")
				return ev, nil
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			ev.Name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
}

// Close ends the stream. Safe to call twice.
func (s *Stream) Close() {
	s.cancel()
	s.res.Body.Close()
}
