package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
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
	} {
		var out syncBuffer
		if code := run(context.Background(), args, &out); code != 2 {
			t.Fatalf("%v: exit %d, want 2 (%s)", args, code, out.String())
		}
	}
	var out syncBuffer
	if code := run(context.Background(), []string{"-h"}, &out); code != 0 || !strings.Contains(out.String(), "--standby") && !strings.Contains(out.String(), "-standby") {
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
	go func() { done <- run(ctx, args, &out) }()

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
