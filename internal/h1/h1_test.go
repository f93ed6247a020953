package h1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// served names the server that answered: the loop or the fallback.
func served(w http.ResponseWriter) string {
	if _, ok := w.(*response); ok {
		return "loop"
	}
	return "fallback"
}

// echo answers with who served, the method, the target, the Host, the
// body and the headers the test asks about.
func echo(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Via", served(w))
	fmt.Fprintf(w, "%s %s host=%s body=%q x=%q path=%s query=%s", r.Method, r.RequestURI, r.Host, b, r.Header["X-A"], r.URL.Path, r.URL.RawQuery)
}

// start serves h on loopback through a Server whose fallback serves h too;
// it is shut down at cleanup.
func start(t *testing.T, h http.HandlerFunc, tune func(*Server)) (*Server, string) {
	t.Helper()
	return startOn(t, h, tune, nil)
}

// startOn is start over the loopback listener as wrap makes it (nil: as
// it is), a TLS listener say.
func startOn(t *testing.T, h http.HandlerFunc, tune func(*Server), wrap func(net.Listener) net.Listener) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if wrap != nil {
		ln = wrap(ln)
	}
	s := &Server{Handler: h, Fallback: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}, Prefix: "/t/"}
	if tune != nil {
		tune(s)
	}
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve returned %v", err)
		}
	})
	return s, addr
}

// plain serves h with net/http alone, to compare answers with.
func plain(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return c, bufio.NewReader(c)
}

// answer reads one answer whole; method is the request's.
func answer(t *testing.T, br *bufio.Reader, method string) (*http.Response, string) {
	t.Helper()
	res, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read answer's body: %v", err)
	}
	return res, string(b)
}

func TestPipelinedOnOneConnection(t *testing.T) {
	_, addr := start(t, echo, nil)
	c, br := dial(t, addr)
	reqs := "GET /t/a/kv?k=eq.1 HTTP/1.1\r\nHost: h\r\nX-A: 1\r\nx-a: 2\r\n\r\n" +
		"POST /t/a/kv HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello" +
		"HEAD /t/a/kv HTTP/1.1\r\nHost: h\r\n\r\n" +
		"GET /t/a/x HTTP/1.1\r\nHost: h\r\n\r\n"
	if _, err := io.WriteString(c, reqs); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`GET /t/a/kv?k=eq.1 host=h body="" x=["1" "2"] path=/t/a/kv query=k=eq.1`,
		`POST /t/a/kv host=h body="hello" x=[] path=/t/a/kv query=`,
		``,
		`GET /t/a/x host=h body="" x=[] path=/t/a/x query=`,
	}
	methods := []string{"GET", "POST", "HEAD", "GET"}
	for i, w := range want {
		res, body := answer(t, br, methods[i])
		if res.StatusCode != 200 || body != w || res.Header.Get("Via") != "loop" {
			t.Fatalf("answer %d: %d %q via %q, want 200 %q via the loop", i, res.StatusCode, body, res.Header.Get("Via"), w)
		}
		if res.Header.Get("Date") == "" || methods[i] != "HEAD" && res.ContentLength != int64(len(w)) {
			t.Fatalf("answer %d: Date %q, length %d", i, res.Header.Get("Date"), res.ContentLength)
		}
	}
}

