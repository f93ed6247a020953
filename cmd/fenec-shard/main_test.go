package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fenec-go/fenec/global"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// Members of a two-member etcd cluster talk over net/http, whose
		// connections between stopped members close on their own schedule
		// (as the global package's tests note); the router's own server
		// and clients are closed before run returns.
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
		goleak.IgnoreAnyFunction("net/http.(*connReader).backgroundRead"),
	)
}

// syncBuffer is a bytes.Buffer safe to write from the router's logger
// while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestBadFlagsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"--no-such-flag"},
		{"--listen", "0.0.0.0:7700"}, // no token, not --insecure
		{"--listen", "127.0.0.1:7700", "--id", "Not A Name"},
		{"--upstream-timeout", "x"},
		{"stray"},
		{"--pprof", "0.0.0.0:6060"}, // profiles never off loopback
		{"--pprof", ":6060"},
	} {
		var out syncBuffer
		if code := run(context.Background(), args, &out, &out); code != 2 {
			t.Fatalf("%v: exit %d, want 2 (%s)", args, code, out.String())
		}
	}
	var out syncBuffer
	if code := run(context.Background(), []string{"-h"}, &out, &out); code != 0 || !strings.Contains(out.String(), "--standby") && !strings.Contains(out.String(), "-standby") {
		t.Fatalf("help: exit %d\n%s", code, out.String())
	}
}

// freePort returns a loopback address free right now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestRunsEmbeddedAndStopsClean(t *testing.T) {
	addr := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	args := []string{"--listen", addr, "--token", "tk", "--id", "r1",
		"--etcd-dir", t.TempDir(), "--etcd-client-url", "http://127.0.0.1:0", "--etcd-peer-url", "http://127.0.0.1:0"}
	var out syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, &out, &out) }()

	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get("http://" + addr + "/_health")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(b), `"leading":true`) || !strings.Contains(string(b), `"router":"r1"`) {
				t.Fatalf("health: %s", b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("router never answered: %v\n%s", err, out.String())
		}
		select {
		case code := <-done:
			t.Fatalf("router exited %d\n%s", code, out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/_shard/nodes", nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %d", resp.StatusCode)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("router did not stop\n%s", out.String())
	}
}

func TestListenInUseExit1(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var out syncBuffer
	args := []string{"--listen", ln.Addr().String(), "--etcd-dir", t.TempDir(),
		"--etcd-client-url", "http://127.0.0.1:0", "--etcd-peer-url", "http://127.0.0.1:0"}
	if code := run(context.Background(), args, &out, &out); code != 1 || !strings.Contains(out.String(), "listen") {
		t.Fatalf("exit %d\n%s", code, out.String())
	}
}

