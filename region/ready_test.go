package region

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/testkit"
)

// heldListDirectory is a directory whose lists wait until release is closed:
// a router over it has not got its directory yet.
type heldListDirectory struct {
	global.Directory
	release chan struct{}
}

func (g *heldListDirectory) List(ctx context.Context, prefix string) ([]global.KV, int64, error) {
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	return g.Directory.List(ctx, prefix)
}

// TestReadyFollowsDirectoryAndClose: /_ready answers 503 with Retry-After
// until the router holds its directory, 200 then, and 503 again once Close
// has begun; /_health answers all along.
func TestReadyFollowsDirectoryAndClose(t *testing.T) {
	mem := global.NewMemory()
	defer mem.Close()
	dir := &heldListDirectory{Directory: mem, release: make(chan struct{})}
	cfg := DefaultConfig()
	cfg.Listen, cfg.Token, cfg.Logger = "127.0.0.1:0", cpRouterToken, testkit.Logger()
	cfg.Directory, cfg.Standby = dir, true
	rt, err := NewRouter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	base := "http://" + rt.Addr()

	st, hdr, body := cpDo(t, http.MethodGet, base+"/_ready", "", nil, nil)
	if st != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" || !strings.Contains(string(body), `"error"`) {
		t.Fatalf("ready before the directory: %d %v %s", st, hdr, body)
	}
	if st, _, body := cpDo(t, http.MethodGet, base+"/_health", "", nil, nil); st != http.StatusOK {
		t.Fatalf("health before the directory: %d %s", st, body)
	}
	if st, _, _ := cpDo(t, http.MethodPost, base+"/_ready", "", nil, nil); st != http.StatusMethodNotAllowed {
		t.Fatalf("POST /_ready: %d", st)
	}
	close(dir.release)
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, _, body := cpDo(t, http.MethodGet, base+"/_ready", "", nil, nil)
		if st == http.StatusOK && strings.Contains(string(body), `"ready":true`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never ready: %d %s", st, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	rt.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/_ready", nil))
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "shutting down") {
		t.Fatalf("ready after Close: %d %s", w.Code, w.Body.String())
	}
}
