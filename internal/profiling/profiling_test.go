package profiling

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRefusesAnAddressOffLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "10.1.2.3:0", "example.org:0", "nonsense"} {
		s, err := Start(addr, nil)
		if err == nil {
			s.Close()
			t.Fatalf("Start(%q) served profiles off loopback", addr)
		}
		if addr != "nonsense" && !errors.Is(err, ErrNotLoopback) {
			t.Errorf("Start(%q) = %v, want ErrNotLoopback", addr, err)
		}
	}
}

func TestServesProfilesUntilClosed(t *testing.T) {
	s, err := Start("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := c.Get("http://" + s.Addr() + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(b), "goroutine profile:") {
		t.Fatalf("goroutine profile: %d %.200s", res.StatusCode, b)
	}
	// Nothing but the profiles is served there.
	res, err = c.Get("http://" + s.Addr() + "/t/acme/kv")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 404 {
		t.Errorf("a data path on the profile listener: %d, want 404", res.StatusCode)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := c.Get("http://" + s.Addr() + "/debug/pprof/"); err == nil {
		t.Error("profiles still served after Close")
	}
}