// waitHealth polls a router's /_health until it answers, returning the
// body.
func waitHealth(t *testing.T, client *http.Client, addr string, done <-chan int, out *syncBuffer) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get("http://" + addr + "/_health")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("router at %s never answered: %v\n%s", addr, err, out.String())
		}
		select {
		case code := <-done:
			t.Fatalf("router exited %d\n%s", code, out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestTwoRoutersFormOneDirectory(t *testing.T) {
	peers := map[string]string{}
	for _, name := range []string{"m1", "m2"} {
		u, err := global.FreeLocalURL()
		if err != nil {
			t.Fatal(err)
		}
		peers[name] = u
	}
	cluster := global.InitialCluster(peers)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type proc struct {
		addr string
		out  syncBuffer
		done chan int
	}
	// The routers founding one directory read the same key and password.
	secrets := t.TempDir()
	for f, text := range map[string]string{"directory.key": global.NewKeyText(), "directory.password": global.NewPasswordText()} {
		if err := os.WriteFile(filepath.Join(secrets, f), []byte(text+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	procs := map[string]*proc{}
	for _, name := range []string{"m1", "m2"} {
		p := &proc{addr: freePort(t), done: make(chan int, 1)}
		procs[name] = p
		args := []string{"--listen", p.addr, "--token", "tk", "--id", "r-" + name, "--etcd-dir", t.TempDir(),
			"--etcd-name", name, "--etcd-client-url", "http://127.0.0.1:0", "--etcd-peer-url", peers[name],
			"--etcd-initial-cluster", cluster,
			"--directory-key-file", filepath.Join(secrets, "directory.key"), "--directory-password-file", filepath.Join(secrets, "directory.password")}
		go func() { p.done <- run(ctx, args, &p.out, &p.out) }()
	}
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	leaders := 0
	for _, name := range []string{"m1", "m2"} {
		p := procs[name]
		if strings.Contains(waitHealth(t, client, p.addr, p.done, &p.out), `"leading":true`) {
			leaders++
		}
	}
	// One directory, one leader: the second router to claim found the
	// first's record and left it.
	if leaders != 1 {
		t.Fatalf("%d routers lead\nm1:\n%s\nm2:\n%s", leaders, procs["m1"].out.String(), procs["m2"].out.String())
	}
	cancel()
	for name, p := range procs {
		select {
		case code := <-p.done:
			if code != 0 {
				t.Fatalf("%s exit %d\n%s", name, code, p.out.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not stop\n%s", name, p.out.String())
		}
	}
}

// TestLogFormatJSON: with --log-format json every line the router writes,
// its embedded etcd member's too, is one JSON object with each key once;
// --log-level debug lets etcd's start-up through.
func TestLogFormatJSON(t *testing.T) {
	addr := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	args := []string{"--listen", addr, "--token", "tk", "--id", "r1", "--log-format", "json", "--log-level", "debug",
		"--etcd-dir", t.TempDir(), "--etcd-client-url", "http://127.0.0.1:0", "--etcd-peer-url", "http://127.0.0.1:0"}
	var out syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, &out, &out) }()
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	waitHealth(t, client, addr, done, &out)
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d\n%s", code, out.String())
	}
	etcd := 0
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		dec := json.NewDecoder(strings.NewReader(line))
		tok, err := dec.Token()
		if err != nil || tok != json.Delim('{') {
			t.Fatalf("not a JSON object: %q", line)
		}
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			if seen[k.(string)] {
				t.Fatalf("key %q twice: %s", k, line)
			}
			seen[k.(string)] = true
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
		}
		if strings.Contains(line, `"part":"etcd"`) {
			etcd++
		}
	}
	if etcd == 0 {
		t.Fatalf("no line of etcd's:\n%s", out.String())
	}
}

func TestVersion(t *testing.T) {
	var out, errb syncBuffer
	if code := run(context.Background(), []string{"--version"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "fenec-shard ") {
		t.Fatalf("exit %d: %q %q", code, out.String(), errb.String())
	}
}

func TestPprofOnLoopbackWhileServing(t *testing.T) {
	addr, prof := freePort(t), freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	args := []string{"--listen", addr, "--pprof", prof,
		"--etcd-dir", t.TempDir(), "--etcd-client-url", "http://127.0.0.1:0", "--etcd-peer-url", "http://127.0.0.1:0"}
	var out syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, &out, &out) }()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	waitHealth(t, client, addr, done, &out)
	resp, err := client.Get("http://" + prof + "/debug/pprof/heap?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "heap profile") {
		t.Fatalf("heap profile: %d %.200s", resp.StatusCode, b)
	}
	// The router's own listener serves no profiles.
	resp, err = client.Get("http://" + addr + "/debug/pprof/heap")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == 200 {
		t.Fatal("the router's listener served a profile")
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("router did not stop\n%s", out.String())
	}
	if _, err := client.Get("http://" + prof + "/debug/pprof/"); err == nil {
		t.Fatal("profiles still served after the router stopped")
	}
}

// TestFlagTokenRefusedOffLoopback: off loopback a router refuses its
// token given on the command line, naming --token-file, and does not
// show it.
func TestFlagTokenRefusedOffLoopback(t *testing.T) {
	var out syncBuffer
	code := run(context.Background(), []string{"--listen", "0.0.0.0:7700", "--token", "router-secret",
		"--tls-cert", "c.pem", "--tls-key", "k.pem", "--etcd-dir", t.TempDir()}, &out, &out)
	if code == 0 || !strings.Contains(out.String(), "--token-file") || strings.Contains(out.String(), "router-secret") {
		t.Fatalf("exit %d, want a refusal naming --token-file and not the token:\n%s", code, out.String())
	}
}
