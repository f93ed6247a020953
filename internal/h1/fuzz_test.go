package h1

import (
	"bufio"
	"bytes"
	"maps"
	"net/http"
	"slices"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// FuzzHead holds the loop's parser to net/http's: every head the loop takes
// is one net/http reads the same way (method, target, path, query, Host,
// every header, length, close) and its server would accept. What the loop
// does not take goes to net/http itself, so it needs no check here.
func FuzzHead(f *testing.F) {
	for _, seed := range []string{
		"GET /t/a/kv?k=eq.1 HTTP/1.1\r\nHost: h\r\n\r\n",
		"POST /t/a/kv HTTP/1.1\r\nHost: h:80\r\nContent-Length: 5\r\nX-A: 1\r\nx-a: 2\r\nConnection: close\r\n\r\nhello",
		"GET /t/a/%41?b=%20 HTTP/1.1\r\nHost: [::1]:9\r\nfenec-wait: 10\r\n\r\n",
		"GET /t/a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n",
		"GET /t/a HTTP/1.1\r\nHost: h\r\nX: \x80\xff\t \r\n\r\n",
		"GET /t/a?? HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n",
		"GET /t/a HTTP/1.1\r\nHost: h\r\nX_Y-z: v\r\n\r\n",
	} {
		f.Add([]byte(seed))
	}
	s := &Server{Prefix: "/t/"}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c := &conn{s: s, hdr: http.Header{}, remote: "192.0.2.1:9"}
		c.tmpl = &http.Request{}
		end, bare := headEnd(raw)
		if bare || end == 0 || end > HeadBytes || !c.parse(raw[:end]) {
			return
		}
		got := &c.req
		want, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			t.Fatalf("the loop took a head net/http refuses (%v):\n%q", err, raw[:end])
		}
		if !httpguts.ValidHostHeader(want.Host) {
			t.Fatalf("the loop took a Host net/http's server refuses: %q", want.Host)
		}
		wantLen := want.ContentLength
		if wantLen < 0 {
			t.Fatalf("net/http reads a body of unknown length where the loop read %d", got.ContentLength)
		}
		switch {
		case got.Method != want.Method, got.RequestURI != want.RequestURI, got.Host != want.Host,
			got.URL.Path != want.URL.Path, got.URL.RawPath != want.URL.RawPath, got.URL.RawQuery != want.URL.RawQuery,
			got.URL.ForceQuery != want.URL.ForceQuery, got.ContentLength != wantLen, got.Close != want.Close,
			got.Proto != want.Proto:
			t.Fatalf("the loop read %q differently:\nloop:     %s %s %s path=%q raw=%q query=%q force=%v len=%d close=%v\nnet/http: %s %s %s path=%q raw=%q query=%q force=%v len=%d close=%v",
				raw[:end], got.Method, got.RequestURI, got.Host, got.URL.Path, got.URL.RawPath, got.URL.RawQuery, got.URL.ForceQuery, got.ContentLength, got.Close,
				want.Method, want.RequestURI, want.Host, want.URL.Path, want.URL.RawPath, want.URL.RawQuery, want.URL.ForceQuery, wantLen, want.Close)
		}
		if !maps.EqualFunc(got.Header, want.Header, slices.Equal) {
			t.Fatalf("the loop read the headers of %q as\n%v\nnet/http as\n%v", raw[:end], got.Header, want.Header)
		}
	})
}
