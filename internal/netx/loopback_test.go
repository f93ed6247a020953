package netx

import "testing"

func TestLoopbackHost(t *testing.T) {
	for _, tc := range []struct {
		host string
		want bool
	}{
		{"127.0.0.1", true},
		{"127.1.2.3", true},
		{"127.255.255.254", true},
		{"::1", true},
		{"::ffff:127.0.0.1", true},
		{"localhost", true},
		{"", false},
		{"0.0.0.0", false},
		{"::", false},
		{"10.0.0.1", false},
		{"128.0.0.1", false},
		{"::2", false},
		{"LOCALHOST", false},
		{"localhost.", false},
		{"localhost.example.com", false},
		{"example.com", false},
		{"127.0.0.1.example.com", false},
		{"[::1]", false},
		{"127.0.0.1:80", false},
	} {
		if got := LoopbackHost(tc.host); got != tc.want {
			t.Errorf("LoopbackHost(%q) = %v, want %v", tc.host, got, tc.want)
		}
	}
}

func TestLoopbackAddr(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:7070", true},
		{"127.0.0.1:0", true},
		{"127.9.8.7:80", true},
		{"[::1]:7070", true},
		{"localhost:7070", true},
		{":7070", false},
		{"0.0.0.0:7070", false},
		{"[::]:7070", false},
		{"10.1.2.3:7070", false},
		{"example.com:7070", false},
		{"localhost.example.com:7070", false},
		{"127.0.0.1", false},
		{"localhost", false},
		{"::1", false},
		{"[::1]", false},
		{"", false},
	} {
		if got := LoopbackAddr(tc.addr); got != tc.want {
			t.Errorf("LoopbackAddr(%q) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

func TestLoopbackURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want bool
	}{
		{"http://127.0.0.1:2379", true},
		{"https://127.0.0.2:7070", true},
		{"http://[::1]:2379", true},
		{"http://localhost:2379", true},
		{"http://localhost", true},
		{"http://0.0.0.0:2379", false},
		{"http://[::]:2379", false},
		{"https://n1.internal:7070", false},
		{"http://10.0.0.1:2379", false},
		{"http://localhost.example.com:2379", false},
		{"http://:2379", false},
		{"127.0.0.1:2379", false}, // no scheme: not a URL
		{"", false},
		{"http://%zz", false},
	} {
		if got := LoopbackURL(tc.url); got != tc.want {
			t.Errorf("LoopbackURL(%q) = %v, want %v", tc.url, got, tc.want)
		}
	}
}