// Every request the loop does not take strictly is answered as net/http
// alone answers it: the connection went to the fallback whole.
func TestOddRequestsAnsweredAsNetHTTP(t *testing.T) {
	_, loopAddr := start(t, echo, nil)
	plainAddr := plain(t, echo)
	cases := []struct{ name, raw string }{
		{"chunked body", "POST /t/a/kv HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
		{"length and chunked", "POST /t/a/kv HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
		{"two lengths", "POST /t/a/kv HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"},
		{"same length twice", "POST /t/a/kv HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello"},
		{"signed length", "POST /t/a/kv HTTP/1.1\r\nHost: h\r\nContent-Length: +5\r\n\r\nhello"},
		{"bare LF", "GET /t/a/kv HTTP/1.1\nHost: h\n\n"},
		{"no host", "GET /t/a/kv HTTP/1.1\r\n\r\n"},
		{"two hosts", "GET /t/a/kv HTTP/1.1\r\nHost: h\r\nHost: i\r\n\r\n"},
		{"bad host", "GET /t/a/kv HTTP/1.1\r\nHost: h/i\r\n\r\n"},
		{"space before colon", "GET /t/a/kv HTTP/1.1\r\nHost: h\r\nX-A : 1\r\n\r\n"},
		{"folded line", "GET /t/a/kv HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n 2\r\n\r\n"},
		{"NUL in a value", "GET /t/a/kv HTTP/1.1\r\nHost: h\r\nX-A: 1\x002\r\n\r\n"},
		{"HTTP/1.0", "GET /t/a/kv HTTP/1.0\r\nHost: h\r\n\r\n"},
		{"lower-case version", "GET /t/a/kv http/1.1\r\nHost: h\r\n\r\n"},
		{"two spaces", "GET  /t/a/kv HTTP/1.1\r\nHost: h\r\n\r\n"},
		{"absolute form", "GET http://h/t/a/kv HTTP/1.1\r\nHost: h\r\n\r\n"},
		{"other route", "GET /_shard/nodes HTTP/1.1\r\nHost: h\r\n\r\n"},
		{"escaped target", "GET /t/a/%6Bv?x=%20 HTTP/1.1\r\nHost: h\r\n\r\n"},
		{"bad escape", "GET /t/a/%zz HTTP/1.1\r\nHost: h\r\n\r\n"},
		{"expect continue", "POST /t/a/kv HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello"},
		{"long head", "GET /t/a/kv HTTP/1.1\r\nHost: h\r\nX-A: " + strings.Repeat("a", HeadBytes) + "\r\n\r\n"},
		{"upgrade", "GET /t/a/kv HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := exchangeRaw(t, loopAddr, tc.raw)
			want := exchangeRaw(t, plainAddr, tc.raw)
			if got != want {
				t.Fatalf("through the loop:\n%s\nnet/http alone:\n%s", got, want)
			}
		})
	}
}

// exchangeRaw sends raw, then reads every answer until the server closes
// or goes quiet, and describes them without their Date.
func exchangeRaw(t *testing.T, addr, raw string) string {
	t.Helper()
	c, br := dial(t, addr)
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	var out []string
	for {
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			return strings.Join(out, "\n") + "\nthen: " + endOf(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Header.Del("Date")
		res.Header.Del("Via")
		out = append(out, fmt.Sprintf("%d %v %q", res.StatusCode, res.Header, b))
	}
}

func endOf(err error) string {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "open"
	}
	return "closed"
}

func TestAnswerFraming(t *testing.T) {
	release := make(chan struct{})
	h := func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/t/small":
			io.WriteString(w, "small answer")
		case "/t/big":
			io.WriteString(w, strings.Repeat("b", 3*bufferBody))
		case "/t/stream":
			io.WriteString(w, "first")
			w.(http.Flusher).Flush()
			<-release
			io.WriteString(w, "second")
		case "/t/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/t/short":
			w.Header().Set("Content-Length", "10")
			io.WriteString(w, "12345")
		case "/t/panic":
			io.WriteString(w, "half")
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		case "/t/close":
			w.Header().Set("Connection", "close")
			io.WriteString(w, "bye")
		}
	}
	_, addr := start(t, h, nil)
	c, br := dial(t, addr)
	get := func(path string) {
		t.Helper()
		if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: h\r\n\r\n", path); err != nil {
			t.Fatal(err)
		}
	}
	get("/t/small")
	if res, body := answer(t, br, "GET"); res.ContentLength != 12 || body != "small answer" || res.Header.Get("Content-Type") == "" {
		t.Fatalf("small: length %d %q type %q", res.ContentLength, body, res.Header.Get("Content-Type"))
	}
	get("/t/big")
	if res, body := answer(t, br, "GET"); len(res.TransferEncoding) != 1 || len(body) != 3*bufferBody {
		t.Fatalf("big: encoding %v, %d bytes", res.TransferEncoding, len(body))
	}
	get("/t/stream")
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, 5)
	if _, err := io.ReadFull(res.Body, first); err != nil || string(first) != "first" {
		t.Fatalf("stream: %q before the handler ended: %v", first, err)
	}
	close(release)
	if rest, err := io.ReadAll(res.Body); err != nil || string(rest) != "second" {
		t.Fatalf("stream: then %q: %v", rest, err)
	}
	get("/t/empty")
	if res, body := answer(t, br, "GET"); res.StatusCode != 204 || body != "" {
		t.Fatalf("empty: %d %q", res.StatusCode, body)
	}
	get("/t/close")
	if res, body := answer(t, br, "GET"); !res.Close || body != "bye" {
		t.Fatalf("close: close %v %q", res.Close, body)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after Connection: close the connection is still open: %v", err)
	}
	// An answer short of its length, or cut by a panic, ends the connection
	// so that it never looks whole.
	for _, path := range []string{"/t/short", "/t/panic"} {
		c, br := dial(t, addr)
		if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: h\r\n\r\n", path); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if _, err := io.ReadAll(res.Body); err == nil {
			t.Fatalf("%s: the answer read as whole", path)
		}
	}
}

