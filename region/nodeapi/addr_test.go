package nodeapi

import "testing"

func TestNormalizeAddr(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"127.0.0.1:7071", "http://127.0.0.1:7071"},
		{"http://127.0.0.1:7071", "http://127.0.0.1:7071"},
		{"http://127.0.0.1:7071/", "http://127.0.0.1:7071"},
		{"HTTP://LocalHost:7071", "http://localhost:7071"},
		{"  https://n1.internal:443 ", "https://n1.internal:443"},
		{"http://[::1]:7071", "http://[::1]:7071"},
		{"ftp://h:1", ""},
		{"http://h:1/x", ""},
		{"http://h:1/./.", ""},
		{"http://u:p@h:1", ""},
		{"http://h:1?x=1", ""},
		{"http://h:1#f", ""},
		{"http://:7071", ""},
		{"", ""},
	} {
		got, err := NormalizeAddr(c.in)
		if (err != nil) != (c.want == "") || got != c.want {
			t.Errorf("NormalizeAddr(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestNormalizeAddrSaysWhy(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"ftp://h:1", `addr "ftp://h:1": the scheme must be http or https`},
		{"http://:7071", `addr "http://:7071": no host`},
		{"http://h:1?x=1", `addr "http://h:1?x=1": want scheme://host:port and nothing else`},
		{"http://h:1/x", `addr "http://h:1/x": a node's address has no path`},
	} {
		_, err := NormalizeAddr(c.in)
		if err == nil || err.Error() != c.want {
			t.Errorf("NormalizeAddr(%q): %v; want %q", c.in, err, c.want)
		}
	}
}

func TestSameAddr(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"127.0.0.1:7071", "http://127.0.0.1:7071/", true},
		{"HTTP://N1:80", "http://n1:80", true},
		{"http://n1:80", "https://n1:80", false},
		{"http://n1:80", "http://n1:81", false},
		{"ftp://n1:80", "ftp://n1:80", false}, // neither is an address
		{"", "", false},
	} {
		if got := SameAddr(c.a, c.b); got != c.want {
			t.Errorf("SameAddr(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
