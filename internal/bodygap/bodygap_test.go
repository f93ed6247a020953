package bodygap

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// gap is the bound of these tests; a body trickles with pauses a tenth of
// it, and stalls for good.
const gap = 300 * time.Millisecond

// server reads each request's body through Reader (or not at all, for
// path /unread) and answers what it read, or its error.
func server(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Arm(w, r, gap)
		if r.URL.Path == "/unread" {
			io.WriteString(w, "unread")
			return
		}
		b, err := io.ReadAll(Reader(w, r.Body, gap))
		if err != nil {
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusRequestTimeout)
			fmt.Fprintf(w, "%d bytes, then %v (stalled %v)", len(b), err, errors.Is(err, ErrStalled))
			return
		}
		fmt.Fprintf(w, "%d bytes", len(b))
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// send writes a request declaring length bytes of body, then the pieces
// with pause between them, and reads the answer.
func send(t *testing.T, addr, path string, length int, pieces []string, pause time.Duration) (*http.Response, string, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", path, length)
	for _, p := range pieces {
		time.Sleep(pause)
		if _, err := io.WriteString(c, p); err != nil {
			t.Fatal(err)
		}
	}
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("answer: %v", err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, string(b), br
}

// A body that keeps coming is read whole however long it takes in all; one
// that stops is cut after the gap, and its connection closed.
func TestGapNotWhole(t *testing.T) {
	addr := server(t)
	pieces := strings.Split(strings.Repeat("x", 40), "")
	res, body, _ := send(t, addr, "/", 40, pieces, gap/10)
	if res.StatusCode != 200 || body != "40 bytes" {
		t.Fatalf("trickled body: %d %s", res.StatusCode, body)
	}
	res, body, br := send(t, addr, "/", 40, []string{"abc"}, 0)
	if res.StatusCode != http.StatusRequestTimeout || !strings.Contains(body, "3 bytes") || !strings.Contains(body, "stalled true") {
		t.Fatalf("stalled body: %d %s", res.StatusCode, body)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("connection after a stalled body: %v", err)
	}
}

// A body no handler reads is cut too: the server reads what is left of a
// small one before answering, bounded by Arm's deadline.
func TestArmBoundsAnUnreadBody(t *testing.T) {
	addr := server(t)
	res, body, br := send(t, addr, "/unread", 40, []string{"abc"}, 0)
	if res.StatusCode != 200 || body != "unread" {
		t.Fatalf("unread body: %d %s", res.StatusCode, body)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("connection after an unread stalled body: %v", err)
	}
}

// Once a body has ended its connection takes no deadline: a handler that
// takes longer than the gap after reading it is not cut off, and the
// connection is kept for the next request.
func TestDeadlineClearedAtTheEnd(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Arm(w, r, gap)
		b, err := io.ReadAll(Reader(w, r.Body, gap))
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		select {
		case <-time.After(3 * gap):
		case <-r.Context().Done():
			http.Error(w, "context ended", 500)
			return
		}
		fmt.Fprintf(w, "%d bytes", len(b))
	}))
	t.Cleanup(srv.Close)
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	for i := range 2 {
		res, err := hc.Post(srv.URL, "text/plain", strings.NewReader("hello"))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || string(b) != "5 bytes" {
			t.Fatalf("request %d: %d %s", i, res.StatusCode, b)
		}
	}
}