// A client that hangs up while its request runs ends the request's
// context; a request sent behind a running one does not.
func TestHangup(t *testing.T) {
	ended := make(chan error, 4)
	h := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			ended <- r.Context().Err()
		case <-time.After(time.Duration(len(r.URL.RawQuery)) * 100 * time.Millisecond):
			ended <- nil
			io.WriteString(w, "done")
		}
	}
	_, addr := start(t, h, nil)
	c, br := dial(t, addr)
	// Two requests at once: the first runs 200 ms, the watch finds the
	// second's bytes and must leave them for the loop.
	if _, err := io.WriteString(c, "GET /t/a?xx HTTP/1.1\r\nHost: h\r\n\r\nGET /t/a?x HTTP/1.1\r\nHost: h\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := <-ended; err != nil {
			t.Fatalf("request %d: its context ended: %v", i, err)
		}
		if res, body := answer(t, br, "GET"); res.StatusCode != 200 || body != "done" {
			t.Fatalf("request %d: %d %q", i, res.StatusCode, body)
		}
	}
	// A request of 100 s whose client leaves.
	if _, err := io.WriteString(c, "GET /t/a?"+strings.Repeat("x", 1000)+" HTTP/1.1\r\nHost: h\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	c.Close()
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the hung-up request ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the request of a client that hung up still runs")
	}
}

func TestBodies(t *testing.T) {
	h := func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/t/read" {
			b, err := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%d %v", len(b), err)
			return
		}
		io.WriteString(w, "unread")
	}
	_, addr := start(t, h, nil)
	c, br := dial(t, addr)
	body := strings.Repeat("z", 100<<10)
	// A body read, then one left unread but small: the connection is kept.
	fmt.Fprintf(c, "POST /t/read HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	if res, got := answer(t, br, "POST"); got != fmt.Sprintf("%d <nil>", len(body)) || res.Close {
		t.Fatalf("read body: %q close %v", got, res.Close)
	}
	fmt.Fprintf(c, "POST /t/unread HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	if _, got := answer(t, br, "POST"); got != "unread" {
		t.Fatalf("unread body: %q", got)
	}
	fmt.Fprintf(c, "GET /t/read HTTP/1.1\r\nHost: h\r\n\r\n")
	if _, got := answer(t, br, "GET"); got != "0 <nil>" {
		t.Fatalf("after an unread body: %q", got)
	}
	// A large body left unread: answered, then the connection closes
	// rather than read a megabyte nobody wants.
	c2, br2 := dial(t, addr)
	fmt.Fprintf(c2, "POST /t/unread HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n", 1<<20)
	if _, got := answer(t, br2, "POST"); got != "unread" {
		t.Fatalf("large unread body: %q", got)
	}
	if _, err := br2.ReadByte(); err != io.EOF {
		t.Fatalf("the connection with a megabyte unread is still open: %v", err)
	}
}

