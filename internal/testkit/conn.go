package testkit

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// DialFrom connects to addr from the local address ip (any of 127/8 on
// loopback), a client of its own; closed at cleanup.
func DialFrom(tb testing.TB, ip, addr string) net.Conn {
	tb.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// Ask writes req, a whole HTTP/1.1 request, on c and reads its answer
// through br (c's reader, kept across requests): the status, the body
// read whole.
func Ask(tb testing.TB, c net.Conn, br *bufio.Reader, req string) (int, []byte) {
	tb.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		tb.Fatal(err)
	}
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return res.StatusCode, body
}

// LinesWith is the lines of s holding sub (a metric's series, say).
func LinesWith(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
