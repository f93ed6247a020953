package forward

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
)

// benchNode answers a small JSON read with a length, like a node's point
// read.
func benchNode(b *testing.B) *httptest.Server {
	b.Helper()
	ans := []byte(`[{"_id": 1, "name": "ada", "total": 12.5}]` + "\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = []string{"application/json"}
		w.Header()["Content-Length"] = []string{"43"}
		_, _ = w.Write(ans)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// runLatency sends b.N GETs on one keep-alive client after a warm-up and
// reports the median and 99th percentile besides the mean.
func runLatency(b *testing.B, target string) {
	b.Helper()
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
	b.Cleanup(c.CloseIdleConnections)
	get := func() {
		resp, err := c.Get(target)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	for range 500 {
		get()
	}
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		get()
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
}

// BenchmarkDirect is the baseline: the client straight to the node.
func BenchmarkDirect(b *testing.B) {
	node := benchNode(b)
	runLatency(b, node.URL+"/t/acme/orders?_id=eq.1")
}

// BenchmarkForward is the same request through the router; the difference
// from BenchmarkDirect is what the router adds.
func BenchmarkForward(b *testing.B) {
	node := benchNode(b)
	place := newPlacements(map[string]Target{"acme": {Node: "n1", Addr: node.URL}})
	r := newRouter(b, place, fwdOpts{})
	runLatency(b, r.url+"/t/acme/orders?_id=eq.1")
}

// discardWriter is the least a ResponseWriter can be.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}

// BenchmarkForwardHandler counts what the forwarder itself allocates per
// request (the node and the client's server are outside the count's
// reason, though the node's own allocations land in it too).
func BenchmarkForwardHandler(b *testing.B) {
	node := benchNode(b)
	place := newPlacements(map[string]Target{"acme": {Node: "n1", Addr: node.URL}})
	f, err := New(DefaultConfig(), place, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = f.Close() })
	u, _ := url.Parse("/t/acme/orders?_id=eq.1")
	req := &http.Request{
		Method: "GET", URL: u, RequestURI: u.String(), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Accept": {"application/json"}}, Host: "router", RemoteAddr: "127.0.0.1:5555",
		Body: http.NoBody,
	}
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		f.ServeHTTP(w, req)
	}
	if !strings.Contains(w.h.Get("Content-Type"), "json") {
		b.Fatalf("answer headers %v", w.h)
	}
}

// BenchmarkNginx is the same request through nginx as a plain keep-alive
// reverse proxy, the bar the router is held to. It is skipped where nginx
// is not installed.
func BenchmarkNginx(b *testing.B) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		b.Skip("nginx not installed")
	}
	node := benchNode(b)
	dir := b.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	conf := fmt.Sprintf(`worker_processes 1;
daemon off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  upstream node { server %[2]s; keepalive 16; }
  server {
    listen %[3]s;
    location / {
      proxy_pass http://node;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
`, dir, node.Listener.Addr().String(), addr)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	testkit.Eventually(b, 10*time.Second, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	})
	runLatency(b, "http://"+addr+"/t/acme/orders?_id=eq.1")
}