// A head that stops arriving is dropped after the header timeout; an idle
// connection after the idle timeout.
func TestTimeouts(t *testing.T) {
	_, addr := start(t, echo, func(s *Server) {
		s.ReadHeaderTimeout, s.IdleTimeout = 200*time.Millisecond, 400*time.Millisecond
	})
	c, br := dial(t, addr)
	io.WriteString(c, "GET /t/a HTTP/1.1\r\nHost:")
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("a head cut short: %v, want the connection closed", err)
	}
	c2, br2 := dial(t, addr)
	if _, err := br2.ReadByte(); err != io.EOF {
		t.Fatalf("an idle connection: %v, want it closed", err)
	}
	_ = c2
}

// Shutdown closes idle connections at once and lets a running request
// finish, its answer saying the connection closes.
func TestShutdown(t *testing.T) {
	running := make(chan struct{})
	finish := make(chan struct{})
	h := func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/t/slow" {
			close(running)
			<-finish
		}
		io.WriteString(w, "ok")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Handler: http.HandlerFunc(h), Fallback: &http.Server{Handler: http.HandlerFunc(h)}, Prefix: "/t/"}
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ln) }()
	addr := ln.Addr().String()
	idle, idleBR := dial(t, addr)
	io.WriteString(idle, "GET /t/a HTTP/1.1\r\nHost: h\r\n\r\n")
	answer(t, idleBR, "GET")
	busy, busyBR := dial(t, addr)
	io.WriteString(busy, "GET /t/slow HTTP/1.1\r\nHost: h\r\n\r\n")
	<-running
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	if _, err := idleBR.ReadByte(); err != io.EOF {
		t.Fatalf("idle connection at shutdown: %v", err)
	}
	close(finish)
	res, body := answer(t, busyBR, "GET")
	if body != "ok" || !res.Close {
		t.Fatalf("running request at shutdown: %q close %v", body, res.Close)
	}
	if err := <-shut; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("serve: %v", err)
	}
	if _, err := net.Dial("tcp", addr); err == nil {
		t.Fatal("the listener still accepts")
	}
}

// Many clients at once, each with requests in turn, all answered by the
// loop in order (run under -race).
func TestConcurrentClients(t *testing.T) {
	_, addr := start(t, echo, nil)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			br := bufio.NewReader(c)
			for j := range 50 {
				fmt.Fprintf(c, "POST /t/c%d/kv HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\n%03d", i, j)
				res, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(res.Body)
				if want := fmt.Sprintf(`body="%03d"`, j); !strings.Contains(string(b), want) || res.Header.Get("Via") != "loop" {
					t.Errorf("client %d request %d: %q", i, j, b)
					return
				}
			}
		})
	}
	wg.Wait()
}

// A request that runs past the idle timeout is no hang-up: the idle
// deadline passing under the watch does not end it.
func TestLongRequestPastIdle(t *testing.T) {
	ended := make(chan error, 1)
	h := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			ended <- r.Context().Err()
		case <-time.After(time.Second):
			ended <- nil
			io.WriteString(w, "done")
		}
	}
	_, addr := start(t, h, func(s *Server) { s.IdleTimeout = 300 * time.Millisecond })
	c, br := dial(t, addr)
	for range 2 { // the second on a connection whose deadline was set before
		io.WriteString(c, "GET /t/long HTTP/1.1\r\nHost: h\r\n\r\n")
		if err := <-ended; err != nil {
			t.Fatalf("a request longer than the idle timeout was ended: %v", err)
		}
		if _, body := answer(t, br, "GET"); body != "done" {
			t.Fatalf("answer %q", body)
		}
	}
}

// A body already in the buffer says so (package bodygap then sets no
// deadline for it); one still to come does not.
func TestBodyArrived(t *testing.T) {
	h := func(w http.ResponseWriter, r *http.Request) {
		a, ok := r.Body.(interface{ Arrived() bool })
		arrived := ok && a.Arrived()
		b, err := io.ReadAll(r.Body)
		fmt.Fprintf(w, "arrived=%v %q %v", arrived, b, err)
	}
	_, addr := start(t, h, nil)
	c, br := dial(t, addr)
	io.WriteString(c, "POST /t/a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello")
	if _, got := answer(t, br, "POST"); got != `arrived=true "hello" <nil>` {
		t.Fatalf("whole: %s", got)
	}
	io.WriteString(c, "POST /t/a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhe")
	time.Sleep(100 * time.Millisecond)
	io.WriteString(c, "llo")
	if _, got := answer(t, br, "POST"); got != `arrived=false "hello" <nil>` {
		t.Fatalf("in two pieces: %s", got)
	}
}

