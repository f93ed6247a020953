package main

import (
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// pair is a connected pair of TCP sockets on loopback.
func pair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		got <- c
	}()
	a, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-got
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a.(*net.TCPConn), b.(*net.TCPConn)
}

// TestPipeHoldsEachWay: bytes through two pipes, one each way, come back
// no sooner than twice the delay, all of them, and the end of one side's
// writing reaches the other.
func TestPipeHoldsEachWay(t *testing.T) {
	const delay = 40 * time.Millisecond
	client, proxyIn := pair(t)
	proxyOut, server := pair(t)
	go pipe(proxyOut, proxyIn, delay)
	go pipe(proxyIn, proxyOut, delay)
	go func() { // the server echoes until the client's end
		io.Copy(server, server)
		server.CloseWrite()
	}()

	msg := make([]byte, 200<<10)
	for i := range msg {
		msg[i] = byte(i)
	}
	start := time.Now()
	go func() {
		client.Write(msg)
		client.CloseWrite()
	}()
	back, err := io.ReadAll(client)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(msg) {
		t.Fatalf("got %d bytes back, sent %d", len(back), len(msg))
	}
	for i := range back {
		if back[i] != msg[i] {
			t.Fatalf("byte %d: got %d, want %d", i, back[i], msg[i])
		}
	}
	if took < 2*delay {
		t.Fatalf("the round trip took %v, under twice the delay (%v)", took, 2*delay)
	}
}

// TestServeClosesWhatWasNotRedirected: a connection that iptables did not
// redirect was sent to the proxy itself (or has no original address); the
// proxy resets it rather than dial itself.
func TestServeClosesWhatWasNotRedirected(t *testing.T) {
	client, in := pair(t)
	done := make(chan struct{})
	go func() {
		serve(context.Background(), in, &net.Dialer{}, time.Millisecond)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("serve kept a connection it could not place")
	}
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := client.Read(make([]byte, 1))
	if ne, ok := err.(net.Error); n != 0 || err == nil || ok && ne.Timeout() {
		t.Fatalf("read %d, %v: want the connection closed", n, err)
	}
}

// TestRunStopsWithItsContext: the proxy's listener closes and run returns
// once its context ends.
func TestRunStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, "127.0.0.1:0", time.Millisecond, 0, time.Second) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
}
