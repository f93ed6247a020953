package forward

import (
	"bufio"
	"net/http"
	"strings"
	"testing"

	"github.com/fenec-go/fenec/internal/httptoken"
)

func TestHeadParse(t *testing.T) {
	cases := []struct {
		name, raw, method string
		ok                bool
		status            int
		length            int64
		chunked, close    bool
		noBody, refused   bool
	}{
		{name: "length", raw: "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", ok: true, status: 200, length: 12},
		{name: "no reason", raw: "HTTP/1.1 204\r\n\r\n", ok: true, status: 204, length: -1, noBody: true},
		{name: "head", raw: "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", method: "HEAD", ok: true, status: 200, length: 9, noBody: true},
		{name: "chunked wins", raw: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", ok: true, status: 200, length: -1, chunked: true},
		{name: "close", raw: "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", ok: true, status: 200, length: -1, close: true},
		{name: "1.0 closes", raw: "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", ok: true, status: 200, length: 1, close: true},
		{name: "1.0 keep-alive", raw: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n", ok: true, status: 200, length: 1},
		{name: "refused", raw: "HTTP/1.1 503 Service Unavailable\r\nFenec-Refused: lease\r\nContent-Length: 0\r\n\r\n", ok: true, status: 503, length: 0, refused: true},
		{name: "refused only on 503", raw: "HTTP/1.1 500 x\r\nFenec-Refused: lease\r\nContent-Length: 0\r\n\r\n", ok: true, status: 500, length: 0},
		{name: "interim skipped", raw: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n", ok: true, status: 201, length: 0},
		{name: "lf only", raw: "HTTP/1.1 200 OK\nContent-Length: 2\n\n", ok: true, status: 200, length: 2},
		{name: "two lengths", raw: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n"},
		{name: "bad length", raw: "HTTP/1.1 200 OK\r\nContent-Length: -2\r\n\r\n"},
		{name: "other coding", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"},
		{name: "folded", raw: "HTTP/1.1 200 OK\r\nX-A: 1\r\n  more\r\n\r\n"},
		{name: "bad key", raw: "HTTP/1.1 200 OK\r\nX A: 1\r\n\r\n"},
		{name: "upgrade", raw: "HTTP/1.1 101 Switching\r\n\r\n"},
		{name: "not http", raw: "SSH-2.0-x\r\n\r\n"},
		{name: "cut short", raw: "HTTP/1.1 200 OK\r\nContent-Le"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h head
			method := tc.method
			if method == "" {
				method = "GET"
			}
			err := h.read(bufio.NewReader(strings.NewReader(tc.raw)), method)
			if (err == nil) != tc.ok {
				t.Fatalf("err %v, want ok %v", err, tc.ok)
			}
			if !tc.ok {
				return
			}
			got := []any{h.status, h.length, h.chunked, h.close, h.noBody, h.refused}
			want := []any{tc.status, tc.length, tc.chunked, tc.close, tc.noBody, tc.refused}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("got %v, want %v", got, want)
				}
			}
		})
	}
}

func TestHeadFill(t *testing.T) {
	raw := "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nConnection: X-Hop\r\nX-Hop: 1\r\n" +
		"Keep-Alive: timeout=5\r\nX-Dup: a\r\nX-Dup: b\r\nFenec-Seq: 7\r\nContent-Length: 2\r\n\r\n"
	var h head
	if err := h.read(bufio.NewReader(strings.NewReader(raw)), "GET"); err != nil {
		t.Fatal(err)
	}
	dst := http.Header{"X-Request-Id": {"mw"}, "Fenec-Seq": {"stale"}}
	h.fill(dst)
	want := http.Header{
		"X-Request-Id":   {"mw"},
		"Content-Type":   {"application/json"},
		"X-Dup":          {"a", "b"},
		"Fenec-Seq":      {"7"},
		"Content-Length": {"2"},
	}
	if len(dst) != len(want) {
		t.Fatalf("got %v, want %v", dst, want)
	}
	for k, vs := range want {
		if strings.Join(dst[k], "|") != strings.Join(vs, "|") {
			t.Fatalf("%s: got %q, want %q", k, dst[k], vs)
		}
	}
}

// FuzzHead: any bytes parse or fail without panicking, and a parsed head
// fills a header with canonical keys and no hop-by-hop ones.
func FuzzHead(f *testing.F) {
	f.Add("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	f.Add("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: x-a, close\r\nx-a: 1\r\n\r\n")
	f.Add("HTTP/1.0 103 x\r\nLink: a\r\n\r\nHTTP/1.1 503 y\r\nFenec-Refused: lease\r\n\r\n")
	f.Fuzz(func(t *testing.T, raw string) {
		var h head
		if err := h.read(bufio.NewReader(strings.NewReader(raw)), "GET"); err != nil {
			return
		}
		if h.status < 200 || h.status > 999 {
			t.Fatalf("status %d", h.status)
		}
		dst := http.Header{}
		h.fill(dst)
		for k := range dst {
			if hopByHop(k) || !httptoken.Canonical(k) {
				t.Fatalf("key %q passed", k)
			}
		}
	})
}