// longAnswer writes pieces of 32 KB, a stream's way (flushed each time),
// and reports how its writing ended on done.
func longAnswer(pieces int, done chan<- error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		piece := bytes.Repeat([]byte("s"), 32<<10)
		var err error
		for i := 0; i < pieces && err == nil; i++ {
			if _, err = w.Write(piece); err == nil {
				err = http.NewResponseController(w).Flush()
			}
		}
		done <- err
	}
}

// A client that stops reading is cut once a write waited the gap, on the
// loop's connections and on one handed over to the fallback (a target
// outside the loop's prefix); the handler's write fails and it lets go of
// what it holds.
func TestWriteGapCutsAStalledClient(t *testing.T) {
	for _, target := range []string{"/t/long", "/elsewhere"} {
		t.Run(strings.TrimPrefix(target, "/"), func(t *testing.T) {
			done := make(chan error, 1)
			_, addr := start(t, longAnswer(512, done), func(s *Server) { s.WriteGap = 300 * time.Millisecond })
			c, _ := dial(t, addr)
			_ = c.(*net.TCPConn).SetReadBuffer(1024)
			io.WriteString(c, "GET "+target+" HTTP/1.1\r\nHost: x\r\n\r\n")
			select {
			case err := <-done:
				var ne net.Error
				if !errors.As(err, &ne) || !ne.Timeout() {
					t.Fatalf("the stalled answer ended with %v, want a write timeout", err)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("a handler still writes to a client that read nothing for 15 s, with a gap of 300 ms")
			}
		})
	}
}

// smallSendBuffers gives each accepted connection a send buffer of 64 KB:
// a write then waits on the client no longer than the client's own pauses
// (with the megabytes loopback grows a buffer to, the kernel wakes a
// writer only once a third of it drained, however steadily).
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(64 << 10)
	}
	return c, err
}

// A client that reads slowly but steadily is never cut, however long its
// answer takes; and the connection serves its next request after an idle
// longer than the gap (the deadline is moved on before each write).
func TestWriteGapSparesASteadyReader(t *testing.T) {
	// The reader pauses a tenth of the gap: room for a loaded machine's
	// scheduling, never enough to look stalled.
	const gap = time.Second
	done := make(chan error, 1)
	_, addr := startOn(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/t/short" {
			io.WriteString(w, "short")
			return
		}
		longAnswer(32, done)(w, r) // 1 MB
	}, func(s *Server) { s.WriteGap = gap }, func(l net.Listener) net.Listener { return smallSendBuffers{l} })
	c, br := dial(t, addr)
	_ = c.(*net.TCPConn).SetReadBuffer(64 << 10)
	io.WriteString(c, "GET /t/long HTTP/1.1\r\nHost: x\r\n\r\n")
	res, err := http.ReadResponse(br, &http.Request{Method: "GET"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	buf := make([]byte, 32<<10)
	var got int
	for {
		k, err := io.ReadFull(res.Body, buf)
		got += k
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			t.Fatalf("cut after %d bytes: %v", got, err)
		}
		time.Sleep(gap / 10) // 32 KB each tenth of the gap: 1 MB over three gaps
	}
	if err := <-done; err != nil || got != 1<<20 {
		t.Fatalf("a steady reader got %d bytes in %v; the handler's writes ended with %v", got, time.Since(start), err)
	}
	if took := time.Since(start); took < 3*gap {
		t.Fatalf("the steady read took %v: no longer than the gap it tests", took)
	}
	time.Sleep(2 * gap)
	io.WriteString(c, "GET /t/short HTTP/1.1\r\nHost: x\r\n\r\n")
	if res, body := answer(t, br, "GET"); res.StatusCode != 200 || body != "short" {
		t.Fatalf("the next request after an idle: %d %q", res.StatusCode, body)
	}
}
