package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestReadCopiesRegions: `fenec read-copies T --regions us,ap` sends the
// regions, one copy each; NODEs with it, --none with it, or an empty
// region are usage errors that send nothing.
func TestReadCopiesRegions(t *testing.T) {
	var mu sync.Mutex
	var got []string // guarded by mu: the bodies the router was sent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" "+string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"tenant": "t1", "node": "eu1", "read_copies": ["ap1", "us1"], "added": ["ap1", "us1"], "dropped": []}`)
	}))
	defer srv.Close()
	ctx := context.Background()
	for _, args := range [][]string{
		{"read-copies", "t1", "us1", "--regions", "us"},
		{"read-copies", "t1", "--none", "--regions", "us"},
		{"read-copies", "t1", "--regions", "us,,ap"},
		{"read-copies", "t1", "--regions", ","},
	} {
		if code, _, errOut := cli(ctx, append(args, "--router", srv.URL)...); code != 2 {
			t.Errorf("fenec %q: exit %d, want 2 (%s)", args, code, errOut)
		}
	}
	mu.Lock()
	if len(got) != 0 {
		t.Fatalf("a usage error sent %q", got)
	}
	mu.Unlock()
	code, out, errOut := cli(ctx, "read-copies", "t1", "--regions", "us,ap", "--router", srv.URL)
	if code != 0 || !strings.Contains(out, "ap1") {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != `PUT /_shard/tenants/t1/read-copies {"regions":["us","ap"]}` {
		t.Fatalf("the router was sent %q", got)
	}
}
